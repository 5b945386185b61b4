"""A one-step workflow with one steering point that offers every decision (the console and audit tests)."""

from __future__ import annotations

from pydantic import BaseModel

from hazel import StepContext, Workflow


class Doc(BaseModel):
    text: str = ""


def reviewed() -> Workflow:
    """``reviewed`` v1: ``draft`` writes "a draft" (keeping a text it already has), then ``review`` shows it
    and offers approve, edit, reject, feedback and rewind."""
    wf = Workflow("reviewed", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state.model_copy(update={"text": state.text or "a draft"})

    wf.steer("review", show="text", actions=["approve", "edit", "reject", "feedback", "rewind"])
    return wf
