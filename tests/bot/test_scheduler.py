"""The scheduler across restarts and processes, retry backoffs, and one real APScheduler run.

"Several processes" are several ``Hazel`` instances (each with its own engine and connection pool) on one
database, ticking from threads at the same moment; that is what two processes look like to the database.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest

from hazel import StepContext, Workflow
from bot.ops.scheduler import Scheduler
from bot.settings import Settings
from store.models import RequestStatus, RunStatus
from tests.bot.test_timers import (  # noqa: F401 - close_hazels is an autouse fixture
    HOUR, Doc, close_hazels, events, make_hazel, outbox, request_of, timed, waiting)
from tests.support.clock import FakeClock
from tests.support.engine import person


def test_a_new_scheduler_after_a_restart_neither_loses_nor_repeats(db_url: str) -> None:
    clock = FakeClock()
    hazel, first, run_id = waiting(db_url, clock, remind_after_sec=HOUR, remind_every_sec=HOUR,
                                   timeout_sec=3.5 * HOUR, on_timeout="approve")
    clock.advance(HOUR)
    assert len(first.tick().reminders) == 1
    hazel.close()  # the process stops

    restarted = make_hazel(db_url, timed(remind_after_sec=HOUR, remind_every_sec=HOUR, timeout_sec=3.5 * HOUR,
                                         on_timeout="approve"), clock=clock)
    second = Scheduler(restarted)
    assert second.tick().fired == 0  # reminder 1 was sent before the restart
    clock.advance(HOUR)
    assert len(second.tick().reminders) == 1
    clock.advance(1.5 * HOUR)
    assert second.tick().timeouts and second.tick().fired == 0
    assert len(outbox(restarted, "reminder")) == 2
    assert [d.actor_id for d in restarted.decisions(run_id=run_id)] == ["timeout"]


def test_a_timeout_cut_by_a_crash_fires_after_its_lease(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process dies after the timeout's lease commits and before it decides: nothing was decided, and a
    later scheduler decides it once the lease (``TIMEOUT_RETRY_SEC``) runs out."""
    import bot.engine.timeouts
    from bot.engine.timeouts import Fired

    clock = FakeClock()
    hazel, scheduler, run_id = waiting(db_url, clock, timeout_sec=HOUR, on_timeout="reject")
    clock.advance(HOUR)
    with monkeypatch.context() as patched:
        patched.setattr(bot.engine.timeouts.Timeouts, "_act", lambda *args, **kwargs: Fired())  # "killed" here
        scheduler.tick()
    assert hazel.decisions(run_id=run_id) == [] and hazel.get(run_id=run_id).status is RunStatus.WAITING
    assert request_of(hazel, run_id).next_action_at == clock.now + timedelta(seconds=bot.engine.timeouts.TIMEOUT_RETRY_SEC)

    later = Scheduler(make_hazel(db_url, timed(timeout_sec=HOUR, on_timeout="reject"), clock=clock))
    clock.advance(bot.engine.timeouts.TIMEOUT_RETRY_SEC / 2)
    assert later.tick().timeouts == []
    clock.advance(bot.engine.timeouts.TIMEOUT_RETRY_SEC / 2)
    assert len(later.tick().timeouts) == 1
    assert [d.action.value for d in hazel.decisions(run_id=run_id)] == ["reject"]
    assert hazel.get(run_id=run_id).status is RunStatus.REJECTED


def test_a_request_whose_version_is_gone_waits_for_it(db_url: str) -> None:
    """A scheduler without the run's workflow version does not lose the timeout, and does not put it off for
    everyone either (s24 F10: it rescheduled it 10 minutes on, and a scheduler that had the version, running
    beside it, fired it that late): it leaves it, untouched, to a scheduler that has the version, which fires it
    on time."""
    from bot.engine.registry import Registry
    from bot.server.app import HazelApp as Hazel
    from bot.engine.workflow import Workflow

    clock = FakeClock()
    hazel, _, run_id = waiting(db_url, clock, timeout_sec=60, on_timeout="approve")
    other = Workflow("timed", version=2, state=Doc)
    other.step(lambda state, ctx: state, name="only")
    registry = Registry()
    registry.add(other)
    stranger = Hazel(Settings(HAZEL_DATABASE_URL=db_url), registry=registry, load_workflows=False, clock=clock)
    clock.advance(60)
    assert Scheduler(stranger).tick().fired == 0
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING and hazel.decisions(run_id=run_id) == []
    assert request_of(hazel, run_id).next_action_at == clock.now  # still due: left to whoever can act
    assert len(Scheduler(hazel).tick().timeouts) == 1  # at once, not UNRESOLVED_RETRY_SEC later
    stranger.close()


