"""The bench machinery on a tiny workload, so that it cannot rot: every measurement runs on SQLite and
PostgreSQL and lands in the one table. No timing is asserted (bench code measures; it never judges speed here)."""

from __future__ import annotations

import time

import pytest

from bench import cli, databases, pause_resume, serve_memory
from bench.report import Report
from bench.stats import Summary, percentile
from bench.workload import linear_workflow, step_text

TINY = cli.Sizes(reps=1, floor_rows=10, steps=(5, 30), pause_runs=5, worker_runs=5, worker_latency_runs=3,
                 waiting_runs=20, history_steps=20, rewind_to=10, slack_clicks=3, dbos_pause_runs=3, db_small_runs=20,
                 db_big_runs=40, cli_repeats=1)
HAZEL_KEYS = ("floor_us", "floor_cps", "floor_run5_us", "floor_run30_us", "hz_step5_us", "hz_step30_us", "hz_growth30", "hz_bytes_cp", "hz_pause_ps",
              "hz_resume_p50_ms", "hz_resume_p99_ms", "hz_resumes_ps", "hz_history_ms", "hz_rewind_ms")


@pytest.fixture(scope="module")
def backends():  # noqa: ANN201
    with databases.sqlite_backend() as sqlite:
        if databases.pg_unreachable_reason() is not None:
            yield [sqlite]
            return
        with databases.postgres_backend() as pg:
            yield [sqlite, pg]


def test_workload_text_is_1_kb_and_differs_per_step() -> None:
    assert len(step_text(0).encode()) == 1024
    assert step_text(0) != step_text(1)
    assert len(linear_workflow(7).nodes) == 7


def test_every_measurement_lands_in_the_table(backends) -> None:  # noqa: ANN001
    samples = cli.measure_all(backends, TINY, langgraph=True, workers=False, serve=False, slack=True, dbos=False,
                              db_size=False, cli_speed=False)  # (their own smoke tests: tests/bench/test_*)
    for b in backends:
        for key in HAZEL_KEYS:
            values = samples.get(key, b.name)
            assert len(values) == TINY.reps, (key, b.name, samples.notes)
            assert all(v > 0 for v in values), (key, values)
        assert not [k for (k, _), note in samples.notes.items() if note.startswith("error")], samples.notes
    report = Report(title="t", meta=["m"], rows=cli.rows(TINY), samples=samples)
    table = report.markdown()
    assert table.count("\n| ") == len(cli.rows(TINY)) + 1  # header + one line per row
    assert "per step ÷ floor, 30 steps" in table
    assert "per step ÷ that floor, 30 steps (the same commits)" in table  # the floor in the runs' regime
    judged = {(row.key, backend) for row, backend, _ in report.judged}
    assert ("hz_step30_us/floor_us", "sqlite") in judged


def test_worker_processes_record_every_resume(backends) -> None:  # noqa: ANN001
    pg = [b for b in backends if b.name == "postgresql"]
    if not pg:
        pytest.skip("PostgreSQL unreachable")
    result = pause_resume.worker_processes(pg[0], 6, processes=2, threads=2)
    assert result.resumes_per_sec > 0 and result.resume_p99_ms >= result.resume_median_ms
    # the CPU of the resumes/s phase, by who spent it (PostgreSQL's only when its server runs on this machine)
    assert result.cpu_ms is not None and result.cpu_ms["workers"] > 0 and result.cpu_ms["bench"] >= 0
    assert set(result.cpu_ms) <= {"workers", "postgresql", "bench"}


def test_cpu_seconds_by_pid_counts_a_busy_child() -> None:
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                              "while time.process_time() < end: pass\nimport sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        before = pause_resume.cpu_seconds([child.pid])["workers"][child.pid]
        deadline = time.monotonic() + 10
        while pause_resume.cpu_seconds([child.pid])["workers"][child.pid] - before < 0.2:
            assert time.monotonic() < deadline, "the busy child's CPU time never showed"
            time.sleep(0.05)
    finally:
        child.communicate(b"")


def test_serve_footprint_with_waiting_runs(backends) -> None:  # noqa: ANN001
    pytest.importorskip("psutil")
    url = backends[0].fresh_url("serve")
    serve_memory.add_waiting_runs(url, 20)
    footprint = serve_memory.measure_serve(url, settle_sec=0.1)
    assert footprint.rss_mb > 0 and footprint.threads >= 2


def test_summary_and_percentile() -> None:
    assert Summary.of([3.0, 1.0, 2.0]).format(0) == "2 (1..3)"
    assert percentile(list(range(1, 1001)), 99) == 990
    with pytest.raises(ValueError):
        percentile([], 50)


def test_cli_refuses_fewer_than_three_repetitions() -> None:
    """Refused before it configures logging: the 'hazel' logger keeps its level (this call had left it at ERROR
    for the rest of the pytest process, and later tests' INFO lines, Slack's, the CLI's, were never captured)."""
    import logging

    level = logging.getLogger("hazel").level
    with pytest.raises(SystemExit):
        cli.main(["--reps", "2"])
    assert logging.getLogger("hazel").level == level


@pytest.mark.parametrize("head_cache", [True, False], ids=["held", "read"])
def test_the_resume_profile_says_where_the_paused_checkpoint_came_from(backends, head_cache: bool) -> None:  # noqa: ANN001
    from bench import profile_resume

    for b in backends:
        report = profile_resume.profile(b, 3, top=3, head_cache=head_cache)
        first = report.splitlines()[0]
        assert first.startswith(f"{b.name}: 3 resumes") and " 2.0 transactions" in first, first
        assert first.endswith(f"paused checkpoints read from memory: {'100%' if head_cache else '0%'}"), first
