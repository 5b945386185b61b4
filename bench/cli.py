"""``python -m bench [--quick] [--reps N] [--json PATH] [--no-langgraph]``: run every measurement on SQLite and
PostgreSQL, print one table (markdown) of medians with min..max over the repetitions."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from typing import Callable

from bench import databases, floor, hazel_side, langgraph_side, pause_resume, serve_memory, slack_ack
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
    waiting_runs: int = 10_000
    history_steps: int = 200
    rewind_to: int = 100
    slack_clicks: int = 200
    serve_settle_sec: float = 1.0


FULL = Sizes()
QUICK = Sizes(reps=3, floor_rows=300, pause_runs=100, worker_runs=40, slack_clicks=20, serve_settle_sec=0.3)


def rows(sizes: Sizes) -> list[Row]:
    small, large = sizes.steps
    n, w, h = sizes.pause_runs, sizes.worker_runs, sizes.history_steps
    k = f"{sizes.waiting_runs:,}"
    return [
        Row("1", "floor: INSERT+COMMIT of one 1 KB row, µs", "floor_us"),
        Row("1", "floor: commits/s", "floor_cps"),
        Row("2", f"Hazel checkpoint per step, {small} steps, µs", f"hz_step{small}_us"),
        Row("2", f"Hazel checkpoint per step, {large} steps, µs", f"hz_step{large}_us"),
        Row("2", f"per step ÷ floor, {small} steps", f"hz_step{small}_us/floor_us", 2, Goal("<=", 2.0, "≤ 2")),
        Row("2", f"per step ÷ floor, {large} steps", f"hz_step{large}_us/floor_us", 2, Goal("<=", 2.0, "≤ 2")),
        Row("2", f"growth: last 20 ÷ first 20 steps ({large} steps)", f"hz_growth{large}", 2, Goal("<=", 1.1, "≤ 1.1")),
        Row("3", f"bytes on disk per checkpoint after {large} steps", "hz_bytes_cp", 0, Goal("<=", 1536, "≤ 1,536")),
        Row("4", f"pause: runs to their steering point per s (in-process, {n} runs)", "hz_pause_ps"),
        Row("4", "resume latency median, ms (in-process)", "hz_resume_p50_ms", 2,
            Goal("<=", 2.0, "< 2 (SQLite)", SQLITE_ONLY)),
        Row("4", "resume latency p99, ms (in-process)", "hz_resume_p99_ms", 2),
        Row("4", "resumes/s (in-process)", "hz_resumes_ps", 0, Goal(">=", 1000, "≥ 1,000 (SQLite)", SQLITE_ONLY)),
        *[r for p in (1, 2) for r in (
            Row("4", f"pause runs/s, {p} worker process{'es' if p > 1 else ''} ({w} runs)", f"w{p}_pause_ps",
                backends=PG_ONLY),
            Row("4", f"resume latency median, ms, {p} worker process{'es' if p > 1 else ''}",
                f"w{p}_resume_p50_ms", 2, backends=PG_ONLY),
            Row("4", f"resume latency p99, ms, {p} worker process{'es' if p > 1 else ''}", f"w{p}_resume_p99_ms", 2,
                backends=PG_ONLY),
            Row("4", f"resumes/s, {p} worker process{'es' if p > 1 else ''}", f"w{p}_resumes_ps", backends=PG_ONLY),
        )],
        Row("5", "hazel serve RSS, 0 waiting runs, MiB", "serve_rss0_mb", 1),
        Row("5", f"hazel serve RSS, {k} waiting runs, MiB", "serve_rss10k_mb", 1),
        Row("5", f"RSS difference ({k} − 0), MiB", "serve_rss_delta_mb", 1, Goal("<=", 20, "< 20")),
        Row("5", "threads, 0 waiting runs", "serve_threads0"),
        Row("5", f"threads, {k} waiting runs", "serve_threads10k"),
        Row("5", f"thread difference ({k} − 0)", "serve_threads_delta", 0, Goal("<=", 1, "no thread per run")),
        Row("6", f"history of a {h}-step run, ms", "hz_history_ms", 2, Goal("<=", 10, "< 10")),
        Row("6", f"rewind to #{sizes.rewind_to} + one step, ms", "hz_rewind_ms", 2, Goal("<=", 5, "< 5")),
        Row("7", f"Slack click → 200, p50, ms ({sizes.slack_clicks} clicks)", "slack_p50_ms", 2),
        Row("7", "Slack click → 200, p99, ms", "slack_p99_ms", 2, Goal("<=", 100, "< 100")),
        Row("8", f"LangGraph per step, {small} steps, µs", f"lg_step{small}_us"),
        Row("8", f"LangGraph per step, {large} steps, µs", f"lg_step{large}_us"),
        Row("8", f"LangGraph growth, last 20 ÷ first 20 ({large} steps)", f"lg_growth{large}", 2),
        Row("8", f"Hazel ÷ LangGraph per step, {small} steps", f"hz_step{small}_us/lg_step{small}_us", 3),
        Row("8", f"Hazel ÷ LangGraph per step, {large} steps", f"hz_step{large}_us/lg_step{large}_us", 3,
            Goal("<=", 1 / 3, "≤ 0.333 (3x faster)")),
        Row("8", f"LangGraph bytes on disk per checkpoint after {large} steps", "lg_bytes_cp"),
        Row("8", "Hazel ÷ LangGraph bytes per checkpoint", "hz_bytes_cp/lg_bytes_cp", 4,
            Goal("<=", 0.05, "≤ 0.05 (20x smaller)")),
        Row("8", f"LangGraph pause runs/s ({n} runs)", "lg_pause_ps"),
        Row("8", "LangGraph resume latency median, ms", "lg_resume_p50_ms", 2),
        Row("8", "LangGraph resume latency p99, ms", "lg_resume_p99_ms", 2),
        Row("8", "LangGraph resumes/s", "lg_resumes_ps"),
        Row("8", "Hazel ÷ LangGraph resume latency median", "hz_resume_p50_ms/lg_resume_p50_ms", 3),
        Row("8", "Hazel ÷ LangGraph resumes/s", "hz_resumes_ps/lg_resumes_ps", 2),
        Row("8", f"LangGraph history of a {h}-step run, ms", "lg_history_ms", 2),
        Row("8", f"LangGraph rewind to #{sizes.rewind_to} + one step, ms", "lg_rewind_ms", 2),
        Row("8", "Hazel ÷ LangGraph history", "hz_history_ms/lg_history_ms", 4),
        Row("8", "Hazel ÷ LangGraph rewind + one step", "hz_rewind_ms/lg_rewind_ms", 3),
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
                serve: bool = True, slack: bool = True) -> Samples:
    """Every measurement, ``sizes.reps`` times on each backend. Returns the samples."""
    s = Samples()
    small, large = sizes.steps
    lg_missing = langgraph_side.available() if langgraph else "skipped (--no-langgraph)"
    for rep in range(sizes.reps):
        log.info("repetition %d of %d", rep + 1, sizes.reps)
        for b in backends:
            name = b.name
            us = _measure(s, ["floor_us", "floor_cps"], name,
                          lambda: floor.floor_us_per_commit(b.fresh_url("floor", migrate=False), sizes.floor_rows))
            if us is not None:
                s.add("floor_us", name, us)
                s.add("floor_cps", name, 1e6 / us)
            for steps in (small, large):
                keep = steps == large
                c = _measure(s, [f"hz_step{steps}_us", f"hz_growth{steps}", "hz_bytes_cp"], name,
                             lambda: hazel_side.checkpoint_cost(b, steps, measure_storage=keep))
                if c is not None:
                    s.add(f"hz_step{steps}_us", name, c.per_step_us)
                    s.add(f"hz_growth{steps}", name, c.growth)
                    if keep:
                        s.add("hz_bytes_cp", name, c.bytes_per_checkpoint)
                if lg_missing is None:
                    c = _measure(s, [f"lg_step{steps}_us", f"lg_growth{steps}", "lg_bytes_cp"], name,
                                 lambda: langgraph_side.checkpoint_cost(b, steps, measure_storage=keep))
                    if c is not None:
                        s.add(f"lg_step{steps}_us", name, c.per_step_us)
                        s.add(f"lg_growth{steps}", name, c.growth)
                        if keep:
                            s.add("lg_bytes_cp", name, c.bytes_per_checkpoint)
            _pause(s, "hz", name, lambda: pause_resume.in_process(b, sizes.pause_runs))
            if lg_missing is None:
                _pause(s, "lg", name, lambda: langgraph_side.pause_resume(b, sizes.pause_runs))
            _history(s, "hz", name, lambda: hazel_side.history_and_rewind(b, sizes.history_steps, sizes.rewind_to))
            if lg_missing is None:
                _history(s, "lg", name,
                         lambda: langgraph_side.history_and_rewind(b, sizes.history_steps, sizes.rewind_to))
            if workers and name == "postgresql":
                for p in (1, 2):
                    _pause(s, f"w{p}", name, lambda: pause_resume.worker_processes(b, sizes.worker_runs, processes=p))
            if slack:
                a = _measure(s, ["slack_p50_ms", "slack_p99_ms"], name,
                             lambda: slack_ack.slack_ack(b, sizes.slack_clicks))
                if isinstance(a, str):
                    s.note("slack_p50_ms", name, a)
                    s.note("slack_p99_ms", name, a)
                elif a is not None:
                    s.add("slack_p50_ms", name, a.p50_ms)
                    s.add("slack_p99_ms", name, a.p99_ms)
        if lg_missing is not None:
            for b in backends:
                for key in ("lg_step50_us", "lg_step500_us", "lg_bytes_cp", "lg_pause_ps", "lg_resume_p50_ms",
                            "lg_history_ms", "lg_rewind_ms", f"lg_step{small}_us", f"lg_step{large}_us",
                            f"lg_growth{large}", "lg_resume_p99_ms", "lg_resumes_ps"):
                    s.note(key, b.name, f"n/a ({lg_missing})")
    if serve:
        for b in backends:
            _serve(s, b, sizes)
    return s


def _pause(s: Samples, prefix: str, backend: str, fn: Callable[[], object]) -> None:
    keys = [f"{prefix}_pause_ps", f"{prefix}_resume_p50_ms", f"{prefix}_resume_p99_ms", f"{prefix}_resumes_ps"]
    r = _measure(s, keys, backend, fn)
    if r is not None:
        for key, value in zip(keys, (r.pause_per_sec, r.resume_median_ms, r.resume_p99_ms, r.resumes_per_sec)):
            s.add(key, backend, value)


def _history(s: Samples, prefix: str, backend: str, fn: Callable[[], object]) -> None:
    r = _measure(s, [f"{prefix}_history_ms", f"{prefix}_rewind_ms"], backend, fn)
    if r is not None:
        s.add(f"{prefix}_history_ms", backend, r.history_ms)
        s.add(f"{prefix}_rewind_ms", backend, r.rewind_step_ms)


def _serve(s: Samples, b, sizes: Sizes) -> None:  # noqa: ANN001
    """``sizes.reps`` ``hazel serve`` processes at once on the empty database, then as many with the waiting
    runs added; the differences are paired by repetition."""
    keys = ["serve_rss0_mb", "serve_rss10k_mb", "serve_rss_delta_mb", "serve_threads0", "serve_threads10k",
            "serve_threads_delta"]

    def batch(url: str):  # noqa: ANN202
        with ThreadPoolExecutor(sizes.reps) as pool:
            return list(pool.map(lambda _: serve_memory.measure_serve(url, settle_sec=sizes.serve_settle_sec),
                                 range(sizes.reps)))

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
        slack: bool = True, postgres: bool = True) -> Report:
    """Measure on SQLite and (when reachable) PostgreSQL; returns the report (``.markdown()`` to print)."""
    with ExitStack() as stack:
        backends = [stack.enter_context(databases.sqlite_backend())]
        pg_reason = databases.pg_unreachable_reason() if postgres else "skipped"
        pg = stack.enter_context(databases.postgres_backend()) if pg_reason is None else None
        if pg is not None:
            backends.append(pg)
        meta = machine_lines(pg.server_version if pg is not None else None)
        started = time.monotonic()
        samples = measure_all(backends, sizes, langgraph=langgraph, workers=workers, serve=serve, slack=slack)
        if pg is None:
            for row in rows(sizes):
                for key in row.key.split("/"):
                    samples.note(key, "postgresql", f"n/a (PostgreSQL {pg_reason})")
        elapsed = time.monotonic() - started
    meta.append(f"run: {label}, {sizes.reps} repetitions, {elapsed:.0f} s; cells: median (min..max); ratios are "
                "computed per repetition from values measured in the same repetition")
    title = "Hazel benchmarks" + (" (quick)" if label == "quick" else "")
    return Report(title=title, meta=meta, rows=rows(sizes), samples=samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs and repetitions (under 2 minutes)")
    parser.add_argument("--reps", type=int, help="repetitions (at least 3; default 5, quick 3)")
    parser.add_argument("--json", metavar="PATH", help="also write every sample to PATH")
    parser.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph side (item 8)")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    for noisy in ("hazel", "uvicorn", "slack_bolt"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    sizes = QUICK if args.quick else FULL
    if args.reps is not None:
        if args.reps < 3:
            parser.error("--reps must be at least 3 (medians with a range)")
        sizes = Sizes(**{**asdict(sizes), "reps": args.reps, "steps": tuple(sizes.steps)})
    report = run(sizes, label="quick" if args.quick else "full", langgraph=not args.no_langgraph)
    print(report.markdown())
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": report.meta, "samples": {f"{k}|{b}": v for (k, b), v in report.samples.values.items()},
                       "notes": {f"{k}|{b}": v for (k, b), v in report.samples.notes.items()}}, fh, indent=1)
    return 0
