"""Delivery starts when the engine commits outbox rows, not at the deliverer's next sweep: a steering request
reaches its channel right after its run pauses, and the decision's update right after the decision (in
``hazel serve`` and ``hazel worker`` the deliverer runs in a thread woken by ``Hazel.on_outbox``)."""

from __future__ import annotations

import time

from bot.ops.worker import WorkerPool
from store.models import RunStatus
from tests.support.engine import make_hazel, person
from tests.workflows.reviewed import reviewed

SWEEP_SEC = 600.0
"""Far longer than the test waits: what is delivered was delivered because a commit woke the deliverer."""


def _printed_within(hazel, text: str, timeout_sec: float = 20.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        if text in hazel.console_buffer.getvalue():
            return True
        time.sleep(0.01)
    return False


def test_a_pause_and_a_decision_wake_the_deliverer(db_url: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    pool = WorkerPool(hazel, threads=1, sweep_sec=0.05)  # the run executes in a worker thread, as in serve
    hazel.deliverer.start(sweep_sec=SWEEP_SEC)
    pool.start()
    try:
        time.sleep(0.2)  # the deliverer's first pass (at start) is over: from now on only a wake-up delivers
        run = hazel.start(workflow="reviewed", input={}, actor=person("author"))
        assert _printed_within(hazel, f"run {run.id}"), "the steering request waited for the deliverer's sweep"
        hazel.decide(run_id=run.id, action="approve", actor=person("olga"))
        assert _printed_within(hazel, "approved by olga"), "the decision's update waited for the sweep"
        assert _printed_within(hazel, f"run {run.id} completed"), "the completion waited for the sweep"
    finally:
        pool.stop()
        hazel.deliverer.stop()
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    assert hazel.outbox_backlog().get("pending", 0) == 0
