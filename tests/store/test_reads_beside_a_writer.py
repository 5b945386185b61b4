"""The schema check every command starts with (``Store.ensure_schema``), ``/healthz``'s (``Store.health``) and
read transactions answer at once while another program holds a write transaction open on the database.

Found: ``hazel runs`` on SQLite waited the whole busy timeout (30 s) for the write lock another process held,
then failed: the check read the schema's revision (``store.migrate.current_revision``) in a transaction that
SQLAlchemy began, which ``store.db`` begins as a writer's ``BEGIN IMMEDIATE``. In WAL mode a reader never waits
for a writer; the revision is now read in a reader's ``BEGIN``. What the check guarantees is kept: an empty
database still gets its schema (waiting for the lock, which creating it needs), an older revision is still
refused.

The busy timeout is 0.3 s here (``store.db.BUSY_TIMEOUT_MS``, read when an engine is made): a read that waited
for the lock would fail in 0.3 s ("database is locked") instead of 30 s.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from store import Health, Store, db
from store.errors import SchemaNotReadyError
from store.migrate import HEAD, current_revision, downgrade
from tests.support.writer import UNCOMMITTED, write_held


@pytest.fixture(autouse=True)
def _short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "BUSY_TIMEOUT_MS", 300)


def test_the_schema_check_health_and_reads_answer_while_another_program_writes(db_url: str) -> None:
    store = Store(db_url)
    try:
        store.ensure_schema()  # (the connections the check opens are pooled before the writer begins)
        with write_held(db_url):  # (a read that waited for the lock would raise "database is locked")
            assert current_revision(store.engine) == HEAD
            assert store.health() == Health(error=None, schema=None)
            store.ensure_schema()
            with store.read() as tx:
                assert tx.events.recent(action_prefix=UNCOMMITTED) == []  # the last committed state
    finally:
        store.dispose()


def test_an_older_revision_is_still_refused_while_another_program_writes(empty_url: str) -> None:
    store = Store(empty_url)
    try:
        store.upgrade()
        downgrade(store.engine, "0008")
        with write_held(empty_url):
            with pytest.raises(SchemaNotReadyError, match="revision 0008, this Hazel needs 0009: run `hazel db up"):
                store.ensure_schema()
            assert store.health() == Health(error=None, schema="the database is at schema revision 0008, this "
                                                                "Hazel needs 0009: run `hazel db upgrade`")
        assert current_revision(store.engine) == "0008"  # nothing migrated it
    finally:
        store.dispose()


def test_an_empty_database_still_gets_its_schema_once_the_writer_is_done(empty_url: str) -> None:
    """Creating the schema writes: on SQLite it waits for the other program's write lock (the schema check's
    wait for a lock taken while another process creates the schema, ``store.migrate.ensure``), then creates it."""
    engine = create_engine(empty_url, poolclass=NullPool)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE other_program (x INTEGER)"))
    engine.dispose()
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with write_held(empty_url, insert="INSERT INTO other_program (x) VALUES (1)"):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    store = Store(empty_url)
    try:
        assert holding.wait(10)
        threading.Timer(1.0, release.set).start()  # (past the busy timeout: the check waits on, as it would)
        store.ensure_schema()
        assert current_revision(store.engine) == HEAD
        if make_url(empty_url).get_backend_name() == "sqlite":
            assert release.is_set()  # it waited for the writer
    finally:
        release.set()
        holder.join(10)
        store.dispose()
