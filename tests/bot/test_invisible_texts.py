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


def edited() -> Workflow:
    wf = Workflow("edited", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer("review", show="text", actions=["approve", "edit"])
    return wf


@pytest.mark.parametrize("payload", [{"text": "\u200b"}, {"value": "\ufeff\u00ad", "allow_empty": False},
                                     {"text": " \u2060 "}])
def test_an_invisible_edit_is_blank(db_url: str, payload: dict) -> None:
    """An edit whose new text prints as nothing is refused as a blank one is, unless allowed (a fresh-user
    finding: ``--set draft=\\u200b`` was stored, replacing the draft with nothing visible)."""
    hazel = make_hazel(db_url, edited())
    run = hazel.start(workflow="edited", input={}, actor=person("sam"), claim=True)
    hazel.drive(run_id=run.id)
    with pytest.raises(InvalidDecisionError, match="blank .*characters that print as nothing"):
        hazel.decide(run_id=run.id, action="edit", actor=person("sam"), payload=payload)
    assert hazel.decisions(run_id=run.id) == []
    done = hazel.decide(run_id=run.id, action="edit", actor=person("sam"), payload={**payload, "allow_empty": True})
    assert done.decision.payload["value"] == payload.get("text", payload.get("value"))  # allowed: kept as sent
