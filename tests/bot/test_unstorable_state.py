"""A step whose state holds text no database can store (a lone surrogate, e.g. from bytes decoded with
``surrogateescape``) fails like a step that raised: it is retried, then the run is ``failed`` with the reason,
and the worker goes on with other runs (it used to crash the worker loop at every lease, the run left
``running``)."""

from __future__ import annotations

from pydantic import BaseModel

from hazel import StepContext, Workflow
from store.models import Actor, RunStatus
from tests.support.engine import make_hazel


class Note(BaseModel):
    text: str = ""


def unstorable_workflow() -> Workflow:
    wf = Workflow("unstorable", version=1, state=Note)

    @wf.step(max_attempts=2, backoff_sec=0)
    def write(state: Note, ctx: StepContext) -> Note:
        return Note.model_construct(text=state.text + " \udc9b")  # (model_construct: no validation)

    return wf


def fine_workflow() -> Workflow:
    wf = Workflow("fine", version=1, state=Note)

    @wf.step
    def write(state: Note, ctx: StepContext) -> Note:
        return Note(text=state.text + " done")

    return wf


def test_a_state_that_cannot_be_stored_fails_its_run_and_others_go_on(db_url: str) -> None:
    hazel = make_hazel(db_url, unstorable_workflow(), fine_workflow())
    olga = Actor(channel="console", id="olga")
    bad = hazel.start(workflow="unstorable", input={"text": "x"}, actor=olga)
    good = hazel.start(workflow="fine", input={"text": "y"}, actor=olga)
    hazel.drive(run_id=bad.id)  # raised before (the worker loop logged it and took the run again and again)
    hazel.drive(run_id=good.id)
    failed = hazel.get(run_id=bad.id)
    assert failed.status is RunStatus.FAILED, failed
    assert "cannot be stored" in (failed.error or "")
    assert hazel.get(run_id=good.id).status is RunStatus.COMPLETED
    assert len(hazel.checkpoints(run_id=bad.id)) == 1  # only #0: nothing of the step was written
