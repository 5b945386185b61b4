"""Several worker processes on one PostgreSQL: leases with SKIP LOCKED, LISTEN/NOTIFY wake-ups, a worker
SIGKILLed mid-run. Every step of every run executes exactly once except those cut by the kill; every reminder
is sent once; every run completes; no decision is lost."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from store.models import RunStatus
from tests.conftest import _truncate
from tests.support.fleet import SME, Fleet
from tests.support.waiting import wait_until


@pytest.mark.slow
def test_listen_notify_wakes_another_process(pg_url: str, tmp_path: Path) -> None:
    _truncate(pg_url)
    fleet = Fleet(pg_url, tmp_path, workers=1, HAZEL_SWEEP_SEC="60")  # no sweep: only NOTIFY can wake it
    hazel = fleet.hazel
    try:
        wait_until(lambda: _listening(hazel), 30, "the worker to LISTEN")
        run = hazel.start(workflow="fleet", input={}, actor=SME)
        wait_until(lambda: hazel.get(run_id=run.id).status is RunStatus.WAITING, 15, "the worker to take the new run")
        hazel.decide(run_id=run.id, action="approve", actor=SME)
        wait_until(lambda: hazel.get(run_id=run.id).status is RunStatus.COMPLETED, 15, "the worker to resume the run")
    finally:
        fleet.close()


def _listening(hazel) -> bool:  # noqa: ANN001
    """Some other connection to this database has run a ``LISTEN`` (the first is ``hazel_ready``'s) and is idle
    (it finished: from now on it hears the notifications)."""
    with hazel.store.engine.connect() as conn:
        return bool(conn.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state = 'idle' AND query LIKE 'LISTEN %'")).scalar_one())


@pytest.mark.slow
def test_two_workers_200_runs_concurrent_decisions_and_a_kill(pg_url: str, tmp_path: Path) -> None:
    _truncate(pg_url)
    # each request reminds its approvers once, 0.3 s after it opened (the workers' schedulers fire it); a
    # request is approved only once its reminder went out
    fleet = Fleet(pg_url, tmp_path, workers=2, remind_sec=0.3, HAZEL_SCHEDULER_TICK_SEC="0.2")
    rng = random.Random(5)

    def kill_once_halfway(_elapsed: float) -> None:
        done = sum(1 for r in fleet.hazel.runs(limit=1000) if r.status is RunStatus.COMPLETED)
        if not fleet.killed and done >= 60:
            fleet.kill_one(rng)

    report = fleet.run(200, fault=kill_once_halfway, after_reminder=True)
    print("\nscale-out report:", report)
    assert report["workers killed"] == 1
    assert report["runs completed"] == 200 and report["runs lost"] == 0
    assert report["decisions recorded"] == 200 and report["decisions lost"] == 0
    assert report["steps never committed"] == 0 and report["steps committed twice"] == 0
    assert report["steps executed again after a fault"] <= 4  # at most the steps in flight in the killed worker
    assert report["reminders sent"] == 200 and report["requests never reminded"] == 0
    assert report["requests reminded more than once"] == 0
