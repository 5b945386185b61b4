"""Workflow versions across deployments: runs stay on their version, migrate when declared, else wait unchanged."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from hazel import StepContext, Workflow
from bot.engine.errors import VersionUnavailableError
from bot.engine.versions import MIGRATE_NODE, runnable_versions
from store.models import RunStatus
from tests.support.engine import make_hazel, person


class V1(BaseModel):
    title: str
    body: str = ""


class V2(BaseModel):
    headline: str
    body: str = ""
    words: int = 0


def v1() -> Workflow:
    wf = Workflow("article", version=1, state=V1)

    @wf.step
    def write(state: V1, ctx: StepContext) -> V1:
        return state.model_copy(update={"body": f"v1 body about {state.title}"})

    wf.steer("review", show="body")

    @wf.step
    def publish(state: V1, ctx: StepContext) -> V1:
        return state

    return wf


def v2(*, with_migration: bool = True, has_review: bool = True) -> Workflow:
    wf = Workflow("article", version=2, state=V2)

    @wf.step
    def write(state: V2, ctx: StepContext) -> V2:
        return state.model_copy(update={"body": f"v2 body about {state.headline}"})

    if has_review:
        wf.steer("review", show="body")
    else:
        wf.steer("check", show="body")

    @wf.step
    def publish(state: V2, ctx: StepContext) -> V2:
        return state.model_copy(update={"words": len(state.body.split())})

    if with_migration:
        @wf.migration(from_version=1)
        def from_v1(tree: dict) -> dict:
            return {"headline": tree["title"], "body": tree["body"]}

    return wf


def waiting_v1_run(db_url: str) -> str:
    old = make_hazel(db_url, v1())
    run = old.start(workflow="article", input={"title": "caching"}, actor=person("me"))
    assert old.drive(run_id=run.id).run.status is RunStatus.WAITING
    old.close()
    return run.id


def test_a_run_resumes_on_its_own_version_while_registered(db_url: str) -> None:
    run_id = waiting_v1_run(db_url)
    both = make_hazel(db_url, v1(), v2())
    both.decide(run_id=run_id, action="approve", actor=person("sme"))
    assert both.drive(run_id=run_id).run.status is RunStatus.COMPLETED
    assert both.get(run_id=run_id).workflow_version == 1
    new = both.start(workflow="article", input={"headline": "x"}, actor=person("me"))
    assert new.workflow_version == 2


def test_a_declared_migration_moves_the_run_to_the_new_version(db_url: str) -> None:
    run_id = waiting_v1_run(db_url)
    new = make_hazel(db_url, v2())
    outcome = new.decide(run_id=run_id, action="edit", actor=person("sme"), payload={"value": "edited on v2 now"})
    assert outcome.settled
    result = new.drive(run_id=run_id)
    assert result.run.status is RunStatus.COMPLETED and result.run.workflow_version == 2
    state = new.state_at(run_id=run_id)
    assert state == V2(headline="caching", body="edited on v2 now", words=4)
    cps = new.checkpoints(run_id=run_id)
    migrated = [c for c in cps if c.step == MIGRATE_NODE]
    assert len(migrated) == 1 and migrated[0].workflow_version == 2 and migrated[0].next_step == "review"
    assert new.state_at(run_id=run_id, seq=1) == V2(headline="caching", body="v1 body about caching")  # old state, migrated
    assert any(e.action == "run.migrated" for e in new.audit(run_id=run_id))


def test_a_workflow_this_process_does_not_have_names_hazel_workflows(db_url: str) -> None:
    """A run whose workflow has no version registered in this process (a shell without ``HAZEL_WORKFLOWS``,
    as ``make demo-langgraph``'s printed commands run in one): the refusal says to set it, not that a version
    is "not deployed" with no migration (a fresh-user finding)."""
    run_id = waiting_v1_run(db_url)
    other = Workflow("other", version=1, state=V1)
    other.step(lambda state, ctx: state, name="noop")
    shell = make_hazel(db_url, other)
    with pytest.raises(VersionUnavailableError, match="no version of 'article' is registered here \\(registered: "
                                                      "other\\); set HAZEL_WORKFLOWS"):
        shell.decide(run_id=run_id, action="approve", actor=person("sme"))
    assert shell.get(run_id=run_id).status is RunStatus.WAITING


def test_without_a_migration_the_decision_is_refused_and_the_run_stays(db_url: str) -> None:
    run_id = waiting_v1_run(db_url)
    new = make_hazel(db_url, v2(with_migration=False))
    before = (new.get(run_id=run_id), new.checkpoints(run_id=run_id), new.requests(run_id=run_id))
    with pytest.raises(VersionUnavailableError, match="version 1, which is not deployed .*deployed: v2"):
        new.decide(run_id=run_id, action="approve", actor=person("sme"))
    assert (new.get(run_id=run_id), new.checkpoints(run_id=run_id), new.requests(run_id=run_id)) == before
    with pytest.raises(VersionUnavailableError):
        new.rewind(run_id=run_id, actor=person("sme"), to=0)
    assert new.get(run_id=run_id) == before[0]


def test_a_retry_of_a_failed_run_whose_version_is_gone_is_refused_and_the_run_stays_failed(db_url: str) -> None:
    run_id = waiting_v1_run(db_url)
    old = make_hazel(db_url, v1())
    old.decide(run_id=run_id, action="reject", actor=person("sme"), payload={"reason": "no"})
    with old.store.transaction() as tx:  # a failed v1 run (as a step that ran out of attempts leaves it)
        tx.runs.transition(run_id, from_statuses=[RunStatus.REJECTED], now=old.clock(), status=RunStatus.FAILED)
    new = make_hazel(db_url, v2(with_migration=False))
    with pytest.raises(VersionUnavailableError, match="version 1, which is not deployed .*deployed: v2"):
        new.retry(run_id=run_id, actor=person("me"))
    assert new.get(run_id=run_id).status is RunStatus.FAILED  # not queued where no worker can take it
    migrating = make_hazel(db_url, v2())
    assert migrating.retry(run_id=run_id, actor=person("me")).status is RunStatus.READY  # v2 migrates from v1


def test_a_migration_to_a_version_without_the_waiting_point_is_refused(db_url: str) -> None:
    run_id = waiting_v1_run(db_url)
    new = make_hazel(db_url, v2(has_review=False))
    with pytest.raises(VersionUnavailableError, match="waits at 'review'"):
        new.decide(run_id=run_id, action="approve", actor=person("sme"))
    assert new.get(run_id=run_id).status is RunStatus.WAITING and new.get(run_id=run_id).workflow_version == 1


def test_workers_claim_only_versions_they_can_run(db_url: str) -> None:
    run_id = waiting_v1_run(db_url)
    both = make_hazel(db_url, v1())
    both.decide(run_id=run_id, action="approve", actor=person("sme"))  # ready, on v1
    other = make_hazel(db_url, v2(with_migration=False))
    assert runnable_versions(other.registry) == {"article": [2]}
    assert other.runner.claim() is None and other.runner.claim(run_id) is None
    assert other.get(run_id=run_id).status is RunStatus.READY
    migrating = make_hazel(db_url, v2())
    assert runnable_versions(migrating.registry) == {"article": [2, 1]}
    result = migrating.drive(run_id=run_id)
    assert result.run.status is RunStatus.COMPLETED and result.run.workflow_version == 2
