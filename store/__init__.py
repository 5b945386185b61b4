"""Hazel's persistence: runs, checkpoints, steering requests, decisions, the audit log and the outbox.

``Store`` owns the engine; ``Store.transaction()`` yields a ``Tx`` whose repositories (``tx.runs``,
``tx.checkpoints``, ``tx.requests``, ``tx.decisions``, ``tx.events``, ``tx.outbox``) all write in that one
transaction. The store never reads the environment and never imports ``bot`` or ``integrations``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from sqlalchemy import Connection, Engine

from store import db
from store.audit import EventRepo
from store.checkpoints import ChainPosition, CheckpointRepo, Fence, NewCheckpoint, SnapshotPolicy
from store.errors import DuplicateDecisionError, LeaseLostError, SchemaNotReadyError, StoreError
from store.notify import notify_ready
from store.outbox import OutboxRepo
from store.retention import RetentionRepo
from store.runs import RunRepo
from store.steering import DecisionRepo, RequestRepo
from store.timers import TimerRepo

__all__ = [
    "ChainPosition", "DuplicateDecisionError", "Fence", "LeaseLostError", "NewCheckpoint", "SchemaNotReadyError",
    "SnapshotPolicy", "Store", "StoreError", "Tx",
]


class Tx:
    """The repositories of one open transaction."""

    def __init__(self, conn: Connection, policy: SnapshotPolicy) -> None:
        self.conn = conn
        self.runs = RunRepo(conn)
        self.checkpoints = CheckpointRepo(conn, policy)
        self.requests = RequestRepo(conn)
        self.decisions = DecisionRepo(conn)
        self.events = EventRepo(conn)
        self.outbox = OutboxRepo(conn)
        self.timers = TimerRepo(conn)
        self.retention = RetentionRepo(conn, self.checkpoints)

    def notify_ready(self, run_id: str) -> None:
        """Wake workers in other processes once this transaction commits (PostgreSQL ``NOTIFY``)."""
        notify_ready(self.conn, run_id)


class Store:
    """Hazel's database.

    Args:
        url: SQLAlchemy URL, ``sqlite:///hazel.db`` or ``postgresql+psycopg://user@host:5432/db``.
        sqlite_synchronous: SQLite ``PRAGMA synchronous`` (``FULL`` or ``NORMAL``); ignored on PostgreSQL.
        snapshot_policy: when checkpoints store a full snapshot instead of a patch.
    """

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL",
                 snapshot_policy: SnapshotPolicy | None = None, pool_size: int = 10) -> None:
        self.url = url
        self.engine: Engine = db.make_engine(url, sqlite_synchronous=sqlite_synchronous, pool_size=pool_size)
        self.policy = snapshot_policy or SnapshotPolicy()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Tx]:
        """One transaction; commits when the block ends, rolls back if it raises."""
        with db.transaction(self.engine, write=write) as conn:
            yield Tx(conn, self.policy)

    def read(self) -> "contextmanager[Tx]":
        """A read-only transaction (no write lock on SQLite)."""
        return self.transaction(write=False)

    def upgrade(self) -> None:
        """Bring the schema to the latest Alembic revision (idempotent)."""
        from store.migrate import upgrade

        upgrade(self.engine)

    def ensure_schema(self, *, upgrade_if_empty: bool = True) -> None:
        """Check the schema is current; create it on an empty database.

        Raises:
            SchemaNotReadyError: the database holds an older (or unknown) revision: run ``hazel db upgrade``.
        """
        from store.migrate import ensure

        ensure(self.engine, upgrade_if_empty=upgrade_if_empty)

    def dispose(self) -> None:
        self.engine.dispose()
