"""What a delivered message costs the database after it is sent: on PostgreSQL, the transaction that marks it
sent (and records what it leaves to do for its request) sends its COMMIT with its statements
(``store.Tx.pipeline(commit=True)``), not as a round trip of its own."""

from __future__ import annotations

import traceback

import pytest

from store.models import RunStatus
from tests.support.engine import make_hazel, person
from tests.workflows.reviewed import reviewed


def test_marking_a_message_sent_commits_with_its_statements(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hazel = make_hazel(db_url, reviewed())
    if hazel.store.dialect != "postgresql":
        pytest.skip("PostgreSQL's round trips")
    import psycopg

    commits: list[str] = []
    delivered: list[str] = []
    commit = psycopg.Connection.commit

    def counted(self):  # noqa: ANN001, ANN202 (only the transactions a delivery ends with: after its send)
        names = [f.name for f in traceback.extract_stack()]
        if "_deliver" in names and "_send" not in names:
            commits.append(traceback.format_stack(limit=8)[0])
        return commit(self)

    def sent(self, message_id, *, now):  # noqa: ANN001, ANN202
        delivered.append(message_id)
        return mark_sent(self, message_id, now=now)

    from store.outbox import OutboxRepo

    mark_sent = OutboxRepo.mark_sent
    monkeypatch.setattr(psycopg.Connection, "commit", counted)
    monkeypatch.setattr(OutboxRepo, "mark_sent", sent)
    run = hazel.start(workflow="reviewed", input={}, actor=person("author"), claim=True)
    assert hazel.drive(run_id=run.id).status is RunStatus.WAITING
    hazel.deliverer.deliver_due()  # the steering request: its message_ref recorded, marked sent
    assert f"run {run.id}" in hazel.console_buffer.getvalue()
    hazel.decide(run_id=run.id, action="approve", actor=person("olga"))
    hazel.deliverer.deliver_due()  # the decision's update: its request read for copies, marked sent
    assert "approved by olga" in hazel.console_buffer.getvalue()
    assert len(delivered) >= 2 and commits == []
    assert hazel.outbox_backlog().get("pending", 0) == 0
