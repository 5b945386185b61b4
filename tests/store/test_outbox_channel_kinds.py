"""The outbox matches a kind of channel (``slack`` → ``slack:#x``, ``slack:C…``) with a LIKE pattern written
into the SQL, its ``%``, ``_``, ``/`` and quotes taken literally: SQLite prepared a statement again at every
execution while the pattern was a parameter (a resume's progress message cost 110 µs instead of 16)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from store import Store, fast
from store.models import OutboxKind
from store.outbox import _claim_due_pg, _with_latest_on

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)


def _run_with_requests(store: Store, run_id: str, channels: list[str]) -> None:
    with store.transaction() as tx:
        tx.runs.insert(run_id=run_id, workflow="wf", workflow_version=1, started_by="me", started_via="console",
                       now=NOW)
        for channel in channels:
            tx.requests.insert(run_id=run_id, checkpoint_seq=0, point="review", title="Review", channel=channel,
                               approvals_required=1, now=NOW, due_at=None)


def test_a_message_follows_the_newest_request_of_its_kind_only(store: Store) -> None:
    _run_with_requests(store, "r1", ["s_ack:C3", "slack:C1", "slackers:C2"])
    _run_with_requests(store, "r2", ["slack:C9"])
    with store.transaction() as tx:
        tx.outbox.add(channel="console", kind=OutboxKind.RUN_PROGRESS, now=NOW, run_id="r1",
                      payload={"event": "completed"}, and_latest_on=("slack", "s_ack", "o'k"))
    with store.transaction() as tx:
        sent = tx.outbox.claim_due(now=NOW, lease_sec=60, limit=50)
    # "s_ack" is the kind named, not "s" + any character + "ack"; "slack" is not "slackers"; "o'k" has none
    assert sorted((m.channel, m.request_id) for m in sent) == [("console", None), ("s_ack:C3", 1),
                                                                ("slack:C1", 2)]


def test_a_process_claims_only_the_kinds_of_channel_it_has(store: Store) -> None:
    with store.transaction() as tx:
        for channel in ("my_chat:#a", "myXchat:#b", "my_chat", "o'k:#c", "slack:#d", "jira:MIG"):
            tx.outbox.add(channel=channel, kind=OutboxKind.REQUEST_OPENED, now=NOW, run_id=f"run-{channel}")
    with store.transaction() as tx:
        claimed = tx.outbox.claim_due(now=NOW, lease_sec=60, channels=["my_chat", "o'k"])
        elsewhere = tx.outbox.due_elsewhere(now=NOW, channels=["my_chat", "o'k"])
    assert sorted(m.channel for m in claimed) == ["my_chat", "my_chat:#a", "o'k:#c"]
    assert sorted(m.channel for m in elsewhere) == ["jira:MIG", "myXchat:#b", "slack:#d"]


def test_no_like_pattern_is_a_parameter(store: Store) -> None:
    """The statements built once and executed through ``store.fast`` (a resume's progress message, PostgreSQL's
    claim) write their patterns into the SQL: no ``LIKE`` is followed by a parameter."""
    with store.engine.connect() as conn:
        statements = [_with_latest_on(("slack", "jira"))]
        if conn.dialect.name == "postgresql":  # (SQLite's claim is two statements built per call)
            statements.append(_claim_due_pg(False, ("console", "slack"), (), 20))
        for stmt in statements:
            sql = fast.compiled(stmt, conn).sql
            assert "LIKE '" in sql, sql
            assert not re.search(r"LIKE\s*(\(\s*)?[:?$%]", sql), sql
