"""Worker threads during a real database outage (PostgreSQL behind a TCP proxy that is shut; SQLite's directory
moved away) with more claims queued than threads: each thread pauses per its backoff and logs one line per try,
naming the run it concerns; the queued claims wait for the database and every run completes after it, each step
run once more at most. A tester found ``hazel serve`` logging 690 lines in 0.4 s (the pause skipped while claims
were queued, the backoff at 10 s within milliseconds) and the lease heartbeat an ERROR with a traceback."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable, Iterator

import pytest
from pydantic import BaseModel
from sqlalchemy.engine import make_url

from bot.engine import Claim, Hazel
from bot.ops.logs import ContextFilter
from bot.ops.worker import WorkerPool
from hazel import StepContext, Workflow
from store.models import RunStatus
from tests.bot.test_api_database_down import Proxy
from tests.support.engine import make_hazel

PAUSES_SEC = (0.1, 0.2, 0.4)
OUTAGE_SEC = 1.5


class Job(BaseModel):
    done: bool = False


def blocking_workflow(calls: Counter, entered: threading.Semaphore, go: threading.Event) -> Workflow:
    wf = Workflow("slow", version=1, state=Job)

    @wf.step
    def work(state: Job, ctx: StepContext) -> Job:
        calls[ctx.run_id] += 1
        entered.release()
        go.wait(10)  # (the tester's step slept 8 s: it returns once the database is cut)
        return Job(done=True)

    return wf


@pytest.fixture
def outage(db_url: str, tmp_path: Path) -> Iterator[Callable[..., tuple[Hazel, Callable[[], None],
                                                                         Callable[[], None]]]]:
    """``make(*workflows, **kw) -> (hazel, cut, restore)``: a Hazel whose database can be made unreachable for
    real (PostgreSQL: the TCP proxy it connects through is shut, connections dropped; SQLite: its directory is
    moved away and the pool's idle connections let go)."""
    parsed = make_url(db_url)
    proxies: list[Proxy] = []

    def make(*workflows: Workflow, **kwargs) -> tuple[Hazel, Callable[[], None], Callable[[], None]]:  # noqa: ANN003
        if parsed.get_backend_name() == "sqlite":
            home, gone = tmp_path / "dbhome", tmp_path / "dbhome-gone"
            home.mkdir()
            shutil.copyfile(parsed.database, home / "hazel.db")
            hazel = make_hazel(f"sqlite:///{home / 'hazel.db'}", *workflows, **kwargs)

            def cut() -> None:
                home.rename(gone)
                hazel.store.dispose()

            return hazel, cut, lambda: gone.rename(home)
        proxy = Proxy((parsed.host or "127.0.0.1", parsed.port or 5432))
        proxy.start()
        proxies.append(proxy)
        hazel = make_hazel(parsed.set(port=proxy.port).render_as_string(hide_password=False), *workflows, **kwargs)
        return hazel, proxy.stop, proxy.start

    yield make


def test_threads_pause_per_their_backoff_with_claims_queued_and_every_run_completes(
        outage, db_url: str, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    calls: Counter = Counter()
    entered, go = threading.Semaphore(0), threading.Event()
    hazel, cut, restore = outage(blocking_workflow(calls, entered, go))
    caplog.handler.addFilter(ContextFilter())  # as a served process's handlers have it
    caplog.set_level("WARNING", logger="hazel")
    pool = WorkerPool(hazel, threads=2, sweep_sec=0.1, outage_pauses_sec=PAUSES_SEC)
    pool.start()
    runs = [hazel.start(workflow="slow", input={}, actor=hazel.operator(), claim=True) for _ in range(5)]
    try:
        for run in runs:  # leased here, as a decision's claims are: 2 executing, 3 queued
            pool.submit(Claim(run))
        for _ in range(2):
            assert entered.acquire(timeout=10)
        cut()
        cut_at = time.monotonic()
        go.set()  # the two steps in flight return into the outage: their checkpoints cannot be written
        time.sleep(OUTAGE_SEC)
        during = [r for r in caplog.records if "the database is unreachable" in r.getMessage()]
        restore()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(
                hazel.get(run_id=r.id).status is not RunStatus.COMPLETED for r in runs):
            time.sleep(0.05)
        assert [hazel.get(run_id=r.id).status for r in runs] == [RunStatus.COMPLETED] * 5
    finally:
        pool.stop()
    assert set(calls) == {r.id for r in runs} and max(calls.values()) <= 2, calls  # each step once more at most

    by_thread: dict[str, list[logging.LogRecord]] = defaultdict(list)
    for record in during:
        assert record.exc_info is None and record.levelno == logging.WARNING
        by_thread[record.threadName].append(record)
    assert during and set(by_thread) <= {"hazel-worker-0", "hazel-worker-1"}, [r.getMessage() for r in during]
    # one line per try, and between two tries the pause the line announced: about 1 + 0.1/0.2/0.4 … in 1.5 s
    for thread, records in by_thread.items():
        assert len(records) <= 2 + OUTAGE_SEC / PAUSES_SEC[-1] + len(PAUSES_SEC), (thread, len(records))
        for n, (before, after) in enumerate(zip(records, records[1:])):
            pause = PAUSES_SEC[min(n, len(PAUSES_SEC) - 1)]
            assert before.getMessage().endswith(f"trying again in {pause:g} s"), before.getMessage()
            assert after.created - before.created >= pause - 0.02, (thread, n, after.created - before.created)
    assert all(r.created >= cut_at - 0.01 for r in during)
    named = {getattr(r, "run_id", None) for r in during} - {None}
    assert named and named <= {r.id for r in runs}, named  # a line about a run (cut short, handed back) names it
    if make_url(db_url).get_backend_name() == "postgresql":  # (the two steps in flight met the outage)
        assert {runs[0].id, runs[1].id} <= named


def test_lease_renewal_during_an_outage_logs_one_line_not_a_traceback(outage,
                                                                      caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    hazel, cut, restore = outage(lease_sec=0.3)  # a heartbeat every 0.1 s
    caplog.set_level("WARNING", logger="hazel")
    hazel.runner.leases.hold("a-token")  # (a lease this process renews: the statement matters, not the run)
    cut()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not [r for r in caplog.records if "lease renewal" in r.getMessage()]:
            time.sleep(0.02)
    finally:
        restore()
    said = [r for r in caplog.records if "lease renewal" in r.getMessage()]
    assert said, "the heartbeat met the outage"
    for record in said:
        assert record.levelno == logging.WARNING and record.exc_info is None, record.getMessage()
        assert record.getMessage().startswith("lease renewal of 1 run(s) failed: the database is unreachable ("), \
            record.getMessage()
        assert record.getMessage().endswith("; trying again in 0.1 s"), record.getMessage()
