"""``python -m bench.profile_resume [--postgres] [--runs N]``: cProfile of resumes, the operation Hazel exists
for: a decision on a waiting run of ``bench-pause`` and the run executed to its end, as ``hazel approve``
does (``decide(claim=True)`` + ``drive``), on SQLite (WAL, ``synchronous=FULL``) or PostgreSQL.

Prints what one resume costs: wall time, transactions, statements sent to the driver, commits, and the
functions that take the most time (cumulative), so that before/after comparisons in ``bench/README.md`` count
the same things.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import pstats
import time

from bench import databases
from bench.workload import ACTOR, PAUSE_WORKFLOW, bench_pause, make_engine

WARM_UP = 20


def _calls(stats: pstats.Stats, *names: str) -> int:
    """Calls of the functions whose ``(file, line, name)`` key mentions every one of ``names``."""
    return sum(value[1] for key, value in stats.stats.items()  # type: ignore[attr-defined]
               if all(n in f"{key[0]}:{key[2]}" for n in names))


def _counting(counts: dict[str, int]):  # noqa: ANN202
    """Patch the store so that every transaction it opens (``Store.transaction``, a drive's raw step
    ``StepWriter.write``) is counted in ``counts["transactions"]``, and every one that commits in
    ``counts["commits"]`` (a transaction ended with ``commit=True``, whether its COMMIT went on its own or with
    its statements; a raw step is its own commit); returns the undo."""
    from store import Store
    from store.steps import StepWriter
    from store.txconn import TxConnection

    transaction, write, end = Store.transaction, StepWriter.write, TxConnection.end

    def counted_transaction(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        counts["transactions"] += 1
        return transaction(self, *args, **kwargs)

    def counted_write(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        counts["transactions"] += 1
        counts["commits"] += 1
        return write(self, *args, **kwargs)

    def counted_end(self, *, commit: bool):  # noqa: ANN001, ANN202
        counts["commits"] += commit
        return end(self, commit=commit)

    Store.transaction, StepWriter.write = counted_transaction, counted_write  # type: ignore[method-assign]
    TxConnection.end = counted_end  # type: ignore[method-assign]

    def undo() -> None:
        Store.transaction, StepWriter.write = transaction, write  # type: ignore[method-assign]
        TxConnection.end = end  # type: ignore[method-assign]

    return undo


def profile(backend, n_runs: int, *, top: int = 25, sort: str = "cumulative",  # noqa: ANN001
            head_cache: bool = True) -> str:
    """Profile ``n_runs`` resumes on ``backend``; the report as text, functions ordered by ``sort`` (a
    ``pstats`` key: ``cumulative``, ``tottime``). ``head_cache=False``: the decision reads the paused
    checkpoint from the database, as one taken by another process does (``store.heads`` keeps nothing)."""
    hazel = make_engine(backend.fresh_url("profile"), bench_pause)
    if not head_cache:
        hazel.store.heads.max_entries = 0
    counts = {"transactions": 0, "commits": 0}
    try:
        run_ids = []
        for _ in range(n_runs + WARM_UP):
            run = hazel.start(workflow=PAUSE_WORKFLOW, input={}, actor=ACTOR, claim=True)
            hazel.drive(run_id=run.id)
            run_ids.append(run.id)
        for run_id in run_ids[:WARM_UP]:
            hazel.decide(run_id=run_id, action="approve", actor=ACTOR, claim=True)
            hazel.drive(run_id=run_id)
        profiler = cProfile.Profile()
        undo = _counting(counts)
        started = time.perf_counter()
        profiler.enable()
        for run_id in run_ids[WARM_UP:]:
            hazel.decide(run_id=run_id, action="approve", actor=ACTOR, claim=True)
            hazel.drive(run_id=run_id)
        profiler.disable()
        elapsed = time.perf_counter() - started
        undo()
    finally:
        hazel.close()
    stats = pstats.Stats(profiler)
    sqlite = backend.name == "sqlite"
    # statements sent to the driver: BEGIN and COMMIT included where they are statements (SQLite's COMMIT
    # is sqlite3's commit(); PostgreSQL's BEGIN and, in a pipeline that commits, COMMIT go with the others)
    statements = (_calls(stats, "execute", "sqlite3.Cursor") + _calls(stats, "execute", "sqlite3.Connection")
                  if sqlite else _calls(stats, "psycopg", "cursor.py", "execute"))
    commits = counts["commits"]
    transactions = counts["transactions"]
    held = _calls(stats, "store/heads.py", "_loaded")
    out = io.StringIO()
    out.write(f"{backend.name}: {n_runs} resumes, {elapsed / n_runs * 1e3:.2f} ms each under the profiler; per "
              f"resume: {transactions / n_runs:.1f} transactions, {statements / n_runs:.1f} statements, "
              f"{commits / n_runs:.1f} commits; paused checkpoints read from memory: {held / n_runs:.0%}\n")
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats(sort).print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_resume", description=__doc__)
    parser.add_argument("--postgres", action="store_true", help="on PostgreSQL instead of SQLite")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--sort", default="cumulative", help="pstats order: cumulative (default) or tottime")
    parser.add_argument("--top", type=int, default=25, help="how many functions to list")
    parser.add_argument("--no-head-cache", action="store_true",
                        help="read the paused checkpoint from the database (as a decision taken in another "
                             "process does) instead of the deciding process's memory (store.heads)")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    backend = databases.postgres_backend() if args.postgres else databases.sqlite_backend()
    with backend as b:
        print(profile(b, args.runs, top=args.top, sort=args.sort, head_cache=not args.no_head_cache))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
