"""A reject's reason or a feedback's text made only of characters that print as nothing (a zero-width space,
U+FEFF, a soft hyphen) is refused as a blank one is: it was recorded, and read as no reason in the history."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from bot.engine.errors import InvalidDecisionError
from hazel import StepContext, Workflow
from tests.support.engine import make_hazel, person


class Doc(BaseModel):
    text: str = "draft"


def reviewed() -> Workflow:
    wf = Workflow("reviewed", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer("review", actions=["approve", "reject", "feedback"])
    return wf


@pytest.mark.parametrize("text", ["\u200b", "\ufeff", "\u00ad", " \u200b\u2060 "])
def test_an_invisible_reason_or_feedback_is_blank(db_url: str, text: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    run = hazel.start(workflow="reviewed", input={}, actor=person("sam"), claim=True)
    hazel.drive(run_id=run.id)
    with pytest.raises(InvalidDecisionError, match="a rejection needs a reason"):
        hazel.decide(run_id=run.id, action="reject", actor=person("sam"), payload={"reason": text})
    with pytest.raises(InvalidDecisionError, match="feedback needs some text"):
        hazel.decide(run_id=run.id, action="feedback", actor=person("sam"), payload={"text": text})
    assert hazel.decisions(run_id=run.id) == [] and hazel.pending_request(run_id=run.id) is not None
    done = hazel.decide(run_id=run.id, action="reject", actor=person("sam"), payload={"reason": "n\u200bo"})
    assert done.decision.payload["reason"] == "n\u200bo"  # (visible text around them: kept as it was sent)
