"""What delivering a message costs the database on PostgreSQL: the transaction that claims it and the one that
marks it sent (and records what it leaves to do for its request) send their COMMIT with their statements
(``store.Tx.pipeline(commit=True)``), not as a round trip of its own; what it is rendered from is read in two."""

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

    def counted(self):  # noqa: ANN001, ANN202 (a delivery's claims and its ends: not the read for its send)
        names = [f.name for f in traceback.extract_stack()]
        if "deliver_due" in names and "_send" not in names:
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


def test_a_messages_view_reads_its_rows_together(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL what a channel is given to render a decision's update (``Hazel.outbox_view``) reads the
    request, its run, its decisions and the run's newest checkpoints in one pipeline, then the state it asked
    about: one statement waits for its answer on its own (each did before); a run's progress reads nothing on
    its own. The views are the same as read one by one."""
    hazel = make_hazel(db_url, reviewed())
    if hazel.store.dialect != "postgresql":
        pytest.skip("PostgreSQL's round trips")
    import psycopg

    from store.models import OutboxKind

    run = hazel.start(workflow="reviewed", input={}, actor=person("author"), claim=True)
    assert hazel.drive(run_id=run.id).status is RunStatus.WAITING
    hazel.decide(run_id=run.id, action="approve", actor=person("olga"))
    messages = {m.kind: m for m in hazel.outbox_messages(run_id=run.id)}
    closed, progress = messages[OutboxKind.REQUEST_CLOSED.value], messages[OutboxKind.RUN_PROGRESS.value]
    alone: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(self, query, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if self.connection._pipeline is None and not str(query).startswith(("BEGIN", "COMMIT", "ROLLBACK", ";")):
            alone.append(str(query)[:60])
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    view = hazel.outbox_view(message=closed)
    assert len(alone) == 1 and "chain" in alone[0].lower(), alone  # the state asked about
    alone.clear()
    shown = hazel.outbox_view(message=progress)
    assert alone == []
    monkeypatch.undo()
    one_by_one = hazel.request_view(request_id=closed.request_id)
    assert view.request == one_by_one.request and view.run == one_by_one.run
    assert view.decisions == one_by_one.decisions and [d.action.value for d in view.decisions] == ["approve"]
    assert view.checkpoints == one_by_one.checkpoints and view.shown_value == one_by_one.shown_value
    assert shown.run.id == run.id and shown.request is not None and shown.request.id == closed.request_id
