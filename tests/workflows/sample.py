"""Workflows used by the engine and CLI tests (loaded by path through HAZEL_WORKFLOWS in CLI tests)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from hazel import StepContext, Workflow


class DocState(BaseModel):
    topic: str = Field(min_length=1)
    draft: str = ""
    notes: list[str] = Field(default_factory=list)
    drafts: int = 0
    published: bool = False


docs = Workflow("doc-review", version=1, state=DocState, description="draft, review, publish")


@docs.step
def write_draft(state: DocState, ctx: StepContext) -> DocState:
    note = f"feedback from {ctx.feedback_by}: {ctx.feedback}" if ctx.feedback else "first draft"
    return state.model_copy(update={"draft": f"About {state.topic} (v{state.drafts + 1})", "drafts": state.drafts + 1,
                                    "notes": [*state.notes, note]})


docs.steer("review", title="Review the draft", show="draft", on_feedback="write_draft")


@docs.step
def publish(state: DocState, ctx: StepContext) -> DocState:
    return state.model_copy(update={"published": True})


class Budget(BaseModel):
    purpose: str
    amount: int = Field(default=0, ge=0)
    spent: bool = False


budget = Workflow("budget", version=1, state=Budget)


@budget.step
def propose(state: Budget, ctx: StepContext) -> Budget:
    return state.model_copy(update={"amount": 100 if not ctx.feedback else 50})


budget.steer("approve_budget", title="Approve the budget", show="amount", on_feedback="propose")

FAIL = {"spend": 0}
"""How many more times ``spend`` fails (tests set it)."""


@budget.step(max_attempts=1)
def spend(state: Budget, ctx: StepContext) -> Budget:
    if FAIL["spend"] > 0:
        FAIL["spend"] -= 1
        raise RuntimeError("payment provider down")
    return state.model_copy(update={"spent": True})
