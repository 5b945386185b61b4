"""Item 12: ``HazelSaver`` (``hazel.langgraph``) beside LangGraph's own savers, on item 8's workload.

The same graph as item 8 (``bench.langgraph_side``: ``StateGraph`` over ``items: Annotated[list[str],
operator.add]``, one node per step appending ``step_text(i)``, about 1 KB, ``durability="sync"``), compiled once
with ``HazelSaver`` on Hazel's database and once with LangGraph's saver for that database (``SqliteSaver`` on
SQLite, WAL and ``synchronous=FULL`` as Hazel; ``PostgresSaver`` on PostgreSQL). Per step is the time from one
node's start to the next's; bytes per checkpoint is the growth of the saver's tables on disk (SQLite: the file
after folding its WAL in; PostgreSQL: ``pg_total_relation_size`` of its tables, TOAST and indexes included)
divided by the checkpoints the thread lists. Each saver runs a 20-step warm-up thread first, in the same process.

``python -m bench.langgraph_saver [--quick] [--steps N ...] [--reps N] [--backend sqlite|postgresql|both]``
prints the figures and the ratios (HazelSaver ÷ LangGraph's saver); ``python -m bench`` has them as item 12.
"""

from __future__ import annotations

import argparse
import gc
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from statistics import median
from typing import Any, Iterator

from bench import databases, langgraph_side
from bench.databases import file_size_bytes
from bench.hazel_side import WARM_UP_STEPS, StepCost, cost_of

HAZEL_SAVER_TABLES = ("hazel_lg_checkpoints", "hazel_lg_writes")


def available() -> str | None:
    """None when LangGraph, its savers and ``hazel.langgraph`` import, else what is missing."""
    missing = langgraph_side.available()
    if missing is not None:
        return missing
    try:
        import hazel.langgraph  # noqa: F401
    except ImportError as exc:
        return f"{exc.name or exc} not installed (pip install -e '.[langgraph]')"
    return None


@contextmanager
def hazel_saver_for(backend, tag: str) -> Iterator[tuple[Any, str]]:  # noqa: ANN001
    """A ``HazelSaver`` on a fresh, migrated database of ``backend``; yields ``(saver, url)``. The saver's
    connections are closed when the block ends."""
    from hazel.langgraph import HazelSaver

    url = backend.fresh_url(f"hazel-saver-{tag}")
    with HazelSaver.from_conn_string(url) as saver:
        yield saver, url


def _size(backend, url: str) -> int:  # noqa: ANN001
    if backend.name == "sqlite":
        return file_size_bytes(backend.file_of(url))
    return backend.size_bytes(url, HAZEL_SAVER_TABLES)


def checkpoint_cost(backend, n_steps: int, *, measure_storage: bool = False) -> StepCost:  # noqa: ANN001
    """Item 8's linear graph of ``n_steps`` nodes on ``HazelSaver``: per-step times and, with
    ``measure_storage``, bytes on disk per checkpoint."""
    starts: list[float] = []
    with hazel_saver_for(backend, "linear") as (saver, url):
        graph = langgraph_side.linear_graph(n_steps, starts).compile(checkpointer=saver)
        warm_up = langgraph_side.linear_graph(WARM_UP_STEPS, None).compile(checkpointer=saver)
        gc.collect()  # as every side, before the warm-up (bench.hazel_side.checkpoint_cost)
        warm_up.invoke({"items": []}, langgraph_side._config("warm-up", WARM_UP_STEPS), durability="sync")
        before = _size(backend, url) if measure_storage else 0
        thread = uuid.uuid4().hex
        graph.invoke({"items": []}, langgraph_side._config(thread, n_steps), durability="sync")
        count = sum(1 for _ in saver.list(langgraph_side._config(thread)))
    per_checkpoint = (_size(backend, url) - before) / count if measure_storage else None
    return cost_of(starts, per_checkpoint)


@dataclass(frozen=True)
class Comparison:
    """One repetition on one backend: ``hazel`` and ``langgraph`` (its own saver for that database)."""

    n_steps: int
    hazel: StepCost
    langgraph: StepCost

    @property
    def step_ratio(self) -> float:
        return self.hazel.per_step_us / self.langgraph.per_step_us

    @property
    def bytes_ratio(self) -> float:
        assert self.hazel.bytes_per_checkpoint is not None and self.langgraph.bytes_per_checkpoint
        return self.hazel.bytes_per_checkpoint / self.langgraph.bytes_per_checkpoint


def compare(backend, n_steps: int) -> Comparison:  # noqa: ANN001
    """Both savers on ``n_steps`` nodes, storage measured."""
    hazel = checkpoint_cost(backend, n_steps, measure_storage=True)
    langgraph = langgraph_side.checkpoint_cost(backend, n_steps, measure_storage=True)
    return Comparison(n_steps, hazel, langgraph)


QUICK_STEPS = (50, 500)
QUICK_REPS = 1
FULL_REPS = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.langgraph_saver", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_REPS} repetition")
    parser.add_argument("--steps", type=int, nargs="+", default=list(QUICK_STEPS))
    parser.add_argument("--reps", type=int)
    parser.add_argument("--backend", choices=databases.BACKEND_CHOICES, default="both")
    args = parser.parse_args(argv)
    missing = available()
    if missing is not None:
        parser.error(missing)
    reps = args.reps or (QUICK_REPS if args.quick else FULL_REPS)
    with ExitStack() as stack:
        for b in databases.chosen(stack, args.backend):
            peer = "SqliteSaver" if b.name == "sqlite" else "PostgresSaver"
            print(f"## {b.label}: HazelSaver and {peer}, median of {reps}")
            print(f"| steps | HazelSaver µs/step | {peer} µs/step | ÷ per step | HazelSaver B/checkpoint "
                  f"| {peer} B/checkpoint | ÷ bytes |")
            print("|---|---|---|---|---|---|---|")
            for n in args.steps:
                runs = [compare(b, n) for _ in range(reps)]
                print(f"| {n} | {median([r.hazel.per_step_us for r in runs]):,.0f} "
                      f"| {median([r.langgraph.per_step_us for r in runs]):,.0f} "
                      f"| {median([r.step_ratio for r in runs]):.3f} "
                      f"| {median([r.hazel.bytes_per_checkpoint for r in runs]):,.0f} "
                      f"| {median([r.langgraph.bytes_per_checkpoint for r in runs]):,.0f} "
                      f"| {median([r.bytes_ratio for r in runs]):.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
