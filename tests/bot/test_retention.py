"""Retention: ``hazel prune`` and the policy behind it, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pydantic import BaseModel
from sqlalchemy import select
from typer.testing import CliRunner

from hazel import StepContext, Workflow
from bot.engine.errors import CheckpointNotFoundError
from bot.ops.retention import prune
from bot.ops.scheduler import Scheduler
from store.models import RunStatus
from store.schema import checkpoints
from tests.bot.test_timers import close_hazels, make_hazel  # noqa: F401 - close_hazels: autouse fixture
from tests.support.clock import FakeClock
from tests.support.engine import person

DAY = 86_400.0


class Notes(BaseModel):
    lines: list[str] = []
    big: str = "x" * 4000


def chatty(*, fail_at: int | None = None) -> Workflow:
    """Six small steps (many patch checkpoints), a review, then a final step."""
    wf = Workflow("chatty", version=1, state=Notes)
    for i in range(6):
        def step(state: Notes, ctx: StepContext, i: int = i) -> dict:
            if fail_at == i:
                raise RuntimeError(f"step {i} broke")
            return {"lines": [*state.lines, f"line {i}"]}

        wf.step(step, name=f"s{i}", max_attempts=1)
    wf.steer("review", show="lines")

    @wf.step
    def finish(state: Notes, ctx: StepContext) -> dict:
        return {"lines": [*state.lines, "done"]}

    return wf


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def completed_run(hazel) -> str:  # noqa: ANN001
    run = hazel.start(workflow="chatty", input={}, actor=person("author"))
    hazel.drive(run_id=run.id)
    hazel.decide(run_id=run.id, action="feedback", actor=person("sme"), payload={"text": "again"})
    hazel.drive(run_id=run.id)
    hazel.decide(run_id=run.id, action="approve", actor=person("sme"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    return run.id


def test_prune_keeps_final_state_decisions_and_audit(db_url: str, clock: FakeClock) -> None:
    hazel = make_hazel(db_url, chatty(), clock=clock)
    run_id = completed_run(hazel)
    final = hazel.state_at(run_id=run_id)
    decisions = hazel.decisions(run_id=run_id)
    audit = hazel.audit(run_id=run_id)
    head = hazel.get(run_id=run_id).head_seq
    before = len(hazel.checkpoints(run_id=run_id))
    assert before == 11  # start, six steps, feedback, s5 again, approve, finish

    clock.advance(31 * DAY)
    report = prune(hazel.store, older_than_days=30, now=clock())
    assert report.runs == [run_id]
    [kept] = hazel.checkpoints(run_id=run_id)
    assert (kept.seq, kept.parent_seq, kept.is_snapshot) == (head, None, True)
    assert report.checkpoints_deleted == before - 1 and report.bytes_freed > 0

    reopened = make_hazel(db_url, chatty(), clock=clock)  # loads from the database alone
    assert reopened.state_at(run_id=run_id) == final and final.lines[-1] == "done"
    assert reopened.decisions(run_id=run_id) == decisions
    after = reopened.audit(run_id=run_id)
    assert after[: len(audit)] == audit and [e.action for e in after[len(audit):]] == ["run.pruned"]
    assert after[-1].detail["checkpoints_deleted"] == report.checkpoints_deleted
    assert reopened.get(run_id=run_id).status is RunStatus.COMPLETED

    assert prune(hazel.store, older_than_days=30, now=clock()).runs == []  # nothing left to do


def test_prune_never_touches_waiting_ready_or_recent_runs(db_url: str, clock: FakeClock) -> None:
    hazel = make_hazel(db_url, chatty(), clock=clock)
    waiting = hazel.start(workflow="chatty", input={}, actor=person("author"))
    hazel.drive(run_id=waiting.id)
    ready = hazel.start(workflow="chatty", input={}, actor=person("author"))
    hazel.drive(run_id=ready.id)
    hazel.decide(run_id=ready.id, action="approve", actor=person("sme"))  # ready, not yet driven
    old = completed_run(hazel)
    clock.advance(40 * DAY)
    recent = completed_run(hazel)
    counts = {r: len(hazel.checkpoints(run_id=r)) for r in (waiting.id, ready.id, recent)}

    report = prune(hazel.store, older_than_days=30, now=clock())
    assert report.runs == [old]
    assert {r: len(hazel.checkpoints(run_id=r)) for r in counts} == counts
    assert hazel.get(run_id=waiting.id).status is RunStatus.WAITING and hazel.get(run_id=ready.id).status is RunStatus.READY
    assert hazel.drive(run_id=ready.id).run.status is RunStatus.COMPLETED  # its history was all there


def test_dry_run_changes_nothing(db_url: str, clock: FakeClock) -> None:
    hazel = make_hazel(db_url, chatty(), clock=clock)
    run_id = completed_run(hazel)
    before = len(hazel.checkpoints(run_id=run_id))
    clock.advance(2 * DAY)
    report = prune(hazel.store, older_than_days=1, now=clock(), dry_run=True)
    assert report.dry_run and report.runs == [run_id] and report.checkpoints_deleted == before - 1
    assert len(hazel.checkpoints(run_id=run_id)) == before
    assert [e.action for e in hazel.audit(run_id=run_id)].count("run.pruned") == 0


def test_a_pruned_failed_run_can_still_be_retried(db_url: str, clock: FakeClock) -> None:
    wf = chatty(fail_at=4)
    hazel = make_hazel(db_url, wf, clock=clock)
    run = hazel.start(workflow="chatty", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.FAILED
    clock.advance(8 * DAY)
    assert prune(hazel.store, older_than_days=7, now=clock()).runs == [run.id]
    assert len(hazel.checkpoints(run_id=run.id)) == 1

    fixed = make_hazel(db_url, chatty(), clock=clock)  # the bug is fixed and deployed
    fixed.retry(run_id=run.id, actor=person("olga"))
    assert fixed.drive(run_id=run.id).run.status is RunStatus.WAITING
    assert fixed.state_at(run_id=run.id).lines == [f"line {i}" for i in range(6)]


def test_rewinding_a_pruned_run(db_url: str, clock: FakeClock) -> None:
    hazel = make_hazel(db_url, chatty(), clock=clock)
    run_id = completed_run(hazel)
    head = hazel.get(run_id=run_id).head_seq
    clock.advance(2 * DAY)
    prune(hazel.store, older_than_days=1, now=clock())
    with pytest.raises(CheckpointNotFoundError, match=r"checkpoint #3 of run \w+ was pruned \(kept: #\d+\)"):
        hazel.rewind(run_id=run_id, actor=person("olga"), to=3)
    outcome = hazel.rewind(run_id=run_id, actor=person("olga"), to=head, feedback="one more line")
    assert outcome.run_status is RunStatus.READY
    assert hazel.drive(run_id=run_id).run.status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=run_id).lines[-1] == "done"


def test_compact_refuses_a_run_that_left_the_ended_state(db_url: str, clock: FakeClock) -> None:
    """Between listing candidates and compacting, the run was retried: it is left alone."""
    hazel = make_hazel(db_url, chatty(fail_at=2), clock=clock)
    run = hazel.start(workflow="chatty", input={}, actor=person("author"))
    hazel.drive(run_id=run.id)
    clock.advance(2 * DAY)
    with hazel.store.read() as tx:
        [candidate] = tx.retention.candidates(ended_before=clock())
    hazel.retry(run_id=run.id, actor=person("olga"))
    with hazel.store.transaction() as tx:
        assert tx.retention.compact(candidate.run_id, ended_before=clock()) is None
    assert len(hazel.checkpoints(run_id=run.id)) == candidate.checkpoints


def test_the_head_snapshot_is_a_real_snapshot(db_url: str, clock: FakeClock) -> None:
    hazel = make_hazel(db_url, chatty(), clock=clock)
    run_id = completed_run(hazel)
    clock.advance(2 * DAY)
    prune(hazel.store, older_than_days=1, now=clock())
    with hazel.store.read() as tx:
        row = tx.conn.execute(select(checkpoints).where(checkpoints.c.run_id == run_id)).one()
    assert (row.base_seq, row.chain_len, row.parent_seq) == (row.seq, 0, None)
    assert row.stored_bytes == len(row.payload)


def test_scheduled_policy_prunes_with_retention_days(db_url: str, clock: FakeClock) -> None:
    hazel = make_hazel(db_url, chatty(), clock=clock)
    run_id = completed_run(hazel)
    assert Scheduler(hazel).prune() is None  # no policy set
    scheduler = Scheduler(hazel, retention_days=3)
    clock.advance(2 * DAY)
    assert scheduler.prune().runs == []
    clock.advance(1.5 * DAY)
    assert scheduler.prune().runs == [run_id]


def test_negative_age_is_refused(db_url: str, clock: FakeClock) -> None:
    hazel = make_hazel(db_url, chatty(), clock=clock)
    with pytest.raises(ValueError):
        prune(hazel.store, older_than_days=-1, now=clock())


# -- the command -----------------------------------------------------------------------------------------------


def test_prune_command(db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bot.cli import app

    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(Path(__file__).resolve().parents[1] / "workflows" / "sample.py"))
    monkeypatch.chdir(tmp_path)
    hazel = make_hazel(db_url, chatty(), clock=FakeClock(start=datetime(2020, 3, 1, tzinfo=timezone.utc)))
    run_id = completed_run(hazel)
    runner = CliRunner()

    dry = runner.invoke(app, ["prune", "--older-than", "30", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] is True and planned["runs"] == [run_id] and planned["checkpoints_deleted"] == 10
    assert len(hazel.checkpoints(run_id=run_id)) == planned["checkpoints_deleted"] + 1

    done = runner.invoke(app, ["prune", "--older-than", "30", "--as", "olga"])
    assert done.exit_code == 0, done.output
    assert "pruned 1 run(s)" in done.stdout and run_id in done.stdout
    assert len(hazel.checkpoints(run_id=run_id)) == 1
    assert hazel.audit(run_id=run_id)[-1].person == "olga"  # the operator, acting for olga
    shown = runner.invoke(app, ["show", run_id, "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["state"]["lines"][-1] == "done"
    history = runner.invoke(app, ["history", run_id])
    assert history.exit_code == 0, history.output

    again = json.loads(runner.invoke(app, ["prune", "--older-than", "30", "--json"]).stdout)
    assert again["runs"] == [] and again["checkpoints_deleted"] == 0

    bad = runner.invoke(app, ["prune", "--older-than", "-1"])
    assert bad.exit_code == 2 and "Invalid value for '--older-than': must be 0 or more days" in bad.output

    # days reaching before year 1, within the documented bound: nothing ended so long ago (an OverflowError was
    # the answer), and the cutoff's year is printed in four digits (year 3 was printed "3-08-13")
    far = runner.invoke(app, ["prune", "--older-than", "999999", "--dry-run"])
    assert far.exit_code == 0 and "would prune 0 run(s) that ended before 0001-01-01 00:00:00 UTC" in far.stdout, \
        far.output
    near = runner.invoke(app, ["prune", "--older-than", "739000", "--dry-run"])
    assert near.exit_code == 0 and " that ended before 0003-0" in near.stdout, near.output


def test_the_scheduled_prune_with_days_before_year_one_prunes_nothing(db_url: str, clock: FakeClock) -> None:
    hazel = make_hazel(db_url, chatty(), clock=clock)
    completed_run(hazel)
    clock.advance(2 * DAY)
    report = Scheduler(hazel, retention_days=999_999).prune()
    assert report.runs == [] and report.ended_before == datetime.min.replace(tzinfo=timezone.utc)
