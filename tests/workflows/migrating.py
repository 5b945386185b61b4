"""``mig``: a v1 whose run waits at ``review`` (shows ``plan``), and a v2 whose state model adds a required
``owner`` and whose migration from v1 is the test's (``v2(migrate)``): for the tests of migrations that fail."""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel

from hazel import Approvers, StepContext, Workflow


class S1(BaseModel):
    plan: str = ""


class S2(BaseModel):
    plan: str = ""
    owner: str


def v1(channel: str = "console", approvers: Approvers | None = None) -> Workflow:
    wf = Workflow("mig", version=1, state=S1)

    @wf.step
    def draft(state: S1, ctx: StepContext) -> S1:
        return S1(plan="the plan")

    wf.steer("review", show="plan", actions=["approve", "edit", "rewind"], channel=channel,
             approvers=approvers or Approvers())
    return wf


def v2(migrate: Callable[[dict], Any], state: type[BaseModel] = S2, channel: str = "console",
       approvers: Approvers | None = None) -> Workflow:
    wf = Workflow("mig", version=2, state=state)
    wf.migration(from_version=1)(migrate)

    @wf.step
    def draft(state: Any, ctx: StepContext) -> Any:
        return {"plan": "the plan", "owner": "x"}

    wf.steer("review", show="plan", actions=["approve", "edit", "rewind"], channel=channel,
             approvers=approvers or Approvers())
    return wf
