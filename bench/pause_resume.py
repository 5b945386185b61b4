"""Item 4 on Hazel: runs that execute 3 steps and stop at a steering point, then one decision each.

``pause_per_sec``: runs started and driven to their steering point per second. ``resume latency``: from the
call that records the decision (``Hazel.decide``: its one transaction included) to the start of the step after
the steering point (``Hazel.on_step``), as LangGraph's is measured from ``invoke(Command(resume=…))``.
``resumes_per_sec``: decisions per second, each one recorded and its run executed to the end. In process, one
run is paused and resumed untimed first (LangGraph's and DBOS's sides do the same): a process's first decision
imports the steering modules and compiles its statements (10-17 ms once), which the p99 of 100 runs was.

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
    """Throughputs per second and latencies in milliseconds (see the module docstring). ``cpu_ms``: with worker
    processes, CPU time (user + system, ms) per resume of the resumes/s phase, by who spent it: ``workers``,
    ``postgresql`` (every ``postgres`` process of this machine: none when the server is elsewhere) and
    ``bench`` (this process, looking whether the runs are done); None in process."""

    pause_per_sec: float
    resume_median_ms: float
    resume_p99_ms: float
    resumes_per_sec: float
    cpu_ms: dict[str, float] | None = None


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
        # one run paused and resumed untimed, as in a process that has decided before (the first decision of a
        # process imports the steering modules and compiles its statements: 10-17 ms, the p99 of 100 runs)
        warm_up = _start_and_pause(hazel, inline=inline)
        _wait_for(hazel, [warm_up], RunStatus.WAITING)
        hazel.decide(run_id=warm_up, action="approve", actor=ACTOR, claim=inline)
        if inline:
            hazel.drive(run_id=warm_up)
        _wait_for(hazel, [warm_up], RunStatus.COMPLETED)
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
        _wait_for(hazel, run_ids, RunStatus.COMPLETED, beside=1)
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


def _wait_for(hazel, run_ids: list[str], status: RunStatus, timeout_sec: float = 300.0, *,  # noqa: ANN001
              poll_sec: float = 0.002, beside: int = 0) -> float:
    """Look every ``poll_sec`` until every run in ``run_ids`` has ``status`` (counted with ``beside`` other runs
    that have it already: a warm-up's). Returns when they got there (``time.monotonic()``): halfway between the
    last look that found them short and the first that did not.

    Raises:
        TimeoutError: after ``timeout_sec``.
    """
    wanted = set(run_ids)
    deadline = time.monotonic() + timeout_sec
    short_at = time.monotonic()
    while True:
        with hazel.store.read() as tx:
            counts = tx.runs.count_by_status()
        now = time.monotonic()
        if counts.get(status.value, 0) >= len(wanted) + beside:
            return (short_at + now) / 2
        if now > deadline:
            raise TimeoutError(f"runs did not reach {status.value}: {counts}")
        short_at = now
        time.sleep(poll_sec)


WORKER_POLL_SEC = 0.02
"""How often the bench process looks whether the worker processes are done (``_wait_for``): each look is a
query, and looking every 2 ms took 15 to 30 % of a core from the workers and PostgreSQL on a 2-core machine
(psutil over a 1-worker run). Halfway between two looks, the end of a phase is known within ±10 ms, on phases
of 2 s and more."""


LATENCY_PACE_SEC = 0.02
"""With worker processes, decisions for the latency phase are made one every this many seconds (50/s, well
under what one worker process resumes), so that latency measures the path, not a queue."""


def worker_processes(backend, n_runs: int, *, processes: int, threads: int = 4,  # noqa: ANN001
                     latency_runs: int | None = None, fork_server: "ForkServer | None" = None) -> PauseResume:
    """Runs started here and executed by ``processes`` worker processes (``python -m bench.worker``: a
    ``WorkerPool`` of ``threads`` threads each, woken by PostgreSQL ``LISTEN``; forked by ``fork_server`` when
    given, which saves each the imports, else started as new processes).

    - pause: ``n_runs`` runs started here, executed by the workers to their steering point, per second;
    - resumes/s: the fleet's capacity. The worker processes are paused (SIGSTOP) while every run is approved
      here (each decision leaves its run ``ready`` and sends ``NOTIFY``), then let go (SIGCONT): ``n_runs``
      divided by the time until every run completed. Decisions made here while they run would measure this
      one process's decision rate instead, whatever the number of workers;
    - latency: once the workers have delivered the notifications of the runs above, ``latency_runs`` more
      runs (default ``n_runs``, at most 200) approved one every ``LATENCY_PACE_SEC`` while the workers run, from the ``decide`` call to the start of the resumed step in
      a worker (CLOCK_MONOTONIC is one clock for every process on the machine)."""
    url = backend.fresh_url("workers")
    hazel = make_engine(url, bench_pause)
    latency_runs = min(latency_runs or n_runs, 200)
    with tempfile.TemporaryDirectory(prefix="hazel-bench-workers-") as tmp:
        outs = [os.path.join(tmp, f"worker-{i}.json") for i in range(processes)]
        pids: list[int] = []
        children: list[subprocess.Popen] = []
        try:
            if fork_server is not None:
                fork_server.spawn(url, outs, threads, pids)
            else:
                children = [_spawn_worker(url, out, threads) for out in outs]
                for proc in children:
                    pids.append(_ready_pid(proc.stdout))
            started = time.monotonic()
            run_ids = [hazel.start(workflow=PAUSE_WORKFLOW, input={}, actor=ACTOR).id
                       for _ in range(n_runs + latency_runs)]
            pause_sec = _wait_for(hazel, run_ids, RunStatus.WAITING, poll_sec=WORKER_POLL_SEC) - started
            bulk, paced = run_ids[:n_runs], run_ids[n_runs:]
            # Stop the workers only once they are idle: a worker stopped inside a transaction (delivering a
            # request's message) keeps its row locks, and a decision here on that request would wait for them
            # until SIGCONT (seen once: a quick run stalled for minutes).
            _wait_idle(hazel)
            _signal(pids, signal.SIGSTOP)
            try:
                for run_id in bulk:
                    hazel.decide(run_id=run_id, action="approve", actor=ACTOR)
            finally:
                cpu_before = cpu_seconds(pids)
                started = time.monotonic()
                _signal(pids, signal.SIGCONT)
            resume_sec = _wait_for(hazel, bulk, RunStatus.COMPLETED, poll_sec=WORKER_POLL_SEC) - started
            cpu_ms = {who: sum(at - cpu_before.get(who, {}).get(pid, 0.0) for pid, at in by_pid.items())
                      * 1e3 / len(bulk) for who, by_pid in cpu_seconds(pids).items()}
            _wait_idle(hazel)  # the bulk phase's notifications delivered: the latency phase starts with no queue
            decided_at: dict[str, float] = {}
            for run_id in paced:
                decided_at[run_id] = time.monotonic()
                hazel.decide(run_id=run_id, action="approve", actor=ACTOR)
                time.sleep(max(0.0, decided_at[run_id] + LATENCY_PACE_SEC - time.monotonic()))
            _wait_for(hazel, run_ids, RunStatus.COMPLETED, poll_sec=WORKER_POLL_SEC)
        finally:
            _signal(pids, signal.SIGCONT)
            _signal(pids, signal.SIGTERM)
            for proc in children:
                if proc.poll() is None and len(pids) < len(children):  # never became ready
                    proc.kill()
                proc.wait(timeout=30)
            hazel.close()
        _wait_written(outs[:len(pids)])
        step_at: dict[str, float] = {}
        for out in outs:
            for run_id, step, at in json.loads(Path(out).read_text()):
                if step == RESUMED_STEP:
                    step_at[run_id] = at
    latencies = _latencies_ms(decided_at, step_at)
    return PauseResume(len(run_ids) / pause_sec, percentile(latencies, 50), percentile(latencies, 99),
                       n_runs / resume_sec, cpu_ms)


def cpu_seconds(worker_pids: list[int]) -> dict[str, dict[int, float]]:
    """CPU time (user + system, seconds) spent so far by each process of ``worker_pids``, of every ``postgres``
    process on this machine (backends, WAL writer, checkpointer: what PostgreSQL spends for the workers) and of
    this process: ``{"workers": {pid: …}, "postgresql": {…}, "bench": {…}}`` (``postgresql`` missing when
    none runs here; subtract by pid, so that a process that ended in between counts nothing). Empty without
    psutil."""
    try:
        import psutil
    except ImportError:
        return {}
    spent: dict[str, dict[int, float]] = {}

    def add(who: str, proc: "psutil.Process") -> None:
        try:
            times = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return
        spent.setdefault(who, {})[proc.pid] = times.user + times.system

    for pid in worker_pids:
        try:
            add("workers", psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] == "postgres":
            add("postgresql", proc)
    add("bench", psutil.Process())
    return spent


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_written(paths: list[str], timeout_sec: float = 30.0) -> None:
    """Wait until every worker wrote its records (each file appears whole: written aside and renamed).

    Raises:
        TimeoutError: after ``timeout_sec``.
    """
    deadline = time.monotonic() + timeout_sec
    while not all(os.path.exists(p) for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError("a bench worker did not write its records")
        time.sleep(0.005)


def _worker_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)}


def _spawn_worker(url: str, out: str, threads: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench.worker", url, out, str(threads)], cwd=REPO,
                            env=_worker_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _ready_pid(stdout) -> int:  # noqa: ANN001
    """The pid of the next worker that says ``ready PID``.

    Raises:
        RuntimeError: it said anything else (``failed PID: …``) or nothing.
    """
    line = stdout.readline() if stdout else ""
    word, _, rest = line.strip().partition(" ")
    if word != "ready" or not rest.isdigit():
        raise RuntimeError(f"bench worker did not start (said {line.strip()!r})")
    return int(rest)


class ForkServer:
    """``python -m bench.worker --fork-server``, started on the first ``spawn`` and kept until ``close``: each
    worker forked from it starts without importing again (2 s each on a slow 2-core VM, more when several
    start at once)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None

    def spawn(self, url: str, outs: list[str], threads: int, pids: list[int]) -> None:
        """Fork one worker per file of ``outs``; appends each ready worker's pid to ``pids``.

        Raises:
            RuntimeError: the fork server or a worker failed to start.
        """
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-m", "bench.worker", "--fork-server"], cwd=REPO,
                                          env=_worker_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True)
        assert self._proc.stdin is not None
        for out in outs:
            self._proc.stdin.write(f"{url} {out} {threads}\n")
        self._proc.stdin.flush()
        for _ in outs:
            pids.append(_ready_pid(self._proc.stdout))

    def close(self) -> None:
        if self._proc is None:
            return
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
