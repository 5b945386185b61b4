"""A workflow whose run has more checkpoints than a rewind lists (100): ``prepare``, then ``loop`` going to
itself (``ctx.goto``) until it has run ``LOOPS`` times, then the steering point ``review``. Checkpoint #0 runs
``prepare`` next, #1 ``loop`` (where it starts), #2 … #150 ``loop`` again, #151 ``review``: 152 checkpoints the
run can continue from."""

from __future__ import annotations

from pydantic import BaseModel

from hazel import Approvers, StepContext, Workflow

LOOPS = 150


class Loop(BaseModel):
    topic: str = "t"
    turns: int = 0


def looping(*, channel: str, approvers: Approvers) -> Workflow:
    """The workflow ``looping``, its ``review`` (approve or rewind) asked on ``channel`` of ``approvers``."""
    wf = Workflow("looping", state=Loop)

    @wf.step
    def prepare(state: Loop, ctx: StepContext) -> Loop:
        return state

    @wf.step
    def loop(state: Loop, ctx: StepContext) -> Loop:
        if state.turns + 1 < LOOPS:
            ctx.goto("loop")
        return state.model_copy(update={"turns": state.turns + 1})

    wf.steer("review", title="Review the loop", show="turns", actions=["approve", "rewind"], channel=channel,
             approvers=approvers)
    return wf
