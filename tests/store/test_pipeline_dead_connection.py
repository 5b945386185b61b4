"""A transaction's first statement on PostgreSQL goes in a pipeline with its ``BEGIN`` (``store.fast``). When the
connection died meanwhile (its backend terminated), the statement's ``OperationalError`` is the one error: psycopg
logged the pipeline's own failure to end as well, ``error ignored terminating <Pipeline [BAD]>: …`` (a WARNING on
the logs of ``hazel serve`` and on a command's stderr, from the logger ``psycopg``)."""

from __future__ import annotations

import logging
import select
import time

import psycopg
import pytest
from psycopg.pq import ConnStatus
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from bot.engine import is_transient
from store import Store, db
from store.txconn import TxConnection


def _kill(pg_url: str, driver) -> None:  # noqa: ANN001
    """Terminate ``driver``'s backend from another connection and wait until its connection knows (``BAD``, as
    when a read of another thread or an earlier statement met the end: the next statement fails at once)."""
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    pid = driver.info.backend_pid
    deadline = time.monotonic() + 10
    try:
        with admin.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
            while conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
                               ).scalar_one():  # (gone: its socket closed)
                assert time.monotonic() < deadline, "the backend did not end"
                time.sleep(0.01)
    finally:
        admin.dispose()
    while driver.pgconn.status != ConnStatus.BAD:  # the server's goodbye read, and the end of the socket
        assert time.monotonic() < deadline, "the terminated backend's connection never heard of it"
        select.select([driver.fileno()], [], [], 0.05)
        try:
            driver.pgconn.consume_input()
        except psycopg.OperationalError:  # (the end of the socket)
            pass


@pytest.fixture
def pg_store(pg_url: str, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.setattr(db, "PING_IDLE_SEC", 60.0)  # (the connection is lent as it is)
    store = Store(pg_url, pool_size=1)
    yield store
    store.dispose()


@pytest.mark.parametrize("pipelined", [False, True], ids=["first-statement", "tx-pipeline"])
def test_a_statement_on_a_connection_killed_inside_its_transaction_is_one_error(
        pg_store: Store, pg_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        pipelined: bool) -> None:
    """The backend ends as the transaction's ``BEGIN`` is about to be queued in the pipeline."""
    send_begin = TxConnection.send_begin

    def killing_send_begin(self, driver) -> None:  # noqa: ANN001
        _kill(pg_url, driver)
        send_begin(self, driver)

    monkeypatch.setattr(TxConnection, "send_begin", killing_send_begin)
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(OperationalError) as caught:
            with pg_store.transaction() as tx:
                if pipelined:
                    with tx.pipeline():
                        tx.runs.get("r1")
                else:
                    tx.runs.get("r1")
    assert caught.value.connection_invalidated and is_transient(caught.value)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []
    monkeypatch.undo()
    with pg_store.read() as tx:  # a new connection
        assert tx.conn.execute(text("SELECT 1")).scalar_one() == 1


def test_a_langgraph_write_on_a_killed_connection_is_one_error(pg_store: Store, pg_url: str,
                                                               caplog: pytest.LogCaptureFixture,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The LangGraph saver's writes that need not wait for the disk: ``BEGIN; SET LOCAL …; INSERT; COMMIT`` in one
    pipeline (``store.lgraph_writer``), on a connection whose backend ended as the pipeline began."""
    from contextlib import contextmanager

    from sqlalchemy.exc import DBAPIError

    from store.lgraph_writer import LangGraphWriter

    pipeline = psycopg.Connection.pipeline

    @contextmanager
    def killed_pipeline(self):  # noqa: ANN001, ANN202 (the backend ends as the pipeline begins)
        with pipeline(self) as p:
            _kill(pg_url, self)
            yield p

    monkeypatch.setattr(psycopg.Connection, "pipeline", killed_pipeline)
    writer = LangGraphWriter(pg_store.engine)
    row = {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1", "task_id": "k", "idx": 0,
           "channel": "ch", "type": "bytes", "blob": b"x", "task_path": ""}
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(DBAPIError) as caught:
            writer.insert_writes([row], upsert=False, durable=False)
    assert is_transient(caught.value)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []
    monkeypatch.undo()
    assert writer.insert_writes([row], upsert=False, durable=False) == 1  # on a new connection


def test_a_statement_on_a_connection_known_to_be_lost_is_sqlalchemys_error(pg_store: Store, pg_url: str) -> None:
    """psycopg refuses a cursor on a connection it knows is lost: that error too is raised as SQLAlchemy's, the
    connection invalidated (it escaped as ``psycopg.OperationalError``, the pooled connection kept)."""
    with pytest.raises(OperationalError) as caught:
        with pg_store.transaction() as tx:
            tx.runs.get("r1")
            _kill(pg_url, tx.conn.connection.driver_connection)
            tx.runs.get("r1")
    assert caught.value.connection_invalidated and is_transient(caught.value)
    with pg_store.read() as tx:  # a new connection
        assert tx.conn.execute(text("SELECT 1")).scalar_one() == 1


@pytest.mark.parametrize("through_sqlalchemy", [False, True])
def test_a_connection_lost_after_the_commit_was_answered_is_not_a_failed_commit(
        pg_url: str, monkeypatch: pytest.MonkeyPatch, through_sqlalchemy: bool) -> None:
    """A transaction that commits with its statements (``Tx.pipeline(commit=True)``) whose backend ends right
    after answering the COMMIT (here it terminates itself, the statement after it; in the field, an operator's
    or a failover's ``pg_terminate_backend`` landing in that moment): committed, so no error is raised (a 503
    "nothing done" made a client retry and start a second run, or meet its own approval); only the connection
    is dropped, and the next transaction takes another."""
    from datetime import datetime, timezone

    from store.models import RunStatus

    store = Store(pg_url)
    run_id = f"lac{int(through_sqlalchemy)}{time.monotonic_ns() % 10**12}"  # (the session's database)
    execute = psycopg.Connection.execute

    def then_end(self, query, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        cursor = execute(self, query, *args, **kwargs)
        if query == "COMMIT":
            with self.pipeline() as pipeline:  # the COMMIT's answer received first (under load it was not yet,
                pipeline.sync()  # and the test's premise, "answered, then the connection ended", did not hold)
            execute(self, "SELECT pg_terminate_backend(pg_backend_pid())")
        return cursor

    monkeypatch.setattr(psycopg.Connection, "execute", then_end)
    try:
        with store.transaction() as tx:
            if through_sqlalchemy:  # a transaction that also executed through SQLAlchemy's Connection
                tx.conn.exec_driver_sql("SELECT 1")
            with tx.pipeline(commit=True):
                tx.runs.insert(run_id=run_id, workflow="w", workflow_version=1, started_by="me",
                               started_via="console", now=datetime.now(timezone.utc), status=RunStatus.WAITING)
                moved = tx.runs.transition_later(run_id, from_statuses=[RunStatus.WAITING],
                                                 now=datetime.now(timezone.utc), status=RunStatus.READY)
            assert moved.get() is True  # its answer arrived before the COMMIT's
        monkeypatch.setattr(psycopg.Connection, "execute", execute)
        with store.read() as tx:
            assert tx.runs.get(run_id).status is RunStatus.READY
    finally:
        store.dispose()
