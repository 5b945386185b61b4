"""A workflow whose run has more checkpoints than a rewind lists (100): ``prepare``, then ``loop`` going to
itself (``ctx.goto``) until it has run ``loops`` times (the run's input; ``LOOPS`` by default), then the steering
point ``review``. Checkpoint #0 runs ``prepare`` next, #1 ``loop`` (where it starts), #2 … #LOOPS ``loop``
again, #LOOPS+1 ``review``: 152 checkpoints the run can continue from by default."""

from __future__ import annotations

from typing import Sequence

from pydantic import BaseModel

from hazel import Approvers, StepContext, Workflow

LOOPS = 150


class Loop(BaseModel):
    topic: str = "t"
    loops: int = LOOPS
    turns: int = 0


def looping(*, approvers: Approvers, channel: str = "console", name: str = "looping",
            actions: Sequence[str] = ("approve", "rewind"), permissions: dict | None = None) -> Workflow:
    """The workflow ``name``, its ``review`` (``actions``, ``permissions``) asked on ``channel`` of
    ``approvers``."""
    wf = Workflow(name, state=Loop)

    @wf.step
    def prepare(state: Loop, ctx: StepContext) -> Loop:
        return state

    @wf.step
    def loop(state: Loop, ctx: StepContext) -> Loop:
        if state.turns + 1 < state.loops:
            ctx.goto("loop")
        return state.model_copy(update={"turns": state.turns + 1})

    wf.steer("review", title="Review the loop", show="turns", actions=list(actions), approvers=approvers,
             channel=channel, permissions=permissions)
    return wf
