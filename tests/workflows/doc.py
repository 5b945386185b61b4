"""Small workflows for the REST API, hook and operations tests.

``doc``: draft a plan, review it (approvers ``alice`` and ``api``; feedback from anyone), publish.
``flaky``: one step that fails its first attempt for each run (``max_attempts=1``: the run fails, a retry
completes it).
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from hazel import Approvers, StepContext, Workflow


class Plan(BaseModel):
    steps: list[str]
    minutes: int = Field(ge=1)


class Doc(BaseModel):
    topic: str = Field(min_length=3)
    plan: Plan | None = None
    feedback: list[str] = Field(default_factory=list)
    published: bool = False


def doc_workflow() -> Workflow:
    wf = Workflow("doc", version=1, state=Doc, description="Plan a document, review it, publish it.")

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        seen = [*state.feedback, ctx.feedback] if ctx.feedback else state.feedback
        return state.model_copy(update={"plan": Plan(steps=[f"write {state.topic}", *seen], minutes=30),
                                        "feedback": seen})

    wf.steer("review", title="Review the plan", show="plan", approvers=Approvers(users=["alice", "api"]),
             permissions={"feedback": "anyone"})

    @wf.step
    def publish(state: Doc, ctx: StepContext) -> Doc:
        return state.model_copy(update={"published": True})

    return wf


ATTEMPTS: Counter[str] = Counter()


def flaky_workflow() -> Workflow:
    """Its only step fails the first time for each run."""
    wf = Workflow("flaky", version=1, state=Doc)

    @wf.step(max_attempts=1)
    def work(state: Doc, ctx: StepContext) -> Doc:
        ATTEMPTS[ctx.run_id] += 1
        if ATTEMPTS[ctx.run_id] == 1:
            raise RuntimeError("first attempt fails")
        return state.model_copy(update={"published": True})

    return wf


doc = doc_workflow()
flaky = flaky_workflow()
"""Top-level instances, for ``HAZEL_WORKFLOWS=tests/workflows/doc.py`` (the CLI tests)."""
