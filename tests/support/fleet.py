"""A fleet of ``hazel worker`` processes on one database, fed runs and decisions by the test process, with
faults injected while it runs; the result is a report of counts (runs lost, steps executed twice, decisions
lost) built from what each worker process logged (``tests/workflows/fleet.py``)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from sqlalchemy.exc import OperationalError

from bot.engine.errors import AlreadyDecidedError
from bot.engine.registry import Registry
from bot.server.app import HazelApp as Hazel
from bot.settings import Settings
from store.models import Actor, RunStatus

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "tests" / "workflows" / "fleet.py"
SME = Actor(id="sme", channel="console", name="sme")
STEP_SEQS = {"prep": 0, "work": 2, "finish": 3}  # the checkpoint each step of a run starts from


class Fleet:
    def __init__(self, url: str, tmp: Path, *, workers: int = 2, step_sec: float = 0.02,
                 remind_sec: float | None = None, **env: str) -> None:
        self.url, self.tmp = url, tmp
        self.remind_sec = remind_sec
        self.env = {**os.environ, "HAZEL_DATABASE_URL": url, "HAZEL_WORKFLOWS": str(FLEET), "FLEET_DIR": str(tmp),
                    "HAZEL_WORKERS": "4", "HAZEL_LEASE_SEC": "3", "FLEET_STEP_SEC": str(step_sec),
                    "FLEET_REMIND_SEC": str(remind_sec or 0), **env}
        self.procs: list[subprocess.Popen] = []
        self.killed: list[int] = []
        registry = Registry()
        registry.load([str(FLEET)])
        self.hazel = Hazel(Settings(HAZEL_DATABASE_URL=url, HAZEL_LEASE_SEC=3), registry=registry,
                           load_workflows=False)
        for _ in range(workers):
            self.spawn()

    def spawn(self) -> None:
        log = open(self.tmp / f"worker-{time.monotonic_ns()}.out", "w")  # noqa: SIM115
        self.procs.append(subprocess.Popen([sys.executable, "-m", "bot.cli", "worker"], env=self.env, cwd=ROOT,
                                           stdout=log, stderr=subprocess.STDOUT))

    def kill_one(self, rng: random.Random) -> bool:
        """SIGKILL a random live worker that has begun executing steps, and start a replacement. False when
        no worker has begun yet."""
        busy = [p for p in self.procs if p.poll() is None and (self.tmp / f"effects-{p.pid}.log").exists()]
        if not busy:
            return False
        victim = rng.choice(busy)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        self.killed.append(victim.pid)
        self.spawn()
        return True

    def run(self, n_runs: int, *, timeout_sec: float = 240, after_reminder: bool = False,
            fault: Callable[[float], None] | None = None) -> dict[str, int]:
        """Start ``n_runs`` runs, approve each as it waits (8 threads; with ``after_reminder`` only once its
        reminder was sent), call ``fault(elapsed_sec)`` between rounds, until every run completed or the time
        is up. Returns the report."""
        hazel = self.hazel
        run_ids = [hazel.start(workflow="fleet", input={}, actor=SME).id for _ in range(n_runs)]
        decided: Counter = Counter()

        def decide(run_id: str) -> None:
            for _ in range(20):  # a client retries while the database is away
                try:
                    hazel.decide(run_id=run_id, action="approve", actor=SME)
                    decided[run_id] += 1
                    return
                except AlreadyDecidedError:
                    return
                except OperationalError:
                    time.sleep(0.25)

        began = time.monotonic()
        try:
            with ThreadPoolExecutor(max_workers=8) as pool:
                while time.monotonic() - began < timeout_sec:
                    try:
                        with hazel.store.read() as tx:
                            waiting = [r.run_id for r in tx.requests.pending(run_ids=run_ids)
                                       if r.reminders_sent or not after_reminder]
                        list(pool.map(decide, waiting))
                        done = sum(1 for r in hazel.runs(limit=10_000) if r.status is RunStatus.COMPLETED)
                    except OperationalError:
                        time.sleep(0.25)
                        continue
                    if done == n_runs:
                        break
                    if fault is not None:
                        fault(time.monotonic() - began)
                    time.sleep(0.1)
        finally:
            self.stop()
        try:
            return self.report(run_ids, decided)
        finally:
            self.hazel.close()

    def stop(self) -> None:
        """Stop every worker process (and close the test's own engine)."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()

    def close(self) -> None:
        self.stop()
        self.hazel.close()

    def effects(self) -> list[tuple[str, str, str, int]]:
        lines = []
        for path in self.tmp.glob("effects-*.log"):
            pid = int(path.stem.split("-")[1])
            lines += [(*line.split(), pid) for line in path.read_text().splitlines() if line.strip()]
        return lines

    def report(self, run_ids: list[str], decided: Counter) -> dict[str, int]:
        """Counts from the database and from what the workers logged.

        ``steps committed twice`` (a step's checkpoint written twice) must be 0 whatever the faults.
        ``steps executed again`` counts executions of a step after one that a fault cut before its commit
        landed (a kill mid-step, a connection lost at commit): at-least-once is what idempotency keys are for,
        and each fault can cut at most the steps in flight at that moment.
        """
        runs = {r.id: r for r in self.hazel.runs(limit=10_000)}
        lines = self.effects()
        started = Counter((s, k) for s, k, phase, _ in lines if phase == "start")
        committed: Counter = Counter()
        with self.hazel.store.read() as tx:
            for rid in run_ids:
                for cp in tx.checkpoints.list(rid):
                    if cp.step in STEP_SEQS:
                        committed[(cp.step, rid)] += 1
        expected = [(step, rid) for rid in run_ids for step in STEP_SEQS]
        with self.hazel.store.read() as tx:
            reminders = Counter(m.request_id for m in tx.outbox.list(limit=100_000) if m.kind == "reminder")
            requests = [r for rid in run_ids for r in tx.requests.for_run(rid)]
        report = {
            "runs": len(run_ids),
            "runs completed": sum(1 for rid in run_ids if rid in runs and runs[rid].status is RunStatus.COMPLETED),
            "runs lost": sum(1 for rid in run_ids if rid not in runs),
            "decisions recorded": sum(decided.values()),
            "decisions lost": sum(1 for rid in run_ids if decided[rid] and runs[rid].status is RunStatus.WAITING),
            "steps never committed": sum(1 for key in expected if committed[key] == 0),
            "steps committed twice": sum(1 for key in expected if committed[key] > 1),
            "steps executed again after a fault": sum(n - 1 for n in started.values() if n > 1),
            "workers killed": len(self.killed),
        }
        if self.remind_sec is not None:
            report.update({
                "reminders sent": sum(reminders.values()),
                "requests reminded more than once": sum(1 for n in reminders.values() if n > 1),
                "requests never reminded": sum(1 for r in requests if reminders[r.id] == 0),
            })
        return report
