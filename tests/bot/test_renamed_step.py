"""A native step renamed under the same version (a fresh-user finding, s33 F17): ``hazel retry`` of a run that
goes on with the old name failed with a bare ``KeyError: 'work'``, and each rewind wrote a checkpoint that failed
at once. Now a retry and a rewind are refused, nothing written, and a run a worker finds so fails saying why;
SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from bot.engine import InvalidDecisionError, RunStateError
from hazel import StepContext, Workflow
from store.models import RunStatus
from tests.support.engine import make_hazel, person


class S(BaseModel):
    x: int = 0


def ren(step: str, *, fail: bool = False) -> Workflow:
    wf = Workflow("ren", version=1, state=S)

    def work(state: S, ctx: StepContext) -> S:
        if fail:
            raise RuntimeError("down")
        return S(x=state.x + 1)

    wf.step(work, name=step, max_attempts=1)
    wf.steer("review", show="x", actions=["approve", "rewind"])
    return wf


SAID = ("goes on with step 'work', which ren v1 does not have (renamed or removed under the same version?); deploy "
        "the code the run was written with, or the change as a new version, or rewind the run to a checkpoint "
        "that goes on with a step it has")


def test_a_retry_and_a_rewind_to_a_renamed_step_are_refused(db_url: str) -> None:
    old = make_hazel(db_url, ren("work", fail=True))
    run = old.start(workflow="ren", input={}, actor=person("olga"))
    old.drive(run_id=run.id)
    assert old.get(run_id=run.id).status is RunStatus.FAILED
    renamed = make_hazel(db_url, ren("work2"))
    with pytest.raises(RunStateError, match=SAID.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        renamed.retry(run_id=run.id, actor=person("olga"))
    with pytest.raises(InvalidDecisionError, match=r"^checkpoint #0: run \w+ goes on with step 'work'"):
        renamed.rewind(run_id=run.id, actor=person("olga"), to=0)
    assert [c.seq for c in renamed.checkpoints(run_id=run.id)] == [0]  # nothing written
    assert renamed.get(run_id=run.id).status is RunStatus.FAILED
    fixed = make_hazel(db_url, ren("work"))  # the code the run was written with: it goes on
    fixed.retry(run_id=run.id, actor=person("olga"))
    fixed.drive(run_id=run.id)
    assert fixed.get(run_id=run.id).status is RunStatus.WAITING


def test_a_run_a_worker_finds_going_on_with_a_renamed_step_fails_saying_why(db_url: str) -> None:
    old = make_hazel(db_url, ren("work"))
    run = old.start(workflow="ren", input={}, actor=person("olga"))  # ready: not driven yet
    renamed = make_hazel(db_url, ren("work2"))
    renamed.drive(run_id=run.id)
    failed = renamed.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED and SAID in failed.error and "KeyError" not in failed.error, failed.error


def test_a_point_renamed_under_the_same_version_is_named_as_such(db_url: str) -> None:
    """s34 F11: "which ren v1 does not have as a steering point; it stays on v1", when v1 is what is deployed."""
    from bot.engine import VersionUnavailableError

    def with_point(point: str) -> Workflow:
        wf = Workflow("renp", version=1, state=S)
        wf.step(lambda state, ctx: S(x=1), name="work")
        wf.steer(point, show="x", actions=["approve"])
        return wf

    old = make_hazel(db_url, with_point("review"))
    run = old.start(workflow="renp", input={}, actor=person("olga"))
    old.drive(run_id=run.id)
    renamed = make_hazel(db_url, with_point("check"))
    with pytest.raises(VersionUnavailableError, match=r"waits at 'review', which renp v1 does not have as a steering "
                       r"point \(renamed or removed under the same version\?\); deploy the code the run was written "
                       r"with, or cancel the run; it stays as it is$"):
        renamed.decide(run_id=run.id, action="approve", actor=person("olga"))
