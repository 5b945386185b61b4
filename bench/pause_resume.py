"""Item 4 on Hazel: runs that execute 3 steps and stop at a steering point, then one decision each.

``pause_per_sec``: runs started and driven to their steering point per second. ``resume latency``: from the
call that records the decision (``Hazel.decide``: its one transaction included) to the start of the step after
the steering point (``Hazel.on_step``), as LangGraph's is measured from ``invoke(Command(resume=…))``.
``resumes_per_sec``: decisions per second, each one recorded and its run executed to the end.

Modes: ``inline`` (the deciding thread continues the run, as ``hazel approve`` does: ``start`` and ``decide``
with ``claim=True`` lease the run in their own transaction and ``drive`` continues from the state in hand),
``threads`` (a ``WorkerPool`` of 4 threads in the same process, as in ``hazel serve``: a decision hands its
claim to the pool) and worker processes (``bench.worker``; each a ``WorkerPool`` in its own process, woken by
PostgreSQL ``LISTEN``; decisions made in the bench process leave the run ``ready`` for them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bot.ops.worker import WorkerPool
from store.models import RunStatus

from bench.stats import percentile
from bench.workload import ACTOR, PAUSE_WORKFLOW, RESUMED_STEP, bench_pause, make_engine

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PauseResume:
    """Throughputs per second and latencies in milliseconds (see the module docstring)."""

    pause_per_sec: float
    resume_median_ms: float
    resume_p99_ms: float
    resumes_per_sec: float


def _latencies_ms(ready_at: dict[str, float], step_at: dict[str, float]) -> list[float]:
    missing = [r for r in ready_at if r not in step_at]
    if missing:
        raise RuntimeError(f"{len(missing)} resumed runs never started {RESUMED_STEP!r}")
    return [(step_at[r] - ready_at[r]) * 1e3 for r in ready_at]


def _summary(n: int, pause_sec: float, resume_sec: float, latencies: list[float]) -> PauseResume:
    return PauseResume(n / pause_sec, percentile(latencies, 50), percentile(latencies, 99), n / resume_sec)


def in_process(backend, n_runs: int, *, mode: str = "inline", threads: int = 4) -> PauseResume:  # noqa: ANN001
    """``mode``: ``inline`` or ``threads`` (see the module docstring)."""
    hazel = make_engine(backend.fresh_url("pause"), bench_pause)
    decided_at: dict[str, float] = {}
    step_at: dict[str, float] = {}

    def on_step(run_id: str, step: str) -> None:
        if step == RESUMED_STEP:
            step_at[run_id] = time.monotonic()

    hazel.on_step(on_step)
    inline = mode == "inline"
    pool = WorkerPool(hazel, threads=threads) if not inline else None
    try:
        if pool is not None:
            pool.start()
        started = time.monotonic()
        run_ids = [_start_and_pause(hazel, inline=inline) for _ in range(n_runs)]
        _wait_for(hazel, run_ids, RunStatus.WAITING)
        pause_sec = time.monotonic() - started
        started = time.monotonic()
        for run_id in run_ids:
            decided_at[run_id] = time.monotonic()
            hazel.decide(run_id=run_id, action="approve", actor=ACTOR, claim=inline)
            if inline:
                hazel.drive(run_id=run_id)
        _wait_for(hazel, run_ids, RunStatus.COMPLETED)
        resume_sec = time.monotonic() - started
    finally:
        if pool is not None:
            pool.stop()
        hazel.close()
    return _summary(n_runs, pause_sec, resume_sec, _latencies_ms(decided_at, step_at))


def _start_and_pause(hazel, *, inline: bool) -> str:  # noqa: ANN001
    run = hazel.start(workflow=PAUSE_WORKFLOW, input={}, actor=ACTOR, claim=inline)
    if inline:
        hazel.drive(run_id=run.id)
    return run.id


def _wait_idle(hazel, timeout_sec: float = 300.0) -> None:  # noqa: ANN001
    """Poll until the outbox has no pending message (the workers' delivery threads are idle).

    Raises:
        TimeoutError: after ``timeout_sec``.
    """
    deadline = time.monotonic() + timeout_sec
    while hazel.outbox_backlog().get("pending", 0):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the outbox did not drain: {hazel.outbox_backlog()}")
        time.sleep(0.01)
    time.sleep(0.05)  # a margin for a delivery thread finishing its bookkeeping


def _wait_for(hazel, run_ids: list[str], status: RunStatus, timeout_sec: float = 300.0) -> None:  # noqa: ANN001
    """Poll until every run in ``run_ids`` has ``status``.

    Raises:
        TimeoutError: after ``timeout_sec``.
    """
    wanted = set(run_ids)
    deadline = time.monotonic() + timeout_sec
    while True:
        with hazel.store.read() as tx:
            counts = tx.runs.count_by_status()
        if counts.get(status.value, 0) >= len(wanted):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"runs did not reach {status.value}: {counts}")
        time.sleep(0.002)


LATENCY_PACE_SEC = 0.02
"""With worker processes, decisions for the latency phase are made one every this many seconds (50/s, well
under what one worker process resumes), so that latency measures the path, not a queue."""


def worker_processes(backend, n_runs: int, *, processes: int, threads: int = 4,  # noqa: ANN001
                     latency_runs: int | None = None) -> PauseResume:
    """Runs started here and executed by ``processes`` worker processes (``python -m bench.worker``: a
    ``WorkerPool`` of ``threads`` threads each, woken by PostgreSQL ``LISTEN``).

    - pause: ``n_runs`` runs started here, executed by the workers to their steering point, per second;
    - resumes/s: the fleet's capacity. The worker processes are paused (SIGSTOP) while every run is approved
      here (each decision leaves its run ``ready`` and sends ``NOTIFY``), then let go (SIGCONT): ``n_runs``
      divided by the time until every run completed. Decisions made here while they run would measure this
      one process's decision rate instead, whatever the number of workers;
    - latency: ``latency_runs`` more runs (default ``n_runs``, at most 200) approved one every
      ``LATENCY_PACE_SEC`` while the workers run, from the ``decide`` call to the start of the resumed step in
      a worker (CLOCK_MONOTONIC is one clock for every process on the machine)."""
    url = backend.fresh_url("workers")
    hazel = make_engine(url, bench_pause)
    latency_runs = min(latency_runs or n_runs, 200)
    with tempfile.TemporaryDirectory(prefix="hazel-bench-workers-") as tmp:
        outs = [os.path.join(tmp, f"worker-{i}.json") for i in range(processes)]
        procs = [_spawn_worker(url, out, threads) for out in outs]
        try:
            for proc in procs:
                _wait_ready(proc)
            started = time.monotonic()
            run_ids = [hazel.start(workflow=PAUSE_WORKFLOW, input={}, actor=ACTOR).id
                       for _ in range(n_runs + latency_runs)]
            _wait_for(hazel, run_ids, RunStatus.WAITING)
            pause_sec = time.monotonic() - started
            bulk, paced = run_ids[:n_runs], run_ids[n_runs:]
            # Stop the workers only once they are idle: a worker stopped inside a transaction (delivering a
            # request's message) keeps its row locks, and a decision here on that request would wait for them
            # until SIGCONT (seen once: a quick run stalled for minutes).
            _wait_idle(hazel)
            for proc in procs:
                proc.send_signal(signal.SIGSTOP)
            try:
                for run_id in bulk:
                    hazel.decide(run_id=run_id, action="approve", actor=ACTOR)
            finally:
                started = time.monotonic()
                for proc in procs:
                    proc.send_signal(signal.SIGCONT)
            _wait_for(hazel, bulk, RunStatus.COMPLETED)
            resume_sec = time.monotonic() - started
            decided_at: dict[str, float] = {}
            for run_id in paced:
                decided_at[run_id] = time.monotonic()
                hazel.decide(run_id=run_id, action="approve", actor=ACTOR)
                time.sleep(max(0.0, decided_at[run_id] + LATENCY_PACE_SEC - time.monotonic()))
            _wait_for(hazel, run_ids, RunStatus.COMPLETED)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=30)
            hazel.close()
        step_at: dict[str, float] = {}
        for out in outs:
            for run_id, step, at in json.loads(Path(out).read_text()):
                if step == RESUMED_STEP:
                    step_at[run_id] = at
    latencies = _latencies_ms(decided_at, step_at)
    return PauseResume(len(run_ids) / pause_sec, percentile(latencies, 50), percentile(latencies, 99),
                       n_runs / resume_sec)


def _spawn_worker(url: str, out: str, threads: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)}
    return subprocess.Popen([sys.executable, "-m", "bench.worker", url, out, str(threads)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _wait_ready(proc: subprocess.Popen) -> None:
    """Raises RuntimeError when the worker exits instead of printing ``ready``."""
    line = proc.stdout.readline() if proc.stdout else ""
    if line.strip() != "ready":
        raise RuntimeError(f"bench worker did not start (said {line!r})")
