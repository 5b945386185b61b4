"""A workflow for the crash test: every step records itself in a side-effect log; ``slow`` blocks while the
block file exists, so the test can SIGKILL the process in the middle of it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel, Field

from hazel import StepContext, Workflow

DIR = Path(os.environ.get("CRASHY_DIR", "."))


class Tally(BaseModel):
    total: int = 0
    trail: list[str] = Field(default_factory=list)


def _record(name: str, ctx: StepContext) -> None:
    with open(DIR / "effects.log", "a", encoding="utf-8") as fh:
        fh.write(f"{name} {ctx.idempotency_key}\n")


crashy = Workflow("crashy", version=1, state=Tally)


@crashy.step
def first(state: Tally, ctx: StepContext) -> Tally:
    _record("first", ctx)
    return state.model_copy(update={"total": state.total + 1, "trail": [*state.trail, "first"]})


@crashy.step
def second(state: Tally, ctx: StepContext) -> Tally:
    _record("second", ctx)
    return state.model_copy(update={"total": state.total * 10, "trail": [*state.trail, "second"]})


@crashy.step
def slow(state: Tally, ctx: StepContext) -> Tally:
    _record("slow-start", ctx)
    (DIR / "slow.started").touch()
    while (DIR / "block").exists():
        time.sleep(0.05)
    _record("slow-end", ctx)
    return state.model_copy(update={"total": state.total + 7, "trail": [*state.trail, "slow"]})


@crashy.step
def last(state: Tally, ctx: StepContext) -> Tally:
    _record("last", ctx)
    return state.model_copy(update={"total": state.total * 2, "trail": [*state.trail, "last"]})
