"""Defects a fresh user found in the CLI: a command delivers only its own runs' notifications, a step's error
never controls the terminal, usage errors exit 2, ``--reason @file`` reads the file everywhere."""

from __future__ import annotations

import json

import pytest

from store import Store
from store.models import OutboxStatus


def _outbox(db_url: str, run_id: str) -> dict[int, tuple[str, int]]:
    store = Store(db_url)
    try:
        with store.transaction() as tx:
            return {m.id: (OutboxStatus(m.status).value, m.attempts) for m in tx.outbox.list(run_id=run_id)}
    finally:
        store.dispose()


def test_a_command_delivers_only_the_notifications_of_its_own_runs(cli, db_url: str,  # noqa: ANN001
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_HOOK_URLS", "http://127.0.0.1:9/x")
    monkeypatch.setenv("HAZEL_HOOK_SECRET", "s3cret-value")
    other = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    cli("approve", other, "--at", "review", "--detach")  # a hook row due now, left for a worker
    monkeypatch.delenv("HAZEL_HOOK_URLS")
    monkeypatch.delenv("HAZEL_HOOK_SECRET")
    before = _outbox(db_url, other)
    assert ("pending", 0) in before.values(), before
    mine = json.loads(cli("run", "doc-review", "--input", '{"topic": "u"}', "--json").stdout)["run"]["id"]
    cli("cancel", mine)
    assert _outbox(db_url, other) == before  # not attempted by commands about another run
    assert {status for status, _ in _outbox(db_url, mine).values()} == {"sent"}
