"""A step's checkpoint, its run's update and the steering request it opens are stamped when they are committed,
after the step ran, not when it started: a 10-minute LLM step before a point with ``timeout_sec=600`` gave the
SME nothing (the request was due before it was posted)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from hazel import StepContext, Workflow
from store.models import Actor
from tests.support.clock import FakeClock
from tests.support.engine import make_hazel

STEP_SEC = 420.0


class Draft(BaseModel):
    text: str = ""


def slow_workflow(clock: FakeClock) -> Workflow:
    wf = Workflow("slow", version=1, state=Draft)

    @wf.step
    def write(state: Draft, ctx: StepContext) -> Draft:
        clock.advance(STEP_SEC)  # a long LLM call
        return Draft(text="done")

    wf.steer("review", show="text", timeout_sec=600, on_timeout="reject")
    return wf


def test_a_request_after_a_long_step_is_due_its_whole_timeout_after_it_is_asked(db_url: str) -> None:
    clock = FakeClock()
    hazel = make_hazel(db_url, slow_workflow(clock), clock=clock)
    started_at = clock()
    run = hazel.start(workflow="slow", input={}, actor=Actor(channel="console", id="olga"))
    hazel.drive(run_id=run.id)
    asked_at = started_at + timedelta(seconds=STEP_SEC)
    request = hazel.pending_request(run_id=run.id)
    assert request.created_at == asked_at
    assert request.due_at == asked_at + timedelta(seconds=600)
    assert hazel.checkpoints(run_id=run.id)[-1].created_at == asked_at
    assert hazel.get(run_id=run.id).updated_at == asked_at
