"""``python -m bench [--quick] [--reps N] [--json PATH] [--no-langgraph]``: run every measurement on SQLite and
PostgreSQL, print one table (markdown) of medians with min..max over the repetitions."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from typing import Callable

from bench import databases, floor, hazel_side, langgraph_side, pause_resume, serve_memory, slack_ack
from bench import dbos_side, langgraph_saver
from bench.report import Goal, Report, Row, Samples, machine_lines

SQLITE_ONLY = ("sqlite",)
PG_ONLY = ("postgresql",)


@dataclass(frozen=True)
class Sizes:
    """How much each measurement does (the issue's workload unless ``--quick`` shrinks it)."""

    reps: int = 5
    floor_rows: int = 2000
    steps: tuple[int, int] = (50, 500)
    pause_runs: int = 1000
    worker_runs: int = 1000
    worker_latency_runs: int = 200
    waiting_runs: int = 10_000
    history_steps: int = 200
    rewind_to: int = 100
    slack_clicks: int = 200
    serve_settle_sec: float = 1.0
    dbos_pause_runs: int = 1000
    db_small_runs: int = 1000
    db_big_runs: int = 100_000
    cli_repeats: int = 5
    peer_reps: int | None = None
    """Repetitions (the first ones) in which the peers are measured: LangGraph (item 8), DBOS (item 9) and
    HazelSaver (item 12, judged against LangGraph's saver of the same repetition); None: every repetition."""
    serve_processes: int | None = None
    """``hazel serve`` processes per database state in item 5; None: one per repetition."""
    prune_runs: int = 50
    """Runs per prune batch in item 10."""
    prune_reps: int = 5
    """Prune batches timed on each of item 10's databases."""
    db_samples: int = 15
    """Item 10: at least this many calls of each operation on each database (a third for ``waiting_on``)."""
    db_budget_sec: float = 0.3
    """Item 10: more calls while one operation's take less than this (at most 400)."""
    cli_postgres: bool = True
    """Item 11 on PostgreSQL too (its goals are judged on SQLite)."""


FULL = Sizes()
QUICK = Sizes(reps=3, floor_rows=300, pause_runs=100, worker_runs=100, worker_latency_runs=40, slack_clicks=20,
              serve_settle_sec=0.3, dbos_pause_runs=50, db_big_runs=10_000, cli_repeats=3, peer_reps=1,
              serve_processes=1, prune_runs=20, prune_reps=3, db_budget_sec=0.15, cli_postgres=False)
QUICK_BUDGET_SEC = 180
"""``--quick`` is meant to finish within this on the 2-core machine with nothing else running; it says so
when it took longer."""

LOWER, HIGHER = "<=", ">="


def _peer_rows(peer: str, name: str, sizes: Sizes) -> list[Row]:
    """A peer's own figures (items 2, 3, 4, 6) and Hazel ÷ peer ratios. Goal: Hazel ahead on every row."""
    small, large = sizes.steps
    n = sizes.pause_runs if peer == "lg" else sizes.dbos_pause_runs
    h = sizes.history_steps
    ahead = Goal(LOWER, 1.0, "< 1 (ahead)")
    ahead_rate = Goal(HIGHER, 1.0, "> 1 (ahead)")
    item = "8" if peer == "lg" else "9"
    lg = peer == "lg"
    return [
        Row(item, f"{name} per step, {small} steps, µs", f"{peer}_step{small}_us"),
        Row(item, f"{name} per step, {large} steps, µs", f"{peer}_step{large}_us"),
        Row(item, f"{name} growth, last 20 ÷ first 20 ({large} steps)", f"{peer}_growth{large}", 2),
        Row(item, f"Hazel ÷ {name} per step, {small} steps", f"hz_step{small}_us/{peer}_step{small}_us", 3,
            None if lg else ahead),
        Row(item, f"Hazel ÷ {name} per step, {large} steps", f"hz_step{large}_us/{peer}_step{large}_us", 3,
            Goal(LOWER, 1 / 3, "≤ 0.333 (3x faster)") if lg else ahead),
        Row(item, f"{name} bytes on disk per checkpoint after {large} steps", f"{peer}_bytes_cp"),
        Row(item, f"Hazel ÷ {name} bytes per checkpoint", f"hz_bytes_cp/{peer}_bytes_cp", 4,
            Goal(LOWER, 0.05, "≤ 0.05 (20x smaller)") if lg else ahead),
        Row(item, f"{name} pause runs/s ({n} runs)", f"{peer}_pause_ps"),
        Row(item, f"{name} resume latency median, ms", f"{peer}_resume_p50_ms", 2),
        Row(item, f"{name} resume latency p99, ms", f"{peer}_resume_p99_ms", 2),
        Row(item, f"{name} resumes/s", f"{peer}_resumes_ps"),
        Row(item, f"Hazel ÷ {name} pause runs/s", f"hz_pause_ps/{peer}_pause_ps", 2,
            Goal(HIGHER, 2.0, "≥ 2") if lg else ahead_rate),
        Row(item, f"Hazel ÷ {name} resume latency median", f"hz_resume_p50_ms/{peer}_resume_p50_ms", 3,
            Goal(LOWER, 0.5, "≤ 0.5") if lg else ahead),
        Row(item, f"Hazel ÷ {name} resume latency p99", f"hz_resume_p99_ms/{peer}_resume_p99_ms", 3,
            Goal(LOWER, 0.5, "≤ 0.5") if lg else ahead),
        Row(item, f"Hazel ÷ {name} resumes/s", f"hz_resumes_ps/{peer}_resumes_ps", 2,
            Goal(HIGHER, 2.0, "≥ 2") if lg else ahead_rate),
        Row(item, f"{name} history of a {h}-step run, ms", f"{peer}_history_ms", 2),
        Row(item, f"{name} rewind to #{sizes.rewind_to} + one step, ms", f"{peer}_rewind_ms", 2),
        Row(item, f"Hazel ÷ {name} history", f"hz_history_ms/{peer}_history_ms", 4, None if lg else ahead),
        Row(item, f"Hazel ÷ {name} rewind + one step", f"hz_rewind_ms/{peer}_rewind_ms", 3,
            Goal(LOWER, 0.5, "≤ 0.5") if lg else ahead),
    ]


DB_OPERATIONS = (
    ("runs_list", "`hazel runs` (Hazel.runs, 50 newest)"),
    ("api_runs", "GET /api/runs"),
    ("show", "`hazel show` (Hazel.get + pending_request)"),
    ("api_run", "GET /api/runs/{id}"),
    ("prefix", "a run-id prefix (Hazel.resolve)"),
    ("metrics", "GET /metrics (exposition)"),
    ("waiting_on", "App Home: waiting on you (Hazel.waiting_on)"),
    ("prune_per_run", "hazel prune, per run removed"),
)
CLI_COMMANDS = (("help", "`hazel --help`", 0.15), ("runs", "`hazel runs`", 0.35), ("show", "`hazel show RUN`", 0.35),
                ("floor", "floor: `python -c 'import sqlalchemy, pydantic, typer, rich.console'`", None))
"""Item 11's rows: key, label, goal in seconds (None: a reference, the floor any command pays on this machine)."""


def rows(sizes: Sizes) -> list[Row]:
    small, large = sizes.steps
    n, w, h = sizes.pause_runs, sizes.worker_runs, sizes.history_steps
    k = f"{sizes.waiting_runs:,}"
    big = f"{sizes.db_big_runs:,}"
    per_step = Goal(LOWER, 1.5, "≤ 1.5")
    return [
        Row("1", "floor: the cheapest durable write of one 1 KB row, µs", "floor_us"),
        Row("1", "floor: commits/s", "floor_cps"),
        Row("2", f"Hazel checkpoint per step, {small} steps, µs", f"hz_step{small}_us"),
        Row("2", f"Hazel checkpoint per step, {large} steps, µs", f"hz_step{large}_us"),
        Row("2", f"per step ÷ floor, {small} steps", f"hz_step{small}_us/floor_us", 2, per_step),
        Row("2", f"per step ÷ floor, {large} steps", f"hz_step{large}_us/floor_us", 2, per_step),
        Row("2", f"floor over a fresh database's first {hazel_side.WARM_UP_STEPS} + {small} commits, µs",
            f"floor_run{small}_us"),
        Row("2", f"floor over a fresh database's first {hazel_side.WARM_UP_STEPS} + {large} commits, µs",
            f"floor_run{large}_us"),
        Row("2", f"per step ÷ that floor, {small} steps (the same commits)", f"hz_step{small}_us/floor_run{small}_us", 2),
        Row("2", f"per step ÷ that floor, {large} steps (the same commits)", f"hz_step{large}_us/floor_run{large}_us", 2),
        Row("2", f"growth: last 20 ÷ first 20 steps ({large} steps)", f"hz_growth{large}", 2, Goal(LOWER, 1.1, "≤ 1.1")),
        Row("3", f"bytes on disk per checkpoint after {large} steps", "hz_bytes_cp", 0, Goal(LOWER, 1536, "≤ 1,536")),
        Row("4", f"pause: runs to their steering point per s (in-process, {n} runs)", "hz_pause_ps"),
        Row("4", "resume latency median, ms (in-process, from the decide call)", "hz_resume_p50_ms", 2),
        Row("4", "resume latency p99, ms (in-process)", "hz_resume_p99_ms", 2),
        Row("4", "resumes/s (in-process)", "hz_resumes_ps", 0, Goal(HIGHER, 1000, "≥ 1,000 (SQLite)", SQLITE_ONLY)),
        *[r for p in (1, 2) for r in (
            Row("4", f"pause runs/s, {p} worker process{'es' if p > 1 else ''} ({w} runs)", f"w{p}_pause_ps",
                backends=PG_ONLY),
            Row("4", f"resume latency median, ms, {p} worker process{'es' if p > 1 else ''} (one decision per "
                f"{pause_resume.LATENCY_PACE_SEC * 1000:.0f} ms)", f"w{p}_resume_p50_ms", 2, backends=PG_ONLY),
            Row("4", f"resume latency p99, ms, {p} worker process{'es' if p > 1 else ''}", f"w{p}_resume_p99_ms", 2,
                Goal(LOWER, 10, "≤ 10", PG_ONLY) if p == 1 else None, backends=PG_ONLY),
            Row("4", f"resumes/s, {p} worker process{'es' if p > 1 else ''} ({w} ready runs at once)",
                f"w{p}_resumes_ps", backends=PG_ONLY),
        )],
        Row("4", "resumes/s, 2 worker processes ÷ 1", "w2_resumes_ps/w1_resumes_ps", 2,
            Goal(HIGHER, 1.7, "≥ 1.7", PG_ONLY), backends=PG_ONLY),
        *[Row("4", f"CPU per resume, ms, 1 worker process: {label}", f"w1_cpu_{who}_ms", 2, backends=PG_ONLY)
          for who, label in (("workers", "the worker"), ("postgresql", "PostgreSQL (this machine's)"),
                             ("bench", "the bench process (looking whether runs are done)"))],
        Row("4", "CPU per resume, ms, 2 worker processes: all of the above", "w2_cpu_ms", 2, backends=PG_ONLY),
        Row("4", f"the most any number of worker processes could resume on {CORES} cores at 1's CPU per resume "
            "÷ 1's resumes/s", "w1_ceiling_ps/w1_resumes_ps", 2, backends=PG_ONLY),
        Row("5", "hazel serve RSS, 0 waiting runs, MiB", "serve_rss0_mb", 1),
        Row("5", f"hazel serve RSS, {k} waiting runs, MiB", "serve_rss10k_mb", 1),
        Row("5", f"RSS difference ({k} − 0), MiB", "serve_rss_delta_mb", 1, Goal(LOWER, 20, "< 20")),
        Row("5", "threads, 0 waiting runs", "serve_threads0"),
        Row("5", f"threads, {k} waiting runs", "serve_threads10k"),
        Row("5", f"thread difference ({k} − 0)", "serve_threads_delta", 0, Goal(LOWER, 1, "no thread per run")),
        Row("5", f"DBOS: threads held while {sizes.dbos_pause_runs} runs wait in DBOS.recv", "dbos_waiting_threads"),
        Row("6", f"history of a {h}-step run, ms", "hz_history_ms", 2, Goal(LOWER, 10, "< 10")),
        Row("6", f"rewind to #{sizes.rewind_to} + one step, ms", "hz_rewind_ms", 2),
        Row("7", f"Slack click → 200, p50, ms ({sizes.slack_clicks} clicks)", "slack_p50_ms", 2),
        Row("7", "Slack click → 200, p99, ms", "slack_p99_ms", 2, Goal(LOWER, 100, "< 100")),
        *_peer_rows("lg", "LangGraph", sizes),
        *_peer_rows("dbos", "DBOS", sizes),
        *[Row("10", f"{label}: {big} ÷ {sizes.db_small_runs:,} runs in the database", f"db_{key}", 2,
              Goal(LOWER, 1.2, "≤ 1.2")) for key, label in DB_OPERATIONS],
        *[r for key, label, limit in CLI_COMMANDS for r in (
            Row("11", f"{label}, whole process, s (median of {sizes.cli_repeats}; min..max)", f"cli_{key}_s", 3,
                None if limit is None else Goal(LOWER, limit, f"≤ {limit}", SQLITE_ONLY)),
        )],
        *[Row("11", f"{label} ÷ the floor (what Hazel's own code adds)", f"cli_{key}_s/cli_floor_s", 2)
          for key, label, _ in CLI_COMMANDS if key in ("runs", "show")],
        *_saver_rows(sizes),
    ]


def _saver_rows(sizes: Sizes) -> list[Row]:
    """Item 12: ``HazelSaver`` on item 8's graph, ÷ LangGraph's own saver for the database (``SqliteSaver`` |
    ``PostgresSaver``, item 8's figures of the same repetition)."""
    small, large = sizes.steps
    peer = "SqliteSaver | PostgresSaver"
    return [
        Row("12", f"HazelSaver per step, {small} steps, µs", f"hzs_step{small}_us"),
        Row("12", f"HazelSaver per step, {large} steps, µs", f"hzs_step{large}_us"),
        Row("12", f"HazelSaver growth, last 20 ÷ first 20 ({large} steps)", f"hzs_growth{large}", 2),
        Row("12", f"HazelSaver bytes on disk per checkpoint after {large} steps", "hzs_bytes_cp"),
        Row("12", f"HazelSaver ÷ {peer} per step, {small} steps", f"hzs_step{small}_us/lg_step{small}_us", 3),
        Row("12", f"HazelSaver ÷ {peer} per step, {large} steps", f"hzs_step{large}_us/lg_step{large}_us", 3,
            Goal(LOWER, 0.5, "≤ 0.5 (2x faster)")),
        Row("12", f"HazelSaver ÷ {peer} bytes per checkpoint", "hzs_bytes_cp/lg_bytes_cp", 4,
            Goal(LOWER, 0.05, "≤ 0.05 (20x smaller)")),
    ]


log = logging.getLogger("bench")


def _measure(samples: Samples, keys: list[str], backend: str, fn: Callable[[], object]) -> object | None:
    """Run one measurement; on failure note the error in its cells and carry on."""
    started = time.monotonic()
    try:
        result = fn()
    except Exception as exc:  # one broken measurement must not hide the others
        log.exception("%s on %s failed", keys[0], backend)
        for key in keys:
            samples.note(key, backend, f"error: {type(exc).__name__}")
        return None
    log.info("%-18s %-10s %6.2fs", keys[0], backend, time.monotonic() - started)
    return result


def measure_all(backends: list, sizes: Sizes, *, langgraph: bool, workers: bool = True,  # noqa: ANN001
                serve: bool = True, slack: bool = True, dbos: bool = True, db_size: bool = True,
                cli_speed: bool = True) -> Samples:
    """Every measurement, ``sizes.reps`` times on each backend (the database-size and CLI measurements once;
    the peers in the first ``sizes.peer_reps``). Returns the samples."""
    forks = pause_resume.ForkServer()  # item 4's worker processes, forked without importing again
    try:
        return _measure_all(backends, sizes, langgraph=langgraph, workers=workers, serve=serve, slack=slack,
                            dbos=dbos, db_size=db_size, cli_speed=cli_speed, forks=forks)
    finally:
        forks.close()


def _measure_all(backends: list, sizes: Sizes, *, langgraph: bool, workers: bool, serve: bool,  # noqa: ANN001
                 slack: bool, dbos: bool, db_size: bool, cli_speed: bool, forks: pause_resume.ForkServer) -> Samples:
    s = Samples()
    small, large = sizes.steps
    lg_missing = langgraph_side.available() if langgraph else "skipped (--no-langgraph)"
    saver_missing = langgraph_saver.available() if langgraph else "skipped (--no-langgraph)"
    dbos_missing = dbos_side.available() if dbos else "skipped (--no-dbos)"
    for rep in range(sizes.reps):
        log.info("repetition %d of %d", rep + 1, sizes.reps)
        peers = sizes.peer_reps is None or rep < sizes.peer_reps
        lg_now, saver_now, dbos_now = (peers and lg_missing is None, peers and saver_missing is None,
                                       peers and dbos_missing is None)
        for b in backends:
            name = b.name
            us = _measure(s, ["floor_us", "floor_cps"], name,
                          lambda: floor.floor_us_per_commit(b.fresh_url("floor", migrate=False), sizes.floor_rows))
            if us is not None:
                s.add("floor_us", name, us)
                s.add("floor_cps", name, 1e6 / us)
            for steps in (small, large):  # the floor in the regime of item 2's runs (a fresh file, as many commits)
                key = f"floor_run{steps}_us"
                us = _measure(s, [key], name, lambda: floor.floor_us_per_commit(
                    b.fresh_url(f"floor{steps}", migrate=False), steps, warm_up_rows=hazel_side.WARM_UP_STEPS))
                if us is not None:
                    s.add(key, name, us)
            for steps in (small, large):
                keep = steps == large
                _cost(s, "hz", name, steps, keep, lambda: hazel_side.checkpoint_cost(b, steps, measure_storage=keep))
                if lg_now:
                    _cost(s, "lg", name, steps, keep,
                          lambda: langgraph_side.checkpoint_cost(b, steps, measure_storage=keep))
                if saver_now:
                    _cost(s, "hzs", name, steps, keep,
                          lambda: langgraph_saver.checkpoint_cost(b, steps, measure_storage=keep))
                if dbos_now:
                    _cost(s, "dbos", name, steps, keep,
                          lambda: dbos_side.checkpoint_cost(b, steps, measure_storage=keep))
            _pause(s, "hz", name, lambda: pause_resume.in_process(b, sizes.pause_runs))
            if lg_now:
                _pause(s, "lg", name, lambda: langgraph_side.pause_resume(b, sizes.pause_runs))
            if dbos_now:
                _dbos_pause(s, name, b, sizes)
            _history(s, "hz", name, lambda: hazel_side.history_and_rewind(b, sizes.history_steps, sizes.rewind_to))
            if lg_now:
                _history(s, "lg", name,
                         lambda: langgraph_side.history_and_rewind(b, sizes.history_steps, sizes.rewind_to))
            if dbos_now:
                _history(s, "dbos", name, lambda: dbos_side.history_and_rewind(
                    b, sizes.history_steps, sizes.rewind_to, fork_queue_poll_sec=DBOS_POLL_SEC))
            if workers and name == "postgresql":
                for p in (1, 2):
                    _pause(s, f"w{p}", name, lambda: pause_resume.worker_processes(
                        b, sizes.worker_runs, processes=p, latency_runs=sizes.worker_latency_runs,
                        fork_server=forks))
            if slack:
                a = _measure(s, ["slack_p50_ms", "slack_p99_ms"], name,
                             lambda: slack_ack.slack_ack(b, sizes.slack_clicks))
                if isinstance(a, str):
                    s.note("slack_p50_ms", name, a)
                    s.note("slack_p99_ms", name, a)
                elif a is not None:
                    s.add("slack_p50_ms", name, a.p50_ms)
                    s.add("slack_p99_ms", name, a.p99_ms)
    if saver_missing is not None:
        for b in backends:
            for key in (f"hzs_step{small}_us", f"hzs_step{large}_us", f"hzs_growth{large}", "hzs_bytes_cp"):
                s.note(key, b.name, f"n/a ({saver_missing})")
    for missing, prefix in ((lg_missing, "lg"), (dbos_missing, "dbos")):
        if missing is None:
            continue
        for b in backends:
            for key in (f"{prefix}_step{small}_us", f"{prefix}_step{large}_us", f"{prefix}_growth{large}",
                        f"{prefix}_bytes_cp", f"{prefix}_pause_ps", f"{prefix}_resume_p50_ms",
                        f"{prefix}_resume_p99_ms", f"{prefix}_resumes_ps", f"{prefix}_history_ms",
                        f"{prefix}_rewind_ms", "dbos_waiting_threads" if prefix == "dbos" else "-"):
                s.note(key, b.name, f"n/a ({missing})")
    def serve_all() -> None:  # item 5 reads memory and threads, not times: it can share the CPUs
        if serve:
            for b in backends:
                _serve(s, b, sizes)

    if db_size:
        _db_size(s, backends, sizes, meanwhile=serve_all)  # item 10's databases built while item 5 runs
    else:
        serve_all()
    if cli_speed:
        timed = [b for b in backends if sizes.cli_postgres or b.name != "postgresql"]
        for i, b in enumerate(timed):
            _cli_speed(s, b, sizes, warm_up=i == 0)
        for b in backends:
            if b not in timed:
                for key, _, _ in CLI_COMMANDS:
                    s.note(f"cli_{key}_s", b.name, "n/a (quick run: SQLite only)")
    return s


DBOS_POLL_SEC = 0.01
"""DBOS wakes a waiting ``recv`` on SQLite and starts a fork by polling, every second by default; the bench
polls every 10 ms so that DBOS's figures measure its work rather than its default poll (its defaults and
what they cost: bench/README.md)."""


def _cost(s: Samples, prefix: str, backend: str, steps: int, keep: bool, fn: Callable[[], object]) -> None:
    c = _measure(s, [f"{prefix}_step{steps}_us", f"{prefix}_growth{steps}", f"{prefix}_bytes_cp"], backend, fn)
    if c is not None:
        s.add(f"{prefix}_step{steps}_us", backend, c.per_step_us)
        s.add(f"{prefix}_growth{steps}", backend, c.growth)
        if keep:
            s.add(f"{prefix}_bytes_cp", backend, c.bytes_per_checkpoint)


def _dbos_pause(s: Samples, backend: str, b, sizes: Sizes) -> None:  # noqa: ANN001
    keys = ["dbos_pause_ps", "dbos_resume_p50_ms", "dbos_resume_p99_ms", "dbos_resumes_ps", "dbos_waiting_threads"]
    r = _measure(s, keys, backend, lambda: dbos_side.pause_resume_threads(
        b, sizes.dbos_pause_runs, listener_poll_sec=DBOS_POLL_SEC if b.name == "sqlite" else None))
    if r is not None:
        result, threads = r
        for key, value in zip(keys, (result.pause_per_sec, result.resume_median_ms, result.resume_p99_ms,
                                     result.resumes_per_sec, threads)):
            s.add(key, backend, value)


def _db_size(s: Samples, backends: list, sizes: Sizes, *,  # noqa: ANN001
             meanwhile: Callable[[], None] = lambda: None) -> None:
    """Item 10, once per backend: big ÷ small for every operation (``bench.db_size``). Every backend's two
    databases are built at once, in a thread, while ``meanwhile`` runs here (what it measures must not be
    times), then measured one backend after the other."""
    keys = [f"db_{key}" for key, _ in DB_OPERATIONS]
    try:
        from bench import db_size
    except ImportError as exc:
        for b in backends:
            for key in keys:
                s.note(key, b.name, f"n/a ({exc})")
        meanwhile()
        return
    operations = [key for key, _ in DB_OPERATIONS if key in db_size.OPERATIONS]
    try:
        with ExitStack() as stack:
            built: list = []
            failed: list[Exception] = []

            def build() -> None:
                started = time.monotonic()
                try:
                    built.extend(stack.enter_context(db_size.built_all(
                        backends, small_runs=sizes.db_small_runs, big_runs=sizes.db_big_runs,
                        prune_runs=sizes.prune_runs, prune_reps=sizes.prune_reps)))
                except Exception as exc:  # reported below, once ``meanwhile`` is done
                    failed.append(exc)
                log.info("%-18s %-10s %6.2fs", "db_build", "all", time.monotonic() - started)

            builder = threading.Thread(target=build, name="bench-db-build")
            builder.start()
            try:
                meanwhile()
            finally:
                builder.join()
            if failed:
                raise failed[0]
            for b, result in zip(backends, built):
                if isinstance(result, Exception):
                    log.error("db_size build on %s failed: %r", b.name, result)
                    for key in keys:
                        s.note(key, b.name, f"error: {type(result).__name__}")
                    continue
                r = _measure(s, keys, b.name, lambda: db_size.measure(
                    *result, samples=sizes.db_samples, budget_sec=sizes.db_budget_sec, operations=operations))
                if r is not None:
                    for key, _ in DB_OPERATIONS:
                        if key in r:
                            s.add(f"db_{key}", b.name, r[key])
    except Exception as exc:  # creating or dropping the databases failed: the other items stand
        log.exception("db_size failed")
        for b in backends:
            for key in keys:
                s.notes.setdefault((key, b.name), f"error: {type(exc).__name__}")


def _cli_speed(s: Samples, b, sizes: Sizes, *, warm_up: bool) -> None:  # noqa: ANN001
    """Item 11, once per backend: each command's whole-process wall times (``bench.cli_speed``); ``warm_up``: one
    untimed run of each command first (the first backend only: the caches are warm after it)."""
    keys = [f"cli_{key}_s" for key, _, _ in CLI_COMMANDS]
    try:
        from bench import cli_speed
    except ImportError as exc:
        for key in keys:
            s.note(key, b.name, f"n/a ({exc})")
        return
    r = _measure(s, keys, b.name, lambda: cli_speed.cli_times(b, repeats=sizes.cli_repeats, warm_up=warm_up))
    if r is not None:
        for key, _, _ in CLI_COMMANDS:
            for value in r.get(key, []):
                s.add(f"cli_{key}_s", b.name, value)


def _pause(s: Samples, prefix: str, backend: str, fn: Callable[[], object]) -> None:
    keys = [f"{prefix}_pause_ps", f"{prefix}_resume_p50_ms", f"{prefix}_resume_p99_ms", f"{prefix}_resumes_ps"]
    r = _measure(s, keys, backend, fn)
    if r is not None:
        for key, value in zip(keys, (r.pause_per_sec, r.resume_median_ms, r.resume_p99_ms, r.resumes_per_sec)):
            s.add(key, backend, value)
        if r.cpu_ms:  # worker processes: who spent the CPU of a resume, and what the machine's cores allow
            for who, ms in r.cpu_ms.items():
                s.add(f"{prefix}_cpu_{who}_ms", backend, ms)
            s.add(f"{prefix}_cpu_ms", backend, sum(r.cpu_ms.values()))
            s.add(f"{prefix}_ceiling_ps", backend, CORES / (sum(r.cpu_ms.values()) / 1e3))


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
"""The cores this bench may use: with every process of item 4's worker rows on them, no number of worker
processes resumes more runs per second than ``CORES`` ÷ the CPU time of one resume."""


def _history(s: Samples, prefix: str, backend: str, fn: Callable[[], object]) -> None:
    r = _measure(s, [f"{prefix}_history_ms", f"{prefix}_rewind_ms"], backend, fn)
    if r is not None:
        s.add(f"{prefix}_history_ms", backend, r.history_ms)
        s.add(f"{prefix}_rewind_ms", backend, r.rewind_step_ms)


def _serve(s: Samples, b, sizes: Sizes) -> None:  # noqa: ANN001
    """``sizes.serve_processes`` (default ``sizes.reps``) ``hazel serve`` processes at once on the empty database,
    then as many with the waiting runs added; the differences are paired by process."""
    keys = ["serve_rss0_mb", "serve_rss10k_mb", "serve_rss_delta_mb", "serve_threads0", "serve_threads10k",
            "serve_threads_delta"]

    processes = sizes.serve_processes or sizes.reps

    def batch(url: str):  # noqa: ANN202
        with ThreadPoolExecutor(processes) as pool:
            return list(pool.map(lambda _: serve_memory.measure_serve(url, settle_sec=sizes.serve_settle_sec),
                                 range(processes)))

    def both():  # noqa: ANN202
        url = b.fresh_url("serve")
        empty = batch(url)
        serve_memory.add_waiting_runs(url, sizes.waiting_runs)
        return empty, batch(url)

    r = _measure(s, keys, b.name, both)
    if r is None:
        return
    for empty, full in zip(*r):
        s.add("serve_rss0_mb", b.name, empty.rss_mb)
        s.add("serve_rss10k_mb", b.name, full.rss_mb)
        s.add("serve_rss_delta_mb", b.name, full.rss_mb - empty.rss_mb)
        s.add("serve_threads0", b.name, empty.threads)
        s.add("serve_threads10k", b.name, full.threads)
        s.add("serve_threads_delta", b.name, full.threads - empty.threads)


def run(sizes: Sizes, *, label: str, langgraph: bool = True, workers: bool = True, serve: bool = True,
        slack: bool = True, postgres: bool = True, dbos: bool = True) -> Report:
    """Measure on SQLite and (when reachable) PostgreSQL; returns the report (``.markdown()`` to print)."""
    with ExitStack() as stack:
        backends = [stack.enter_context(databases.sqlite_backend())]
        pg_reason = databases.pg_unreachable_reason() if postgres else "skipped"
        pg = stack.enter_context(databases.postgres_backend()) if pg_reason is None else None
        if pg is not None:
            backends.append(pg)
        meta = machine_lines(pg.server_version if pg is not None else None)
        started = time.monotonic()
        samples = measure_all(backends, sizes, langgraph=langgraph, workers=workers, serve=serve, slack=slack,
                              dbos=dbos)
        if pg is None:
            for row in rows(sizes):
                for key in row.key.split("/"):
                    samples.note(key, "postgresql", f"n/a (PostgreSQL {pg_reason})")
        elapsed = time.monotonic() - started
    peers = ("" if sizes.peer_reps is None or sizes.peer_reps >= sizes.reps else
             f"; the peers (items 8, 9 and 12) in the first {sizes.peer_reps} only" if sizes.peer_reps > 1 else
             "; the peers (items 8, 9 and 12) in the first one only")
    meta.append(f"run: {label}, {sizes.reps} repetitions{peers}, {elapsed:.0f} s; cells: median (min..max); ratios "
                "are computed per repetition from values measured in the same repetition; items 10 and 11 once")
    if label == "quick" and elapsed > QUICK_BUDGET_SEC:
        meta.append(f"**this quick run took {elapsed:.0f} s, more than its {QUICK_BUDGET_SEC} s budget** (it is "
                    "meant for the 2-core machine with nothing else running: was something else running?)")
    title = "Hazel benchmarks" + (" (quick)" if label == "quick" else "")
    return Report(title=title, meta=meta, rows=rows(sizes), samples=samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help=f"fewer runs and repetitions (under {QUICK_BUDGET_SEC // 60} minutes on an idle machine)")
    parser.add_argument("--reps", type=int, help="repetitions (at least 3; default 5, quick 3)")
    parser.add_argument("--json", metavar="PATH", help="also write every sample to PATH")
    parser.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph side (item 8)")
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS side (item 9)")
    parser.add_argument("--all-peers", action="store_true",
                        help="measure the peers (items 8, 9, 12) in every repetition (--quick: the first only)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.reps is not None:
        if args.reps < 3:
            parser.error("--reps must be at least 3 (medians with a range)")
        sizes = Sizes(**{**asdict(sizes), "reps": args.reps, "steps": tuple(sizes.steps)})
    # (after the arguments are checked: a refused command line leaves the process's logging as it was; the
    # smoke test calls main() in its pytest process, whose 'hazel' logger a refused --reps had left at ERROR)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    for noisy in ("hazel", "uvicorn", "slack_bolt", "httpx", "httpx2", "alembic"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    if args.all_peers:
        sizes = Sizes(**{**asdict(sizes), "peer_reps": None, "steps": tuple(sizes.steps)})
    report = run(sizes, label="quick" if args.quick else "full", langgraph=not args.no_langgraph,
                 dbos=not args.no_dbos)
    print(report.markdown())
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": report.meta, "samples": {f"{k}|{b}": v for (k, b), v in report.samples.values.items()},
                       "notes": {f"{k}|{b}": v for (k, b), v in report.samples.notes.items()}}, fh, indent=1)
    return 0
