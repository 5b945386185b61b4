"""A refused feedback is worded as a sentence: "… may not give feedback at …", not "may not feedback"."""

from __future__ import annotations

from bot.engine import permissions
from bot.engine.people import People
from bot.engine.workflow import SteeringPoint
from store.models import Actor, Approvers


def test_a_refused_feedback_reads_as_a_sentence() -> None:
    point = SteeringPoint(name="review", title="Review it", approvers=Approvers(people=("priya",)))
    rob = Actor(id="rob", name="rob", channel="console", person="rob")
    reason = permissions.refusal(point, "feedback", rob, None, People())
    assert reason == "rob may not give feedback at 'Review it': only priya may", reason
    assert permissions.refusal(point, "approve", rob, None, People()).startswith("rob may not approve at ")