def test_two_schedulers_at_once_fire_everything_exactly_once(db_url: str) -> None:
    clock = FakeClock()
    options = {"remind_after_sec": HOUR, "remind_every_sec": HOUR, "escalate_after_sec": 1.5 * HOUR,
               "escalate_channel": "console", "timeout_sec": 2.5 * HOUR, "on_timeout": "approve"}
    first = make_hazel(db_url, timed(**options), clock=clock)
    second = make_hazel(db_url, timed(**options), clock=clock)
    run_ids = []
    for _ in range(12):
        run = first.start(workflow="timed", input={}, actor=person("author"))
        first.drive(run_id=run.id)
        run_ids.append(run.id)
    schedulers = [Scheduler(first, batch=5), Scheduler(second, batch=5)]

    def tick(scheduler: Scheduler, barrier: threading.Barrier, failures: list[BaseException]) -> None:
        try:
            barrier.wait()
            scheduler.tick()
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            failures.append(exc)

    for step_sec in (HOUR, 0.5 * HOUR, 0.5 * HOUR, 0.5 * HOUR):
        clock.advance(step_sec)
        barrier = threading.Barrier(len(schedulers))
        failures: list[BaseException] = []
        threads = [threading.Thread(target=tick, args=(s, barrier, failures)) for s in schedulers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not failures

    per_request_reminders = Counter(m.request_id for m in outbox(first, "reminder"))
    assert sorted(per_request_reminders.values()) == [2] * 12  # at 1 h and at 2 h
    assert sorted(Counter(m.request_id for m in outbox(first, "escalation")).values()) == [1] * 12
    for run_id in run_ids:
        assert [(d.actor_id, d.action.value) for d in first.decisions(run_id=run_id)] == [("timeout", "approve")]
        assert len(events(first, run_id, "request.escalated")) == 1
        assert first.get(run_id=run_id).status is RunStatus.READY
        assert request_of(first, run_id).status is RequestStatus.DECIDED


def test_a_request_another_scheduler_changed_after_the_pick_began_is_no_error(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pick of due requests locks them (``FOR UPDATE SKIP LOCKED``). Another scheduler that finished a
    request between the start of the pick's transaction and its lock made PostgreSQL at REPEATABLE READ fail
    the whole tick ("could not serialize access due to concurrent update"); the pick reads at READ COMMITTED."""
    from sqlalchemy import text, update

    from store.schema import steering_requests
    from store.timers import TimerRepo

    clock = FakeClock()
    hazel, scheduler, run_id = waiting(db_url, clock, remind_after_sec=HOUR, remind_every_sec=HOUR)
    other = make_hazel(db_url, timed(remind_after_sec=HOUR, remind_every_sec=HOUR), clock=clock)
    request_id = request_of(hazel, run_id).id
    pick = TimerRepo.due_request_ids

    def changed_meanwhile(repo: TimerRepo, **kwargs: object) -> list[int]:
        repo.conn.execute(text("SELECT 1"))  # the transaction's first statement: its snapshot, if it takes one
        with other.store.transaction() as tx:  # another scheduler commits a change to the request
            tx.conn.execute(update(steering_requests).where(steering_requests.c.id == request_id)
                            .values(next_action_at=clock.now))
        return pick(repo, **kwargs)

    clock.advance(HOUR)
    monkeypatch.setattr(TimerRepo, "due_request_ids", changed_meanwhile)
    assert hazel.due_request_ids(now=clock.now) == [request_id]
    monkeypatch.undo()
    assert scheduler.tick().reminders == [request_id]


def flaky_once(backoff_sec: float) -> Workflow:
    """``flaky``: its step ``draft`` fails once (a retry after ``backoff_sec``), then asks at ``review``."""
    wf = Workflow("flaky", version=1, state=Doc)
    calls = {"n": 0}

    @wf.step(max_attempts=3, backoff_sec=backoff_sec)
    def draft(state: Doc, ctx: StepContext) -> Doc:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("upstream down")
        return state

    wf.steer("review", show="text")
    return wf


def test_retry_backoffs_wake_the_workers_when_due(db_url: str) -> None:
    clock = FakeClock()
    hazel = make_hazel(db_url, flaky_once(backoff_sec=30), clock=clock)
    woken: list[str] = []
    hazel.on_ready(woken.append)
    scheduler = Scheduler(hazel)
    run = hazel.start(workflow="flaky", input={}, actor=person("author"))
    result = hazel.drive(run_id=run.id, wait_for_retries=False)
    assert result.run.status is RunStatus.READY and result.run.wake_at is not None
    wake_at = result.run.wake_at
    assert scheduler.next_due_at() == wake_at
    woken.clear()

    assert scheduler.tick().retries_woken == [] and woken == []
    assert hazel.runner.claim() is None  # not due yet
    clock.now = wake_at
    assert scheduler.tick().retries_woken == [run.id] and woken == [run.id]
    claimed = hazel.runner.claim()
    assert claimed is not None and claimed.run.id == run.id
    assert hazel.runner.drive(claimed).run.status is RunStatus.WAITING
    assert scheduler.tick().retries_woken == []


def test_settings_configure_the_scheduler(db_url: str) -> None:
    hazel = make_hazel(db_url, timed())
    hazel.settings = Settings(HAZEL_DATABASE_URL=db_url, HAZEL_SCHEDULER_TICK_SEC=0.5, HAZEL_RETENTION_DAYS=30)
    scheduler = Scheduler.from_settings(hazel)
    assert scheduler.tick_sec == 0.5 and scheduler.retention_days == 30
    assert Scheduler.from_settings(make_hazel(db_url, timed())).retention_days is None
    with pytest.raises(ValueError):
        Settings(HAZEL_SCHEDULER_TICK_SEC=0)


def test_real_apscheduler_fires_on_time_between_ticks(db_url: str) -> None:
    """With a periodic tick far away (30 s), the date job re-armed for the earliest deadline fires the reminder
    (due 0.2 s after the request) and then the timeout (due after 3 s: on a loaded machine, a first tick later
    than the timeout settles the request before its reminder, seen once in CI with 1.5 s); a prune job runs
    when retention is set."""
    hazel = make_hazel(db_url, timed(remind_after_sec=0.2, timeout_sec=3.0, on_timeout="approve"))
    run = hazel.start(workflow="timed", input={}, actor=person("author"))
    hazel.drive(run_id=run.id)
    scheduler = Scheduler(hazel, tick_sec=30, retention_days=0, prune_every_sec=0.2)
    scheduler.start()  # its first tick runs at once and arms the date job

    def wait_for(condition, timeout_sec: float = 15.0) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout_sec
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.05)

    try:
        wait_for(lambda: outbox(hazel, "reminder"))
        assert len(outbox(hazel, "reminder")) == 1
        wait_for(lambda: hazel.get(run_id=run.id).status is not RunStatus.WAITING)
        assert hazel.get(run_id=run.id).status is RunStatus.READY
        assert [d.actor_id for d in hazel.decisions(run_id=run.id)] == ["timeout"]
        hazel.drive(run_id=run.id)
        wait_for(lambda: len(hazel.checkpoints(run_id=run.id)) == 1)
        assert len(hazel.checkpoints(run_id=run.id)) == 1  # the scheduled prune compacted the completed run
        assert hazel.state_at(run_id=run.id).published is True
    finally:
        scheduler.stop()
    assert not scheduler.running
    scheduler.stop()  # twice is fine


WORKFLOW_FILE = '''
from pydantic import BaseModel
from hazel import Workflow

class S(BaseModel):
    done: bool = False

wf = Workflow("auto-ok", version=1, state=S)
wf.step(lambda state, ctx: state, name="prepare")
wf.steer("review", timeout_sec=60, on_timeout="approve")
wf.step(lambda state, ctx: {"done": True}, name="finish")
'''


def test_worker_until_idle_fires_due_timeouts_then_drains(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path) -> None:  # noqa: ANN001
    """``hazel worker --until-idle`` ticks the scheduler once: a timeout that came while nothing ran approves
    the request, and the worker completes the run."""
    import importlib.util
    from datetime import datetime, timezone

    from typer.testing import CliRunner

    from bot.cli import app

    path = tmp_path / "auto_ok.py"
    path.write_text(WORKFLOW_FILE)
    spec = importlib.util.spec_from_file_location("auto_ok_for_setup", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    hazel = make_hazel(db_url, module.wf, clock=FakeClock(start=datetime(2025, 1, 1, tzinfo=timezone.utc)))
    run = hazel.start(workflow="auto-ok", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING  # due an hour later in 2025: long past now

    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(path))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["worker", "--until-idle", "--json"])
    assert result.exit_code == 0, result.output
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    assert [(d.actor_id, d.action.value) for d in hazel.decisions(run_id=run.id)] == [("timeout", "approve")]
