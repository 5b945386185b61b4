"""Items 2, 3 and 6 on Hazel: checkpoint cost per step, bytes on disk per checkpoint, history and rewind.

Per-step cost is the time from one step's start to the next step's start (``Hazel.on_step``): the step
function, encoding the state, the diff, and the one transaction that commits the checkpoint and the run's
head. Runs are executed through the engine's boundary as ``hazel run`` does (``start(claim=True)`` leases the
run in the transaction that creates it, ``drive`` executes it), on the engine alone: outbox rows are written
in each transaction and not delivered in between.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from statistics import median

from bench.databases import HAZEL_TABLES
from bench.stats import mean
from bench.workload import ACTOR, linear_workflow, make_engine


WARM_UP_STEPS = 20
"""Steps of the run executed before the measured one, in the same process and engine."""

REWIND_SAMPLES = 5
"""Item 6: rewinds timed per repetition, each the first rewind of its own completed run (a second rewind to the
same checkpoint finds its rows in the page cache: LangGraph's took 3.8 ms there against 5.7 for the first);
the row is their median, on every side alike (one sample per repetition spread 3.74..5.32 ms)."""


@dataclass(frozen=True)
class StepCost:
    """``per_step_us``: mean microseconds per step over the run; ``first20_us`` / ``last20_us``: mean of the
    first and last 20 steps; ``bytes_per_checkpoint``: on-disk growth of the database per checkpoint
    written (None when not measured)."""

    per_step_us: float
    first20_us: float
    last20_us: float
    bytes_per_checkpoint: float | None = None

    @property
    def growth(self) -> float:
        return self.last20_us / self.first20_us


def step_intervals_us(starts: list[float]) -> list[float]:
    """Microseconds between consecutive step starts (``perf_counter`` seconds)."""
    return [(b - a) * 1e6 for a, b in zip(starts, starts[1:])]


def cost_of(starts: list[float], bytes_per_checkpoint: float | None = None) -> StepCost:
    intervals = step_intervals_us(starts)
    edge = min(20, len(intervals))
    return StepCost(mean(intervals), mean(intervals[:edge]), mean(intervals[-edge:]), bytes_per_checkpoint)


def checkpoint_cost(backend, n_steps: int, *, measure_storage: bool = False) -> StepCost:  # noqa: ANN001
    """Run ``bench-linear-N`` once on a fresh database of ``backend`` and time every step."""
    url = backend.fresh_url("linear")
    warm_up = linear_workflow(WARM_UP_STEPS, name="bench-warm-up")
    hazel = make_engine(url, linear_workflow(n_steps), warm_up)
    # Items 2, 8, 9 and 12 collect the garbage before the warm-up run, on every side, so that no full collection
    # of what earlier measurements left lands in the measured run. Not between the warm-up and the measured run
    # (as until the session after ec92208): the first five steps after a full collection took 445 µs against 324
    # without one (SQLite, one engine, runs alternated; the other 45 steps 326 against 339).
    gc.collect()
    # statement caches warm, as in a process that has run steps
    warm = hazel.start(workflow=warm_up.name, input={}, actor=ACTOR, claim=True)
    hazel.drive(run_id=warm.id)
    if measure_storage and backend.name == "sqlite":
        hazel.store.dispose()  # every connection closed, so that the WAL folds into the file
    before = backend.size_bytes(url, HAZEL_TABLES) if measure_storage else 0
    starts: list[float] = []
    hazel.on_step(lambda _run_id, _step: starts.append(time.perf_counter()))
    run = hazel.start(workflow=f"bench-linear-{n_steps}", input={}, actor=ACTOR, claim=True)
    result = hazel.drive(run_id=run.id)
    assert result.status is not None and result.status.value == "completed", result
    checkpoints = len(hazel.checkpoints(run_id=run.id))
    hazel.close()
    per_checkpoint = None
    if measure_storage:
        per_checkpoint = (backend.size_bytes(url, HAZEL_TABLES) - before) / checkpoints
    return cost_of(starts, per_checkpoint)


@dataclass(frozen=True)
class HistoryCost:
    """``history_ms``: listing a run's checkpoints; ``rewind_step_ms``: rewind to checkpoint 100 until the
    first step after it has committed its checkpoint (the start of the step after it), the median of
    ``REWIND_SAMPLES`` runs."""

    history_ms: float
    rewind_step_ms: float


def history_and_rewind(backend, n_steps: int = 200, rewind_to: int = 100,  # noqa: ANN001
                       samples: int = REWIND_SAMPLES) -> HistoryCost:
    """Item 6: ``samples`` completed ``n_steps`` runs; time ``Hazel.checkpoints`` (what ``hazel history``
    shows) of the first, then on each run once ``Hazel.rewind(to=rewind_to, claim=True)`` (one transaction: the
    fork and the lease) + ``drive`` to the start of the second step on the new branch (the first one
    committed); ``rewind_step_ms`` is their median."""
    url = backend.fresh_url("history")
    warm_up = linear_workflow(WARM_UP_STEPS, name="bench-warm-up")
    hazel = make_engine(url, linear_workflow(n_steps), warm_up)
    # the same calls once, so that statement caches are warm
    warm = hazel.start(workflow=warm_up.name, input={}, actor=ACTOR, claim=True)
    hazel.drive(run_id=warm.id)
    hazel.checkpoints(run_id=warm.id)
    hazel.rewind(run_id=warm.id, actor=ACTOR, to=WARM_UP_STEPS // 2, claim=True)
    hazel.drive(run_id=warm.id)
    run_ids = []
    for _ in range(samples):
        run = hazel.start(workflow=f"bench-linear-{n_steps}", input={}, actor=ACTOR, claim=True)
        hazel.drive(run_id=run.id)
        run_ids.append(run.id)
    started = time.perf_counter()
    history = hazel.checkpoints(run_id=run_ids[0])
    history_ms = (time.perf_counter() - started) * 1e3
    assert len(history) == n_steps + 1
    starts: list[float] = []
    hazel.on_step(lambda _run_id, _step: starts.append(time.perf_counter()))
    rewinds_ms = []
    for run_id in run_ids:
        starts.clear()
        started = time.perf_counter()
        hazel.rewind(run_id=run_id, actor=ACTOR, to=rewind_to, claim=True)
        hazel.drive(run_id=run_id)
        rewinds_ms.append((starts[1] - started) * 1e3)
    rewind_step_ms = median(rewinds_ms)
    hazel.close()
    return HistoryCost(history_ms, rewind_step_ms)
