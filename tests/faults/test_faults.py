"""Fault tests, reported as counts (runs lost, steps executed twice, decisions lost): workers SIGKILLed at
random points across 50 runs; PostgreSQL going away during a batch of runs. Every run must end completed."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.conftest import PG_ADMIN_URL, _truncate
from tests.support.fleet import Fleet


IN_FLIGHT = 2 * 4  # two worker processes of four threads: the most steps one fault can cut


def assert_clean(report: dict[str, int], n_runs: int, faults: int) -> None:
    print("\nfault report:", report)
    assert report["runs completed"] == n_runs, report
    assert report["runs lost"] == 0 and report["decisions lost"] == 0
    assert report["steps never committed"] == 0 and report["steps committed twice"] == 0
    assert report["steps executed again after a fault"] <= faults * IN_FLIGHT


@pytest.mark.slow
def test_workers_killed_at_random_points_across_50_runs(db_url: str, tmp_path: Path) -> None:
    fleet = Fleet(db_url, tmp_path, workers=2, step_sec=0.15)
    rng = random.Random(11)
    next_kill = [rng.uniform(0.3, 1.0)]

    def kill_randomly(elapsed: float) -> None:
        if len(fleet.killed) < 4 and elapsed >= next_kill[0] and fleet.kill_one(rng):
            next_kill[0] = elapsed + rng.uniform(0.5, 1.2)

    report = fleet.run(50, fault=kill_randomly)
    assert report["workers killed"] >= 3
    assert_clean(report, 50, faults=report["workers killed"])


@pytest.mark.slow
def test_postgresql_going_away_during_a_batch(pg_url: str, tmp_path: Path) -> None:
    """What clients see of a PostgreSQL restart: every connection to the database is terminated and new ones
    are refused for a while (``ALLOW_CONNECTIONS false``), twice during the batch."""
    _truncate(pg_url)
    name = make_url(pg_url).database
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    fleet = Fleet(pg_url, tmp_path, workers=2, step_sec=0.08)  # long enough a batch for two outages
    outages: list[float] = []
    lock = threading.Lock()

    def restart(elapsed: float) -> None:
        with lock:
            if len(outages) >= 2 or (outages and elapsed - outages[-1] < 2) or elapsed < 0.5:
                return
            outages.append(elapsed)
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": name})
            time.sleep(1.5)
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))

    try:
        report = fleet.run(60, fault=restart)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        admin.dispose()
    assert len(outages) == 2
    assert_clean(report, 60, faults=len(outages))
