"""``store.db.transaction`` begins, commits and rolls back on the driver (``store.txconn``): what a block writes
is committed once, or not at all when it raises, whether it executed through ``store.fast`` alone or also
through SQLAlchemy; a commit that fails is raised as SQLAlchemy's error and leaves nothing half-written; a
connection that broke inside a transaction is replaced. SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from store import Store, db, fast
from store.schema import events


def _count(store: Store) -> int:
    with store.read() as tx:
        return tx.conn.execute(text("SELECT count(*) FROM hazel_events")).scalar_one()


def _add(tx, action: str) -> None:  # noqa: ANN001
    from datetime import datetime, timezone

    fast.execute(tx.conn, events.insert(), {"action": action, "created_at": datetime.now(timezone.utc),
                                            "detail": {}, "actor_id": "test", "channel": "console"})


@pytest.fixture
def store(db_url: str):  # noqa: ANN201
    s = Store(db_url, pool_size=1)
    yield s
    s.dispose()


@pytest.mark.parametrize("through_sqlalchemy", [False, True])
def test_a_block_commits_once_or_not_at_all(store: Store, through_sqlalchemy: bool) -> None:
    before = _count(store)
    with store.transaction() as tx:
        _add(tx, "kept")
        if through_sqlalchemy:  # a Core statement in the same transaction, through SQLAlchemy's Connection
            tx.conn.execute(text("UPDATE hazel_events SET action = 'kept!' WHERE action = 'kept'"))
    assert _count(store) == before + 1
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            _add(tx, "dropped")
            if through_sqlalchemy:
                tx.conn.execute(text("UPDATE hazel_events SET action = 'dropped!' WHERE action = 'dropped'"))
            raise RuntimeError("the block failed")
    assert _count(store) == before + 1
    with store.read() as tx:  # the pooled connection came back out of any transaction: it writes again
        actions = [r[0] for r in tx.conn.execute(text("SELECT action FROM hazel_events"))]
    assert ("kept!" if through_sqlalchemy else "kept") in actions and not any("dropped" in a for a in actions)
    with store.transaction() as tx:
        _add(tx, "again")
    assert _count(store) == before + 2


def test_a_statement_that_fails_rolls_the_whole_transaction_back(store: Store) -> None:
    before = _count(store)
    with pytest.raises(IntegrityError):
        with store.transaction() as tx:
            _add(tx, "first")
            tx.conn.execute(text("INSERT INTO hazel_events (id, actor_id, channel, action, detail, created_at) "
                                 "SELECT id, actor_id, channel, action, detail, created_at FROM hazel_events "
                                 "LIMIT 1"))  # the same id
    assert _count(store) == before
    with store.transaction() as tx:
        _add(tx, "then")
    assert _count(store) == before + 1


def test_a_failed_commit_is_sqlalchemys_error_and_writes_nothing(pg_url: str) -> None:
    """A deferred check fails at COMMIT (PostgreSQL): raised as ``IntegrityError``, nothing stays written, and
    the connection goes back to the pool usable."""
    store = Store(pg_url, pool_size=1)
    try:
        with store.transaction() as tx:
            tx.conn.execute(text("CREATE TABLE IF NOT EXISTS hazel_test_deferred (id INT PRIMARY KEY, "
                                 "other INT REFERENCES hazel_test_deferred (id) DEFERRABLE INITIALLY DEFERRED)"))
            tx.conn.execute(text("DELETE FROM hazel_test_deferred"))
        with pytest.raises(IntegrityError):
            with store.transaction() as tx:
                tx.conn.execute(text("INSERT INTO hazel_test_deferred VALUES (1, 2)"))  # no 2: found at COMMIT
        with store.read() as tx:
            assert tx.conn.execute(text("SELECT count(*) FROM hazel_test_deferred")).scalar_one() == 0
    finally:
        with store.transaction() as tx:
            tx.conn.execute(text("DROP TABLE IF EXISTS hazel_test_deferred"))
        store.dispose()


def test_a_connection_broken_inside_a_transaction_is_replaced(pg_url: str) -> None:
    store = Store(pg_url, pool_size=1)
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with store.read() as tx:
            first = tx.conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with pytest.raises(OperationalError):
            with store.transaction() as tx:
                with admin.connect() as conn:
                    conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
                _add(tx, "lost")
        with store.read() as tx:  # a new connection: the broken one was not lent again
            assert tx.conn.execute(text("SELECT pg_backend_pid()")).scalar_one() != first
    finally:
        admin.dispose()
        store.dispose()


def test_postgresql_sends_begin_with_the_first_statement_and_commits_atomically(pg_url: str) -> None:
    """No round trip for BEGIN alone: it is queued with the transaction's first statement, whether that runs in
    a pipeline or alone; the statements after it are in the same transaction (a rollback undoes them all)."""
    store = Store(pg_url, pool_size=1)
    try:
        before = _count(store)
        with pytest.raises(RuntimeError):
            with store.transaction() as tx:
                _add(tx, "alone")  # the first statement, outside a pipeline
                with tx.pipeline():
                    _add(tx, "piped")
                assert tx.conn.execute(text("SELECT count(*) FROM hazel_events")).scalar_one() == before + 2
                raise RuntimeError("roll back")
        assert _count(store) == before
        with store.transaction(durable=False) as tx:
            with tx.pipeline():  # the first statements in a pipeline; not durable: SET LOCAL follows BEGIN
                _add(tx, "piped first")
            setting = tx.conn.execute(text("SHOW synchronous_commit")).scalar_one()
        assert setting == "off" and _count(store) == before + 1
        with store.read() as tx:
            assert tx.conn.execute(text("SHOW synchronous_commit")).scalar_one() == "on"
        lent = store.engine.raw_connection()  # (pool_size=1: the connection every transaction above used)
        try:
            assert lent.driver_connection.autocommit is False  # back in the pool as it was lent
        finally:
            lent.close()
        with store.transaction() as tx:
            pass  # nothing sent: nothing to commit
        with store.transaction() as tx:  # the connection went back to the pool as it was lent
            _add(tx, "after")
        assert _count(store) == before + 2
    finally:
        store.dispose()


def test_an_unreachable_database_is_sqlalchemys_operational_error() -> None:
    engine = db.make_engine("postgresql+psycopg://postgres@127.0.0.1:1/none")
    try:
        with pytest.raises(OperationalError) as failed:
            with db.transaction(engine):
                pass
        assert isinstance(failed.value, DBAPIError) and failed.value.orig is not None
    finally:
        engine.dispose()


def test_sqlalchemy_begun_transactions_still_begin_immediate(tmp_path) -> None:  # noqa: ANN001
    """A transaction SQLAlchemy begins itself (``engine.begin()``: Alembic's) still takes SQLite's write lock
    at its start, as the begin hook of ``store.db`` does."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with engine.begin() as conn:
            assert conn.connection.driver_connection.in_transaction
    finally:
        engine.dispose()


def test_a_postgresql_read_sees_one_snapshot(pg_url: str) -> None:
    """``Store.read`` on PostgreSQL reads every statement from one snapshot (REPEATABLE READ): a commit between
    two of its statements is not seen by the second (a fresh-user finding: ``GET /api/runs/{id}`` said
    ``waiting`` with no pending request, the run and its requests read either side of a decision's commit)."""
    store = Store(pg_url, pool_size=2)
    try:
        before = _count(store)
        with store.read() as tx:
            first = tx.conn.execute(text("SELECT count(*) FROM hazel_events")).scalar_one()
            with store.transaction() as other:
                _add(other, "between")
            second = tx.conn.execute(text("SELECT count(*) FROM hazel_events")).scalar_one()
        assert first == second == before
        assert _count(store) == before + 1
    finally:
        store.dispose()
