"""What differs between SQLite and PostgreSQL, in one small object (``Tx.dialect``, ``Store.dialect``).

Hazel runs one store implementation on both. The differences are few and all here:

- row locks: PostgreSQL takes ``FOR UPDATE`` (``SKIP LOCKED`` when several workers or schedulers pick from the
  same rows, ``FOR NO KEY UPDATE`` for a run row that child rows reference); SQLite needs none, since a write
  transaction (``BEGIN IMMEDIATE``) already holds the database's one write lock;
- the recursive chain query that loads a checkpoint (``store.checkpoints``);
- whether a step's fenced run UPDATE and its checkpoint INSERT go as one statement (PostgreSQL: a data-modifying
  CTE saves a round trip; SQLite: two statements in process, nothing to save);
- cross-process wake-ups (``NOTIFY`` on PostgreSQL; SQLite workers share a process or sweep);
- seconds since the epoch of a stored timestamp (metrics), and how a unique violation names its key.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import func, literal_column
from sqlalchemy.sql import Select


@dataclass(frozen=True)
class Dialect:
    """The dialect hooks of one database kind (``sqlite`` or ``postgresql``)."""

    name: str

    @property
    def postgresql(self) -> bool:
        return self.name == "postgresql"

    def lock(self, stmt: Select, *, skip_locked: bool = False, key_share: bool = False, of: Any = None) -> Select:
        """``stmt`` with the row lock it needs on PostgreSQL (``FOR UPDATE``; ``SKIP LOCKED`` to leave rows
        another transaction is taking to it; ``key_share``: ``FOR NO KEY UPDATE``, which does not wait for the
        KEY SHARE locks that inserting child rows takes; ``of``: the table whose rows to lock, in a join).
        Unchanged on SQLite."""
        if not self.postgresql:
            return stmt
        return stmt.with_for_update(skip_locked=skip_locked, key_share=key_share, of=of)

    def epoch_seconds(self, column: Any) -> Any:
        """SQL for the Unix time (seconds) of a ``UTCDateTime`` column."""
        if self.postgresql:
            return func.extract("epoch", column)
        # SQLite keeps "YYYY-MM-DD HH:MM:SS.ffffff" (UTC): julianday() reads it
        return (func.julianday(column) - literal_column("2440587.5")) * literal_column("86400.0")

    @property
    def one_statement_step(self) -> bool:
        """True when a step's fenced run UPDATE and checkpoint INSERT go as one statement (a CTE)."""
        return self.postgresql

    @property
    def notifies(self) -> bool:
        """True when ``NOTIFY`` wakes workers of other processes."""
        return self.postgresql


@lru_cache(maxsize=4)
def dialect_named(name: str) -> Dialect:
    """The (shared, immutable) ``Dialect`` for ``sqlite`` or ``postgresql``."""
    return Dialect(name)
