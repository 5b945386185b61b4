"""The DBOS side of the bench on a tiny workload (SQLite, and PostgreSQL when reachable), so that it cannot rot.
No timing is asserted; the short polling intervals only keep the test fast (DBOS's defaults poll every second)."""

from __future__ import annotations

import pytest

pytest.importorskip("dbos", reason="the test extra installs dbos: pip install -e .[test]")

from bench import dbos_side  # noqa: E402

FAST = 0.01
"""Seconds between DBOS's listener and fork-queue polls in these tests."""




def test_available() -> None:
    assert dbos_side.available() is None


def test_checkpoint_cost(backend) -> None:  # noqa: ANN001
    import dbos._dbos as dbos_module

    cost = dbos_side.checkpoint_cost(backend, 5, measure_storage=True)
    assert cost.per_step_us > 0 and cost.first20_us > 0 and cost.last20_us > 0
    assert cost.bytes_per_checkpoint is not None and cost.bytes_per_checkpoint > 0
    assert dbos_module._dbos_global_instance is None  # destroyed, so that the next measurement can launch its own


def test_pause_resume_and_waiting_threads(backend) -> None:  # noqa: ANN001
    result, threads = dbos_side.pause_resume_threads(backend, 3, listener_poll_sec=FAST)
    assert result.pause_per_sec > 0 and result.resumes_per_sec > 0
    assert 0 < result.resume_median_ms <= result.resume_p99_ms
    assert threads >= 2  # a thread per run blocked in recv (DBOS may reuse one it already had idle)


def test_history_and_rewind(backend) -> None:  # noqa: ANN001
    cost = dbos_side.history_and_rewind(backend, 10, 5, fork_queue_poll_sec=FAST)  # asserts 10 steps listed
    assert cost.history_ms > 0 and cost.rewind_step_ms > 0

