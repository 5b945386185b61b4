"""A workflow for the multi-process tests: each step appends ``<step> <idempotency key> <phase>`` to a log file of
its own process (``FLEET_DIR/effects-<pid>.log``), so the test can count executions across processes and see
which ones a kill cut short (a ``start`` without its ``end``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel

from hazel import StepContext, Workflow

DIR = Path(os.environ.get("FLEET_DIR", "."))
STEP_SEC = float(os.environ.get("FLEET_STEP_SEC", "0.01"))
REMIND_SEC = float(os.environ.get("FLEET_REMIND_SEC", "0")) or None


class Job(BaseModel):
    n: int = 0
    trail: list[str] = []


def _log(step: str, ctx: StepContext, phase: str) -> None:
    with open(DIR / f"effects-{os.getpid()}.log", "a", encoding="utf-8") as fh:
        fh.write(f"{step} {ctx.idempotency_key} {phase}\n")
        fh.flush()


def _step(name: str):  # noqa: ANN202
    def run(state: Job, ctx: StepContext) -> Job:
        _log(name, ctx, "start")
        time.sleep(STEP_SEC)
        _log(name, ctx, "end")
        return state.model_copy(update={"n": state.n + 1, "trail": [*state.trail, name]})

    run.__name__ = name
    return run


fleet = Workflow("fleet", version=1, state=Job)
fleet.step(_step("prep"))
fleet.steer("go", title="Go ahead?", remind_after_sec=REMIND_SEC)
fleet.step(_step("work"))
fleet.step(_step("finish"))
