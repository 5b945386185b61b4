"""The hot path: a step that keeps its run ``running``, written on one database connection held for a whole
drive, by the DBAPI driver itself.

A step is the checkpoint INSERT and the run's fenced UPDATE (head, lease) in ONE transaction, like every
write of the executing worker. Going through SQLAlchemy Core for it cost more than the database's own work:
a pooled connection checked out per step, an execution context per statement, parameter processing, result
objects (``python -m bench``, item 2: 250 µs of a step on SQLite, of which SQLAlchemy about 60 %). Here the
two statements are fixed SQL texts executed on the raw ``sqlite3`` / ``psycopg`` connection that SQLAlchemy's
pool lends for the drive, with the values converted as SQLAlchemy would store them (``store.schema``: SQLite
keeps UTC timestamps as ``YYYY-MM-DD HH:MM:SS.ffffff``), so every other query reads these rows as its own.
On PostgreSQL the two are one statement (a data-modifying CTE: no lease, no row) sent in autocommit mode:
a single statement is its own transaction, so a step costs one round trip to the server (and its commit)
instead of three (BEGIN, the statement, COMMIT); psycopg prepares it after its fifth execution.

Driver errors are raised as SQLAlchemy's (``sqlalchemy.exc.DBAPIError`` subclasses, ``OperationalError`` for
a lost connection), and a connection that broke is invalidated, so callers handle them as any store error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from store.checkpoints import ROW_COLUMNS as _COLUMNS
from store.checkpoints import ChainPosition, NewCheckpoint, SnapshotPolicy, encode_checkpoint
from store.db import write_turn
from store.errors import LeaseLostError

_SQLITE_ADVANCE = (
    "UPDATE hazel_runs SET head_seq = ?, last_seq = ?, attempt = 0, error = NULL, error_traceback = NULL,"
    " lease_expires_at = ?, updated_at = ? WHERE id = ? AND lease_token = ? AND status = 'running'")
_SQLITE_INSERT = (f"INSERT INTO hazel_checkpoints ({', '.join(_COLUMNS)}) VALUES "
                  f"({', '.join('?' for _ in _COLUMNS)})")
_PG_STEP = (
    "WITH fenced AS (UPDATE hazel_runs SET head_seq = %(seq)s, last_seq = %(seq)s, attempt = 0, error = NULL,"
    " error_traceback = NULL, lease_expires_at = %(lease_until)s, updated_at = %(now)s"
    " WHERE id = %(run_id)s AND lease_token = %(token)s AND status = 'running' RETURNING id)"
    f" INSERT INTO hazel_checkpoints ({', '.join(_COLUMNS)})"
    f" SELECT {', '.join(f'%({c})s' for c in _COLUMNS)} FROM fenced")


def sqlite_time(value: datetime) -> str:
    """A timezone-aware datetime as SQLAlchemy stores it in SQLite (``store.schema.UTCDateTime``):
    ``YYYY-MM-DD HH:MM:SS.ffffff`` (``store.fast`` converts the same way)."""
    from store.fast import sqlite_time_in

    return sqlite_time_in(value)


class StepWriter:
    """Writes the steps of one drive that keep the run ``running`` (``write``), on one pooled connection
    taken at the first write and given back by ``close`` (the runner closes it when the drive stops). Not
    thread-safe: one per drive."""

    def __init__(self, engine: Engine, policy: SnapshotPolicy) -> None:
        self.engine = engine
        self.policy = policy
        self.postgresql = engine.dialect.name == "postgresql"
        self._fairy: Any = None

    def write(self, cp: NewCheckpoint, tree: Any, parent: ChainPosition | None, *, token: str, now: datetime,
              lease_until: datetime) -> ChainPosition:
        """Commit checkpoint ``cp`` (state ``tree``, a patch against ``parent`` when the policy allows) and move
        the run's head to it, keeping it ``running`` with its lease renewed until ``lease_until``, in one
        transaction fenced by the lease ``token``. Returns its chain position.

        Raises:
            LeaseLostError: the run is no longer leased by ``token`` (cancelled, or taken over): nothing written.
            sqlalchemy.exc.DBAPIError: the database failed (nothing written).
        """
        row, position = encode_checkpoint(cp, tree, parent, self.policy)
        if self._fairy is None:
            self._fairy = self.engine.raw_connection()
            if self.postgresql:
                self._fairy.driver_connection.autocommit = True  # given back as it came (``close``)
        raw = self._fairy.driver_connection
        try:
            if self.postgresql:
                params = dict(zip(_COLUMNS, row))
                params.update(seq=cp.seq, lease_until=lease_until, now=now, token=token)
                with raw.cursor() as cur:
                    cur.execute(_PG_STEP, params)  # one statement: committed as it completes
                    written = cur.rowcount
                if written != 1:
                    raise LeaseLostError(f"run {cp.run_id} is no longer leased by this worker")
            else:
                with write_turn(self.engine):  # this process's writers take turns (store.db)
                    raw.execute("BEGIN IMMEDIATE")
                    try:
                        moved = raw.execute(_SQLITE_ADVANCE, (cp.seq, cp.seq, sqlite_time(lease_until),
                                                              sqlite_time(now), cp.run_id, token)).rowcount
                        if moved != 1:
                            raise LeaseLostError(f"run {cp.run_id} is no longer leased by this worker")
                        values = list(row)
                        values[7] = sqlite_time(cp.created_at)
                        raw.execute(_SQLITE_INSERT, values)
                    except BaseException:
                        raw.execute("ROLLBACK")
                        raise
                    raw.execute("COMMIT")
        except LeaseLostError:
            raise
        except self.engine.dialect.loaded_dbapi.Error as exc:
            self._failed(exc)
            raise DBAPIError.instance(_PG_STEP if self.postgresql else _SQLITE_INSERT, None, exc,
                                      self.engine.dialect.loaded_dbapi.Error,
                                      connection_invalidated=True) from exc
        return position

    def _failed(self, exc: Exception) -> None:
        """After a driver error: roll back, and drop the connection (it may be broken; a new one is taken at
        the next write)."""
        fairy, self._fairy = self._fairy, None
        if fairy is None:
            return
        try:
            fairy.invalidate(exc)
        except Exception:  # the connection is gone anyway
            pass

    def close(self) -> None:
        """Give the connection back to the pool (on PostgreSQL out of autocommit again, as the pool lent it)."""
        fairy, self._fairy = self._fairy, None
        if fairy is None:
            return
        try:
            if self.postgresql:
                fairy.driver_connection.autocommit = False
        except Exception as exc:  # a broken connection: the pool must not lend it again
            fairy.invalidate(exc)
        fairy.close()
