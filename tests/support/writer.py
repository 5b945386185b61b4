"""Another program's write transaction, held open on a database while a test reads it."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

UNCOMMITTED = "test.uncommitted"
"""The action of the audit event ``write_held`` inserts and never commits."""

_INSERT = ("INSERT INTO hazel_events (run_id, actor_id, channel, action, detail, created_at) "
           f"VALUES (:run_id, 'another-program', 'console', '{UNCOMMITTED}', '{{}}', CURRENT_TIMESTAMP)")


@contextmanager
def write_held(url: str, *, run_id: str | None = None, insert: str = _INSERT) -> Iterator[None]:
    """For the ``with`` block, a connection of its own (not Hazel's) holds a transaction that has written and is
    not committed: on SQLite ``BEGIN IMMEDIATE`` through the ``sqlite3`` module, SQLite's write lock, held until
    the block ends (Hazel's in-process write turns do not see it), as a ``sqlite3`` shell or a backup tool holds
    it; on PostgreSQL a transaction with its row locks. Rolled back when the block ends.

    ``insert``: the statement it writes (named parameter ``run_id``); by default an audit event of ``run_id``
    (None: of no run) whose action is ``UNCOMMITTED``, which no reader may see."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        conn = sqlite3.connect(parsed.database, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(insert, {"run_id": run_id})
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
        return
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text(insert), {"run_id": run_id})
            yield
            conn.rollback()
    finally:
        engine.dispose()
