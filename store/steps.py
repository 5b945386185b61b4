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
instead of three (BEGIN, the statement, COMMIT); psycopg prepares it after its fifth execution. It is
written with the server's own ``$n`` placeholders and sent through one ``psycopg.RawCursor`` per drive, so
psycopg neither rewrites the query nor reorders a dict of parameters at every step. Per step, alternated A/B
on the 2-core VM of ``bench/`` (item 2, 500 steps): SQLite about 347 → 303 µs, PostgreSQL about 402 → 330 µs,
with the patch's JSON written by pydantic-core (``store.codec.json_bytes``), one timestamp conversion fewer,
and the drive's cursor kept.

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
from store.db import take_turn, write_turns
from store.fast import sqlite_time_in
from store.errors import LeaseLostError

_SQLITE_ADVANCE = (
    "UPDATE hazel_runs SET head_seq = ?, last_seq = ?, attempt = 0, error = NULL, error_traceback = NULL,"
    " lease_expires_at = ?, updated_at = ? WHERE id = ? AND lease_token = ? AND status = 'running'")
_SQLITE_INSERT = (f"INSERT INTO hazel_checkpoints ({', '.join(_COLUMNS)}) VALUES "
                  f"({', '.join('?' for _ in _COLUMNS)})")
_PG_STEP = (  # positional: psycopg reorders no dict of parameters (its values: _COLUMNS' then the five below)
    "WITH fenced AS (UPDATE hazel_runs SET head_seq = $2, last_seq = $2, attempt = 0, error = NULL,"
    f" error_traceback = NULL, lease_expires_at = ${len(_COLUMNS) + 1}, updated_at = ${len(_COLUMNS) + 2}"
    f" WHERE id = $1 AND lease_token = ${len(_COLUMNS) + 3} AND status = 'running' RETURNING id)"
    f" INSERT INTO hazel_checkpoints ({', '.join(_COLUMNS)})"
    f" SELECT {', '.join(f'${i}' for i in range(1, len(_COLUMNS) + 1))} FROM fenced")


class StepWriter:
    """Writes the steps of one drive that keep the run ``running`` (``write``), on one pooled connection
    taken at the first write and given back by ``close`` (the runner closes it when the drive stops). Not
    thread-safe: one per drive."""

    def __init__(self, engine: Engine, policy: SnapshotPolicy) -> None:
        self.engine = engine
        self.policy = policy
        self.postgresql = engine.dialect.name == "postgresql"
        self._fairy: Any = None
        self._cursor: Any = None
        self._turns = write_turns(engine)

    def _open(self) -> Any:
        """Take the drive's connection from the pool and open the cursor its steps are written with (on
        PostgreSQL a ``RawCursor``: the statement's ``$n`` placeholders go to the server as they are)."""
        self._fairy = self.engine.raw_connection()
        raw = self._fairy.driver_connection
        if self.postgresql:
            import psycopg

            raw.autocommit = True  # given back as it came (``close``)
            self._cursor = psycopg.RawCursor(raw)
        else:
            self._cursor = raw.cursor()
        return self._cursor

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
        cur = self._cursor or self._open()
        try:
            if self.postgresql:
                cur.execute(_PG_STEP, (*row, lease_until, now, token))  # one statement: committed as it completes
                if cur.rowcount != 1:
                    raise LeaseLostError(f"run {cp.run_id} is no longer leased by this worker")
            else:
                at = sqlite_time_in(now)
                values = list(row)
                values[7] = at if cp.created_at is now else sqlite_time_in(cp.created_at)
                turns = self._turns  # this process's writers take turns (store.db.write_turn)
                held = take_turn(turns)
                try:
                    cur.execute("BEGIN IMMEDIATE")
                    try:
                        if cur.execute(_SQLITE_ADVANCE, (cp.seq, cp.seq, sqlite_time_in(lease_until), at,
                                                         cp.run_id, token)).rowcount != 1:
                            raise LeaseLostError(f"run {cp.run_id} is no longer leased by this worker")
                        cur.execute(_SQLITE_INSERT, values)
                    except BaseException:
                        cur.execute("ROLLBACK")
                        raise
                    cur.execute("COMMIT")
                finally:
                    if held:
                        turns.lock.release()
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
        fairy, self._fairy, self._cursor = self._fairy, None, None
        if fairy is None:
            return
        try:
            fairy.invalidate(exc)
        except Exception:  # the connection is gone anyway
            pass

    def close(self) -> None:
        """Give the connection back to the pool (on PostgreSQL out of autocommit again, as the pool lent it)."""
        fairy, self._fairy, cursor, self._cursor = self._fairy, None, self._cursor, None
        if cursor is not None:
            try:
                cursor.close()
            except Exception:  # a broken connection's cursor: the connection is dealt with below
                pass
        if fairy is None:
            return
        try:
            if self.postgresql:
                fairy.driver_connection.autocommit = False
        except Exception as exc:  # a broken connection: the pool must not lend it again
            fairy.invalidate(exc)
        fairy.close()
