"""A decision that leases its run to the deciding process (``claim=True``): its claim never races a worker's
into running a step twice, and a deciding process killed between its commit and the next step loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.engine.registry import module_name
from store.models import Actor, RunStatus
from tests.support.fleet import FLEET, ROOT, STEP_SEQS, Fleet
from tests.support.waiting import wait_until

SME = Actor(id="sme", channel="console", name="sme", person="sme")


def _effects(tmp: Path) -> Counter:
    """``(step, idempotency key, pid) -> times started``, from every process's effects log."""
    started: Counter = Counter()
    for path in tmp.glob("effects-*.log"):
        pid = int(path.stem.split("-")[1])
        for line in path.read_text().splitlines():
            step, key, phase = line.split()
            if phase == "start":
                started[(step, key, pid)] += 1
    return started


def _fleet_module_logging_to(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet workflow, as loaded in this process, logs its effects next to the workers'."""
    module = sys.modules.get(module_name(FLEET))
    assert module is not None
    monkeypatch.setattr(module, "DIR", tmp)


@pytest.mark.slow
def test_decisions_claiming_here_race_workers_claiming_there(pg_url: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL, two worker processes hammering claims while this process decides: half the decisions lease
    the run here (``claim=True``, then ``drive``), half leave it ready for the workers. Every run completes,
    every step is committed once and executed once, and each resumed step ran where its claim said."""
    from tests.conftest import _truncate

    _truncate(pg_url)
    fleet = Fleet(pg_url, tmp_path, workers=2, step_sec=0.01)
    _fleet_module_logging_to(tmp_path, monkeypatch)
    hazel = fleet.hazel
    try:
        run_ids = [hazel.start(workflow="fleet", input={}, actor=SME).id for _ in range(40)]
        wait_until(lambda: all(r.status is RunStatus.WAITING for r in hazel.runs(limit=100)), timeout_sec=60,
                   what="every run at its steering point")
        here = set(run_ids[::2])

        def decide(run_id: str) -> None:
            outcome = hazel.decide(run_id=run_id, action="approve", actor=SME, claim=run_id in here)
            if run_id in here:
                assert outcome.run_status is RunStatus.RUNNING  # leased to this process in the same commit
                hazel.drive(run_id=run_id)

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(decide, run_ids))
        wait_until(lambda: all(r.status is RunStatus.COMPLETED for r in hazel.runs(limit=100)), timeout_sec=60,
                   what="every run completed")
        started = _effects(tmp_path)
        with hazel.store.read() as tx:
            for rid in run_ids:
                steps = Counter(cp.step for cp in tx.checkpoints.list(rid))
                assert all(steps[s] == 1 for s in STEP_SEQS), (rid, steps)
                work = {pid: n for (step, key, pid), n in started.items() if step == "work" and key.startswith(rid)}
                assert sum(work.values()) == 1, (rid, work)  # executed once, by one process
                assert (os.getpid() in work) == (rid in here), (rid, work)
                assert len(tx.decisions.for_run(rid)) == 1
    finally:
        fleet.close()


def test_a_deciding_process_killed_before_the_next_step_loses_nothing(db_url: str, tmp_path: Path) -> None:
    """The deciding process commits its decision (and its lease on the run) and is SIGKILLed before the next
    step: a worker started afterwards recovers the run (its owner is dead) and executes the resumed step,
    once; the decision is recorded once."""
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(FLEET), "FLEET_DIR": str(tmp_path),
           "HAZEL_LEASE_SEC": "60", "HAZEL_OPERATOR": "sme"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    started = cli("run", "fleet", "--json")
    assert started.returncode == 0, started.stderr
    import json

    run_id = json.loads(started.stdout)["run"]["id"]
    decider = subprocess.Popen([sys.executable, "-m", "tests.support.decide_and_hang", run_id], env=env, cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = decider.stdout.readline() if decider.stdout else ""
    assert line.strip() == "decided running", (line, decider.stderr.read() if decider.stderr else "")
    decider.send_signal(signal.SIGKILL)
    decider.wait(timeout=10)

    from store import Store

    store = Store(db_url)  # read the row itself: any hazel command would first recover the run
    with store.read() as tx:
        leased = tx.runs.get(run_id)
    store.dispose()
    assert leased.status is RunStatus.RUNNING and leased.lease_owner.split(":")[1] == str(decider.pid)
    worked = cli("worker", "--until-idle")  # recovers runs whose owner died on this host, then works
    assert worked.returncode == 0, worked.stderr
    after = json.loads(cli("show", run_id, "--json").stdout)
    assert after["run"]["status"] == "completed", after
    effects = _effects(tmp_path)
    work = [pid for (step, key, pid), n in effects.items() if step == "work" and key.startswith(run_id)
            for _ in range(n)]
    assert len(work) == 1 and work[0] != decider.pid  # once, by the worker
    audit = json.loads(cli("audit", run_id, "--json").stdout)
    assert [e["action"] for e in audit].count("decision.approve") == 1
    assert any(e["action"] == "run.recovered" for e in audit)
