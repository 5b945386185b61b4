"""``HazelSaver`` and ``AsyncHazelSaver`` against LangGraph's own conformance suite (``langgraph-checkpoint-conformance``:
``validate()``), on SQLite and PostgreSQL: every base capability and every extended one (delete_for_runs,
copy_thread, prune) must be detected and pass."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("langgraph.checkpoint.conformance", reason="pip install -e '.[test]' (the langgraph extra)")

from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES  # noqa: E402

from hazel.langgraph import AsyncHazelSaver, HazelSaver  # noqa: E402


def run_async(coro):  # noqa: ANN001, ANN201
    """``asyncio.run(coro)`` in a thread of its own: another test of the session may have left an event loop
    running in this one (Playwright's sync API does), and ``asyncio.run`` refuses to start inside it."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _assert_full(report) -> None:  # noqa: ANN001
    failures = {name: r.failures for name, r in report.results.items() if r.passed is not True}
    assert not failures, failures
    assert {c.value for c in ALL_CAPABILITIES} == {n for n, r in report.results.items() if r.detected}
    assert report.conformance_level() == "FULL"


FAST = {"sqlite_synchronous": "OFF"}
"""The suite checks behaviour, not durability: SQLite need not wait for the disk (PostgreSQL ignores it)."""


def test_sync_saver_passes_every_capability(db_url: str) -> None:
    @checkpointer_test(name="HazelSaver")
    async def saver():  # noqa: ANN202
        with HazelSaver.from_conn_string(db_url, **FAST) as s:
            yield s

    _assert_full(run_async(validate(saver)))


def test_async_saver_passes_every_capability(db_url: str) -> None:
    @checkpointer_test(name="AsyncHazelSaver")
    async def saver():  # noqa: ANN202
        async with AsyncHazelSaver.from_conn_string(db_url, **FAST) as s:
            yield s

    _assert_full(run_async(validate(saver)))
