"""A workflow whose state holds a mapping that changes between steps (loaded by path in CLI tests)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from hazel import StepContext, Workflow


class PlanState(BaseModel):
    plan: dict[str, Any] = Field(default_factory=dict)


plans = Workflow("plan-review", version=1, state=PlanState, description="outline, review, expand")


@plans.step
def outline(state: PlanState, ctx: StepContext) -> PlanState:
    return state.model_copy(update={"plan": {"title": "Move the database", "steps": 1}})


plans.steer("review", title="Review the outline", show="plan")


@plans.step
def expand(state: PlanState, ctx: StepContext) -> PlanState:
    return state.model_copy(update={"plan": {**state.plan, "steps": state.plan["steps"] + 4, "owner": "bob"}})
