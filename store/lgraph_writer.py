"""The LangGraph saver's two hot writes, a checkpoint and a task's pending writes, on raw driver connections
(``store.lgraph`` holds the tables' other statements)."""

from __future__ import annotations

import json
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from sqlalchemy import Engine, event
from sqlalchemy.exc import DBAPIError

from store.db import relaxed_level, sqlite_level, take_turn, write_turn, write_turns
from store.fast import driver_pipeline
from store.lgraph import ROW_COLUMNS

_CP_NAMES = ", ".join(ROW_COLUMNS)
_W_COLUMNS = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type", "blob", "task_path")
_W_NAMES = ", ".join(_W_COLUMNS)
_W_UPSERT = " ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET" \
    " channel = excluded.channel, type = excluded.type, blob = excluded.blob"

Fence = tuple[str, str]
"""``(run_id, lease_token)``: a write happens only while the run is ``running`` under that lease."""


class _Kept:
    """The SQLite connection an engine lends this process's LangGraph writers for as long as the engine lives
    (checked out of its pool once, used by one writer at a time: ``lock``, inside this process's turn to write),
    so that a write does not check a connection out of the pool and back in: ~10 µs each way, twice per
    LangGraph step. Closed when the engine is disposed (``Engine.dispose``, as ``Store.dispose`` does), or
    dropped after a driver error."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fairy: Any = None

    def drop(self) -> None:
        """Close the kept connection (the next write checks out another)."""
        with self.lock:
            fairy, self.fairy = self.fairy, None
        if fairy is not None:
            fairy.detach()  # out of the pool, whichever it is now: closing it closes the driver's connection
            fairy.close()


_KEPT: "weakref.WeakKeyDictionary[Engine, _Kept]" = weakref.WeakKeyDictionary()
_KEPT_GUARD = threading.Lock()


def _kept(engine: Engine) -> _Kept:
    kept = _KEPT.get(engine)
    if kept is None:
        with _KEPT_GUARD:
            kept = _KEPT.get(engine)
            if kept is None:
                kept = _KEPT[engine] = _Kept()
                event.listen(engine, "engine_disposed", lambda _engine, kept=kept: kept.drop())
    return kept


class LangGraphWriter:
    """The saver's two hot writes, ``put`` and ``put_writes``, on a raw driver connection (as ``store.steps``
    writes a run's steps): SQLAlchemy's connection, transaction and statement machinery cost more than the
    database's own work. On PostgreSQL the pool lends the connection for the call (its checkout pings one that
    sat idle: ``store.db``); on SQLite each engine lends its writers one connection for as long as it lives
    (``_Kept``). On PostgreSQL a checkpoint is ONE statement in autocommit (one round trip, its own
    transaction), writes one statement or, not waiting for the disk, one pipelined ``BEGIN; SET LOCAL
    synchronous_commit TO OFF; INSERT; COMMIT``. On SQLite each is ONE statement too, its own
    transaction (the connection is in autocommit mode: ``store.db``), at ``synchronous`` (the store's level) or,
    for a write that need not wait for the disk, on a connection of ``relaxed`` at NORMAL. One call into the
    driver instead of three (``BEGIN IMMEDIATE``, the INSERT, ``COMMIT``) matters here more than its
    microseconds: LangGraph calls ``put_writes`` and ``put`` from its executor threads while its own loop holds
    the GIL, and every return from SQLite waits to take the GIL back (``python -m bench.langgraph_saver``,
    SQLite, 500 steps: 1,140-1,232 µs per step with the three calls, 1,078-1,139 µs with one, A/B alternated on
    one machine). A single INSERT takes the write lock when it starts, waiting in the busy handler as ``BEGIN
    IMMEDIATE`` would.

    ``relaxed``: the engine for writes that need not wait for the disk (``Store.relaxed_engine``: on SQLite
    its connections stay at NORMAL); None: ``engine``, its connection switched to NORMAL for such a write.

    A write given a ``fence`` (``Fence``: a Hazel run's step's, ``store.models.LEASE_KEY``) is the same one
    statement, as ``INSERT … SELECT … WHERE EXISTS`` the run still leased by its token (on PostgreSQL the run's
    row locked ``FOR SHARE`` until the commit, so that a takeover, which updates that row, comes wholly before
    or after it). A write without one is ``INSERT … SELECT … WHERE NOT EXISTS`` a run whose id is the thread's
    (a primary-key lookup in the same statement, no round trip of its own): only a run's own steps write into
    its graph thread (``hazel.langgraph.saver``). Either writes nothing when refused, and says so only as a row
    count of 0, which a key already stored gives too: the caller tells which (``fence_held``, ``RunRepo.get``).

    Driver errors are raised as SQLAlchemy's ``DBAPIError`` and the connection is dropped (closed).
    """

    def __init__(self, engine: Engine, *, synchronous: str = "FULL", relaxed: Engine | None = None) -> None:
        self.engine = engine
        self.relaxed = relaxed or engine
        self.postgresql = engine.dialect.name == "postgresql"
        self.synchronous = synchronous.upper()
        mark = "%s" if self.postgresql else "?"
        marks = ", ".join(mark for _ in ROW_COLUMNS)
        # a change is written only while the parent it is a change of exists with the content it was decoded
        # from, its stamp (a primary-key lookup in the same statement): another process may have deleted it
        # since this one read it, or re-put it with other values
        parent = (" EXISTS (SELECT 1 FROM hazel_lg_checkpoints WHERE thread_id = {m} AND checkpoint_ns = {m}"
                  " AND checkpoint_id = {m} AND stamp = {m})").replace("{m}", mark)
        self._leased = f"SELECT 1 FROM hazel_runs WHERE id = {mark} AND lease_token = {mark} AND status = 'running'"
        self._fence = f" EXISTS ({self._leased}{' FOR SHARE' if self.postgresql else ''})"
        # no fence: the thread is no Hazel run's (any run's, ended or not: its status is not read, so a run
        # ending, rewound or retried meanwhile changes nothing). Nothing is locked: this assumes that no run is
        # created with the id of a thread written so, which random run ids (12 hex digits, the engine's
        # ``new_run_id``) make practically impossible; a run never changes its id.
        self._no_run = f" NOT EXISTS (SELECT 1 FROM hazel_runs WHERE id = {mark})"
        select = f"INSERT INTO hazel_lg_checkpoints ({_CP_NAMES}) SELECT {marks} WHERE"
        self._cp_sql = f"{select}{self._no_run} ON CONFLICT DO NOTHING"
        self._cp_child_sql = f"{select}{parent} AND{self._no_run} ON CONFLICT DO NOTHING"
        self._cp_fenced_sql = f"{select}{self._fence} ON CONFLICT DO NOTHING"
        self._cp_child_fenced_sql = f"{select}{parent} AND{self._fence} ON CONFLICT DO NOTHING"
        self._w_row = "(" + ", ".join(mark for _ in _W_COLUMNS) + ")"

    def insert_checkpoint(self, row: dict[str, Any], *, parent_stamp: int = 0, fence: Fence | None = None) -> bool:
        """Commit a checkpoint row (``ROW_COLUMNS``); False, writing nothing, when its key already exists, when
        it is a change (``chain_len`` > 0) and its parent row does not exist or no longer has ``parent_stamp``
        (the stamp of the parent the change was made against: ``store.schema``), when ``fence`` is given and
        the run is no longer leased by its token (``fence_held`` tells which), or when it is not and the row's
        thread id is a Hazel run's id (``RunRepo.get`` tells)."""
        values = [row[c] for c in ROW_COLUMNS]
        values[ROW_COLUMNS.index("metadata")] = self._json(row["metadata"])
        child = row["chain_len"] > 0
        if child:
            values += [row["thread_id"], row["checkpoint_ns"], row["parent_checkpoint_id"], parent_stamp]
        values += list(fence) if fence is not None else [row["thread_id"]]
        sql = ((self._cp_child_fenced_sql if child else self._cp_fenced_sql) if fence is not None
               else self._cp_child_sql if child else self._cp_sql)
        if not self.postgresql:
            return self._sqlite(self.engine, sql, values, durable=True) == 1
        with self._raw(self.engine) as fairy, fairy.driver_connection.cursor() as cur:
            cur.execute(sql, values)
            return cur.rowcount == 1

    def insert_writes(self, rows: Sequence[dict[str, Any]], *, upsert: bool, durable: bool,
                      fence: Fence | None = None) -> int:
        """Commit pending writes (all or none, all of one thread); ``upsert``: a write already stored under its
        key is replaced, else kept. ``durable=False``: the commit does not wait for the disk
        (``store.db.transaction``). ``fence``: none is written unless the run is still leased by its token
        (``fence_held`` tells); no ``fence``: none is written when the thread id is a Hazel run's id
        (``RunRepo.get`` tells). Returns the number of rows inserted or replaced (0: all kept as they were, or
        refused)."""
        rows_sql = ", ".join(self._w_row for _ in rows)
        values = [row[c] for row in rows for c in _W_COLUMNS]
        conflict = _W_UPSERT if upsert else " ON CONFLICT DO NOTHING"
        # (SQLite parses an upsert after INSERT … SELECT only when the SELECT has a WHERE: it has)
        sql = (f"INSERT INTO hazel_lg_writes ({_W_NAMES}) SELECT * FROM (VALUES {rows_sql}) AS w WHERE"
               f"{self._fence if fence is not None else self._no_run}{conflict}")
        values += list(fence) if fence is not None else [rows[0]["thread_id"]]
        if not self.postgresql:
            return self._sqlite(self.engine if durable else self.relaxed, sql, values, durable=durable)
        with self._raw(self.engine if durable else self.relaxed) as fairy:
            raw = fairy.driver_connection
            if durable:
                with raw.cursor() as cur:
                    cur.execute(sql, values)
                    return cur.rowcount
            with driver_pipeline(raw), raw.cursor() as cur, raw.cursor() as insert:
                cur.execute("BEGIN")
                cur.execute("SET LOCAL synchronous_commit TO OFF")
                insert.execute(sql, values)
                cur.execute("COMMIT")
            return insert.rowcount  # (known once the pipeline is synced, as it is on leaving it)

    def fence_held(self, fence: Fence) -> bool:
        """Whether the run of ``fence`` is ``running`` under its lease token now (a read, for the rare write that
        wrote nothing: was it refused by the fence, or by what was already there?)."""
        with self.engine.connect() as conn:
            return conn.exec_driver_sql(self._leased, tuple(fence)).first() is not None

    def _level(self, fairy: Any, *, durable: bool) -> None:
        """Set the connection's ``synchronous`` for the next commit (the store's level, or NORMAL for a write
        that need not wait for the disk), unless it is already there."""
        sqlite_level(fairy, self.synchronous, self.synchronous if durable else relaxed_level(self.synchronous))

    def _json(self, value: Any) -> Any:
        if self.postgresql:
            from psycopg.types.json import Jsonb

            return Jsonb(value)
        return json.dumps(value)

    def _sqlite(self, engine: Engine, sql: str, values: Sequence[Any], *, durable: bool) -> int:
        """Execute ``sql`` (one INSERT, its own transaction: the connection is in autocommit mode, ``store.db``)
        on ``engine``'s kept connection, in this process's turn to write (``store.db``); its row count."""
        turns = write_turns(engine)
        held = take_turn(turns)
        try:
            kept = _KEPT.get(engine) or _kept(engine)
            with kept.lock:
                fairy = kept.fairy
                if fairy is None:
                    fairy = kept.fairy = engine.raw_connection()
                try:
                    self._level(fairy, durable=durable)
                    return fairy.driver_connection.execute(sql, values).rowcount
                except BaseException as exc:
                    kept.fairy = None
                    _invalidate(fairy, exc)
                    if isinstance(exc, engine.dialect.loaded_dbapi.Error):
                        raise _dbapi_error(engine, exc) from exc
                    raise
        finally:
            if held:
                turns.lock.release()  # type: ignore[union-attr]

    @contextmanager
    def _raw(self, engine: Engine) -> Iterator[Any]:
        """A connection of ``engine``'s pool for one write in autocommit mode (PostgreSQL)."""
        with write_turn(engine):
            fairy = engine.raw_connection()
            raw = fairy.driver_connection
            try:
                raw.autocommit = True
                yield fairy
            except BaseException as exc:
                _invalidate(fairy, exc)
                if isinstance(exc, engine.dialect.loaded_dbapi.Error):
                    raise _dbapi_error(engine, exc) from exc
                raise
            else:
                raw.autocommit = False  # given back as the pool lent it
                fairy.close()


def _invalidate(fairy: Any, exc: BaseException) -> None:
    """Drop a connection a write failed on from its pool (closed: it may be in a broken state)."""
    fairy.invalidate(exc)
    fairy.close()


def _dbapi_error(engine: Engine, exc: BaseException) -> DBAPIError:
    """A driver error as SQLAlchemy's ``DBAPIError`` (the connection invalidated)."""
    return DBAPIError.instance("(langgraph write)", None, exc, engine.dialect.loaded_dbapi.Error,  # type: ignore[arg-type]
                               connection_invalidated=True)
