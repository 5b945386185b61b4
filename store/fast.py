"""Executing the store's hot statements without SQLAlchemy's per-statement machinery.

Every statement stays a SQLAlchemy Core statement, defined once in its repository: SQLAlchemy compiles it
(once per statement and database) into the SQL text and the types of its parameters and result columns. What
is skipped is the work SQLAlchemy repeats on every execution (an execution context, parameter processing
through its type system, event dispatch, result metadata, row objects): here the compiled text is sent
straight to the DBAPI cursor of the transaction's own connection, with the values converted as SQLAlchemy
would convert them (``store.schema.UTCDateTime`` in SQLite is ``YYYY-MM-DD HH:MM:SS.ffffff`` text; JSON is
text in SQLite and JSONB on PostgreSQL), and rows come back as dicts converted the same way. The statement
runs in the SQLAlchemy transaction it is given (same connection, same BEGIN and COMMIT), so it mixes freely
with statements executed through SQLAlchemy.

Measured (``python -m bench``, items 2 and 4): executing a prebuilt statement through ``Connection.execute``
costs about 15 µs of Python on SQLite, the same statement here about 3 µs; a decision executes about ten.

Driver errors are raised as SQLAlchemy's (``sqlalchemy.exc.DBAPIError`` and its subclasses, with the original
as ``.orig``), and a connection that broke is invalidated, as ``Connection.execute`` would.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Generic, Iterator, TypeVar

from pydantic_core import PydanticSerializationError, to_json
from sqlalchemy import Boolean, Connection, DateTime, LargeBinary
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.types import JSON, TypeDecorator, TypeEngine

from store.db import opened_cursor

Convert = Callable[[Any], Any]
T = TypeVar("T")
_SQLITE_NAMED = sqlite_dialect.dialect(paramstyle="named")


_last_time: tuple[datetime | None, str | None] = (None, None)
"""The last datetime ``sqlite_time_in`` converted and its text: a transaction stores its one ``now`` in
several rows (the run, the request, the decision, the audit event, the outbox message), converted once."""


def sqlite_time_in(value: datetime | None) -> str | None:
    """A timezone-aware datetime as SQLAlchemy stores it in SQLite: ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC).

    Raises:
        ValueError: a naive datetime.
    """
    global _last_time
    if value is None:
        return None
    last = _last_time  # (one tuple read and written whole: safe across threads)
    if last[0] is value:
        return last[1]
    if value.tzinfo is not timezone.utc:
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use timezone-aware UTC")
        value = value.astimezone(timezone.utc)
    text = value.isoformat(" ", "microseconds")[:26]  # what strftime(...%f) gives, without "+00:00"; faster
    _last_time = (value, text)
    return text


def _sqlite_time_out(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):  # as stored, naive UTC: the offset appended parses ~6x faster than .replace(tzinfo=)
        try:
            return datetime.fromisoformat(value + "+00:00")
        except ValueError:  # not as Hazel stores it (one with an offset of its own): as it says
            parsed = datetime.fromisoformat(value)
            return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _pg_time_in(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ValueError("naive datetime given to the store; use timezone-aware UTC")
    return value


def _pg_time_out(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


def _json_text(value: Any) -> str:
    """``value`` as JSON text, written by pydantic-core (a few times faster than ``json.dumps``; compact, UTF-8
    as is); what it refuses (text with a lone surrogate) as ``json.dumps`` writes it (escaped)."""
    try:
        return to_json(value, inf_nan_mode="constants").decode()
    except PydanticSerializationError:
        return json.dumps(value)


def _sqlite_json_in(value: Any) -> str | None:
    return None if value is None else _json_text(value)


def _sqlite_json_out(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def _pg_json_in(value: Any) -> Any:
    if value is None:
        return None
    from psycopg.types.json import Jsonb

    return Jsonb(value, dumps=_json_text)


def _sqlite_bool_out(value: Any) -> Any:
    return None if value is None else bool(value)


def _kind(type_: TypeEngine) -> str:
    """``time``, ``json``, ``bool``, ``bytes`` or ``plain`` for a column or parameter type."""
    if isinstance(type_, TypeDecorator):
        type_ = type_.impl_instance
    if isinstance(type_, DateTime):
        return "time"
    if isinstance(type_, JSON):
        return "json"
    if isinstance(type_, Boolean):
        return "bool"
    if isinstance(type_, LargeBinary):
        return "bytes"
    return "plain"


_IN = {"sqlite": {"time": sqlite_time_in, "json": _sqlite_json_in},
       "postgresql": {"time": _pg_time_in, "json": _pg_json_in}}
_OUT = {"sqlite": {"time": _sqlite_time_out, "json": _sqlite_json_out, "bool": _sqlite_bool_out},
        "postgresql": {"time": _pg_time_out}}


@dataclass(frozen=True)
class Compiled:
    """One statement compiled for one database: its SQL text, the values of its literal parameters, and the
    converters of its parameters and result columns (by name)."""

    sql: str
    defaults: dict[str, Any]
    params_in: dict[str, Convert]
    columns_out: dict[str, Convert]
    returns_rows: bool = False
    """The statement answers rows (a SELECT, a RETURNING clause): its cursor is closed once they are read."""
    names: tuple[str, ...] | None = None
    """The names of its result columns in their order, as the driver would describe them (None: not known
    when compiled; read from the cursor then). psycopg builds ``cursor.description`` anew at each access, a
    column object per column: about 40 µs of a resume on PostgreSQL."""


_cache: dict[tuple, tuple[ClauseElement, Compiled]] = {}


def compiled(stmt: ClauseElement, conn: Connection, keys: tuple[str, ...] | None = None) -> Compiled:
    """``stmt`` compiled for ``conn``'s database (cached: compile a statement built once, not per call).
    ``keys``: for a bare ``table.insert()``, the columns given (as SQLAlchemy compiles it per call)."""
    name = conn.dialect.name
    key = (id(stmt), name, keys)
    found = _cache.get(key)
    if found is not None and found[0] is stmt:
        return found[1]
    dialect = _SQLITE_NAMED if name == "sqlite" else conn.dialect
    comp = stmt.compile(dialect=dialect, column_keys=list(keys) if keys is not None else None,
                        compile_kwargs={"render_postcompile": True})
    params_in: dict[str, Convert] = {}
    defaults: dict[str, Any] = {}
    for bind, rendered in comp.bind_names.items():  # (a literal's bind is rendered under a generated name)
        convert = _IN[name].get(_kind(bind.type))
        if convert is not None:
            params_in[rendered] = convert
        if not bind.required:  # a literal of the statement (the caller's values take precedence)
            defaults[rendered] = bind.effective_value
    columns_out: dict[str, Convert] = {}
    result_columns = getattr(comp, "_result_columns", None) or []
    for column in result_columns:
        convert = _OUT[name].get(_kind(column.type))
        if convert is not None:
            columns_out[column.keyname] = convert
    names = (tuple(column.name for column in result_columns)
             if result_columns and getattr(comp, "_ordered_columns", False) else None)
    made = Compiled(str(comp), defaults, params_in, columns_out, returns_rows=bool(result_columns), names=names)
    _cache[key] = (stmt, made)
    return made


def _sets_from_params(stmt: ClauseElement) -> bool:
    """True for a bare ``table.insert()`` / ``update(table).where(...)``: SQLAlchemy takes the columns to set
    from the parameters given, so it is compiled per set of parameter names."""
    if getattr(stmt, "is_insert", False):
        return not getattr(stmt, "_select_names", None)
    return bool(getattr(stmt, "is_update", False)) and not getattr(stmt, "_values", None)


def _params(c: Compiled, params: dict[str, Any]) -> dict[str, Any]:
    values = {**c.defaults, **params} if c.defaults else dict(params)
    for name, convert in c.params_in.items():
        if name in values:
            values[name] = convert(values[name])
    return values


class Result:
    """What a statement answered: ``rowcount``, and its rows as dicts of converted values.

    The DBAPI cursor is closed as soon as the answer is read in full: by ``rows``, ``tuples``, ``one``,
    ``scalar``, a ``row`` that finds no more, or ``rowcount`` of a statement that answers no rows. It is not
    left to reference counting: a cursor caught in a reference cycle is finalised by the garbage collector in
    whatever thread happens to run it, which once deadlocked SQLite. (A statement whose answer is never read
    is released as its Result is dropped.)
    """

    __slots__ = ("cursor", "compiled", "_names", "_converts", "_count")

    def __init__(self, cursor: Any, compiled_: Compiled) -> None:
        self.cursor = cursor
        self.compiled = compiled_
        self._names: list[str] | None = None
        self._converts: list[tuple[str, Convert]] = []
        self._count: int | None = None

    @property
    def rowcount(self) -> int:
        """Rows the statement changed (inside a ``pipeline``, this waits for its answer: one round trip)."""
        if self._count is not None:  # (read before: the cursor may be closed)
            return self._count
        fetch = getattr(self.cursor, "_fetch_pipeline", None)  # psycopg: the answer may not have arrived yet
        if fetch is not None:
            fetch()
        count = self._count = self.cursor.rowcount
        if not self.compiled.returns_rows:  # nothing more to read
            self.cursor.close()
        return count

    def _dict(self, values: tuple) -> dict[str, Any]:
        if self._names is None:  # once per result
            names = self.compiled.names
            self._names = list(names) if names is not None else [d[0] for d in self.cursor.description]
            self._converts = [(n, c) for n, c in self.compiled.columns_out.items() if n in self._names]
        out = dict(zip(self._names, values))
        for name, convert in self._converts:
            out[name] = convert(out[name])
        return out

    def row(self) -> dict[str, Any] | None:
        """The next row, or None (then the cursor is closed). A statement that answers one row at most: ``one``."""
        values = self.cursor.fetchone()
        if values is None:
            self.cursor.close()
            return None
        return self._dict(values)

    def one(self) -> dict[str, Any] | None:
        """The first row, or None, for a statement that answers one row at most; the cursor is closed."""
        values = self.cursor.fetchone()
        out = None if values is None else self._dict(values)
        self.cursor.close()
        return out

    def rows(self) -> list[dict[str, Any]]:
        """Every remaining row."""
        out = [self._dict(values) for values in self.cursor.fetchall()]
        self.cursor.close()
        return out

    def tuples(self) -> list[tuple]:
        """Every remaining row as the driver gives it: values in the statement's column order, unconverted
        (for a caller that reads a few known columns of many rows; ``convert`` converts one)."""
        out = self.cursor.fetchall()
        self.cursor.close()
        return out

    def convert(self, name: str, value: Any) -> Any:
        """``value`` of result column ``name`` converted as ``rows`` would."""
        convert = self.compiled.columns_out.get(name)
        return convert(value) if convert is not None else value

    def scalar(self) -> Any:
        """The first column of the first row (None when there is none); the cursor is closed."""
        values = self.cursor.fetchone()
        self.cursor.close()
        return None if values is None else values[0]


def prepared(conn: Connection, stmt: ClauseElement, params: dict[str, Any]) -> tuple[Compiled, dict[str, Any]]:
    """What ``execute`` sends to the driver: ``stmt`` compiled for ``conn`` (``.sql``) and the converted
    values (tests read the plans of the statements with it)."""
    c = compiled(stmt, conn, tuple(sorted(params)) if _sets_from_params(stmt) else None)
    return c, _params(c, params)


def execute(conn: Connection, stmt: ClauseElement, params: dict[str, Any], *, binary: bool = False) -> Result:
    """Execute ``stmt`` with ``params`` on ``conn``'s DBAPI connection, in its current transaction.
    ``binary``: on PostgreSQL, ask for the rows in binary format (the same values; for results of many rows or
    bytes, e.g. a checkpoint chain of 68 patches: 1.1-1.8 ms instead of 2.0-2.3 ms, as bytea travels as hex
    text otherwise).

    Raises:
        sqlalchemy.exc.DBAPIError: the database refused or failed (``IntegrityError`` for a unique key).
    """
    if getattr(conn, "committed", False):
        raise RuntimeError("a statement after its transaction committed (store.fast.pipeline(commit=True))")
    c, values = prepared(conn, stmt, params)
    raw = conn.connection.driver_connection
    cursor = None
    try:
        cursor = raw.cursor()  # (psycopg: fails at once on a connection known to be lost)
        if getattr(conn, "unbegun", None):  # PostgreSQL, the transaction's first statement: BEGIN goes with it
            with driver_pipeline(raw):
                conn.send_begin(raw)
                cursor.execute(c.sql, values, binary=binary or None)
        elif binary and conn.dialect.name == "postgresql":
            cursor.execute(c.sql, values, binary=True)
        else:
            cursor.execute(c.sql, values)
    except conn.dialect.loaded_dbapi.Error as exc:
        if cursor is not None:
            cursor.close()
        invalid = conn.dialect.is_disconnect(exc, raw, None)
        if invalid:
            conn.invalidate(exc)
        raise DBAPIError.instance(c.sql, values, exc, conn.dialect.loaded_dbapi.Error,  # (its text: no values)
                                  connection_invalidated=invalid, dialect=conn.dialect, hide_parameters=True) from exc
    except BaseException:  # a value the driver cannot send (OverflowError for an int past 64 bits, …)
        if cursor is not None:
            cursor.close()
        raise
    if c.returns_rows:  # its rows may stay unread if the transaction fails: closed then (store.db.transaction)
        opened_cursor(conn, cursor)
    return Result(cursor, c)


@contextmanager
def pipeline(conn: Connection, *, commit: bool = False) -> Iterator[None]:
    """On PostgreSQL, send the statements executed inside without waiting for each answer (psycopg's
    pipeline mode: https://www.psycopg.org/psycopg3/docs/advanced/pipeline.html): the block costs one round
    trip, plus one per answer read inside it (reading waits for that statement and those before it). Answers
    not read inside stay readable after the block. On SQLite (in process, no round trip) it does nothing.

    ``commit`` (a ``store.txconn.TxConnection``'s transaction): when the block ends without raising, its
    ``COMMIT`` is sent with its statements, in the same round trip, and the transaction is over
    (``conn.committed``; a statement after it raises ``RuntimeError``). Inside such a block ``conn.guarding``
    is True: the writes whose outcome decides whether the transaction may commit use their guarded form, which
    fails the statement (and with it the transaction, COMMIT included) instead of changing no row
    (``guarded``). On SQLite the commit stays where the transaction ends.

    A connection that breaks after the server answered the COMMIT (a backend terminated between that answer
    and the pipeline's end) raises nothing: the transaction is committed, its answers are in, and the
    connection is invalidated. One that breaks before raises: then nothing was committed, unless the server
    committed and its answer was lost with the connection (as for any commit).

    Raises:
        sqlalchemy.exc.DBAPIError: a statement inside failed (its error arrives when the block ends, or when
            an answer is read); the transaction is then unusable (not committed): let it roll back. A guard
            that failed is a ``DataError`` (``guard_failed``).
    """
    if conn.dialect.name != "postgresql":
        yield
        return
    raw = conn.connection.driver_connection
    commit_cursor = None
    try:
        with driver_pipeline(raw):
            if getattr(conn, "unbegun", None):  # the transaction's first statements: BEGIN goes first
                conn.send_begin(raw)
            if not commit:
                yield
            else:
                conn.guarding = True
                try:
                    yield
                finally:
                    conn.guarding = False
                if not conn.unbegun:  # (a block that sent nothing leaves the transaction to its end)
                    commit_cursor = raw.execute("COMMIT")
                    conn.committed = True
    except conn.dialect.loaded_dbapi.Error as exc:  # the pipeline's, or a read's inside, straight from the driver
        if commit_cursor is not None and commit_cursor.statusmessage == "COMMIT":
            # The server answered the COMMIT, then the connection broke before the pipeline's end (its backend
            # terminated: "cannot exit pipeline mode while busy"): the transaction stands, and every answer
            # before it arrived. Only the connection is lost.
            conn.invalidate(exc)
            return
        if commit:
            conn.committed = False  # (the COMMIT was not answered: the transaction did not commit here)
        raise _translated(conn, raw, exc) from exc


GUARD_SQLSTATE = "22012"
"""What a guarded statement fails with when it changed no row: ``division_by_zero``, the one error a guard
can raise without a function of Hazel's own in the database. Hazel's statements divide nowhere else."""


def guarded(cte: Any, select_: Any) -> Any:
    """PostgreSQL: ``select_`` (reading from the data-modifying CTE ``cte``: an INSERT … SELECT or a SELECT)
    made to fail with ``GUARD_SQLSTATE`` when ``cte`` changed no row, with the condition
    ``(SELECT 1 / count(*) FROM cte) = 1``: an uncorrelated subquery, so the planner evaluates it once, before
    anything is read from the CTE (a one-time filter; the CTE runs to completion whatever reads it)."""
    from sqlalchemy import func, literal_column, select

    check = select(literal_column("1") / func.count()).select_from(cte).scalar_subquery() == 1
    return select_.where(check)


def guard_failed(exc: BaseException) -> bool:
    """True for the error of a guarded statement that changed no row (``guarded``): raised when the pipeline
    ends, or by a read inside the block of any statement sent after it (psycopg raises the first error)."""
    orig = getattr(exc, "orig", exc)
    return getattr(orig, "sqlstate", None) == GUARD_SQLSTATE


@contextmanager
def driver_pipeline(raw: Any) -> Iterator[None]:
    """psycopg's pipeline on the driver connection ``raw`` (``raw.pipeline()``), ended quietly when its block
    raises: the block's error is the one raised, and the pipeline's own at its end ("pipeline aborted", "the
    connection is lost") only follows from it. psycopg would log that one, ``error ignored terminating
    <Pipeline [BAD]>: …`` (a WARNING on the logger ``psycopg``: on the logs of ``hazel serve`` and a command's
    stderr at every statement cut short by a database going away).

    Raises:
        BaseException: what the block raised; else psycopg's error of the pipeline's end (``psycopg.Error``).
    """
    failed: BaseException | None = None
    try:
        with raw.pipeline():
            try:
                yield
            except BaseException as exc:  # reported below, once the pipeline has ended quietly
                failed = exc
    except Exception:
        if failed is None:
            raise
    if failed is not None:
        raise failed


def _translated(conn: Connection, raw: Any, exc: Exception) -> DBAPIError:
    """A driver error as SQLAlchemy's ``DBAPIError`` (invalidating the connection if it broke)."""
    invalid = conn.dialect.is_disconnect(exc, raw, None)
    if invalid:
        conn.invalidate(exc)
    return DBAPIError.instance("(pipeline)", None, exc, conn.dialect.loaded_dbapi.Error,
                               connection_invalidated=invalid, dialect=conn.dialect)


class Later(Generic[T]):
    """The answer of a statement already sent, turned into a value when first asked for (``get``): inside a
    ``pipeline`` the statement costs no round trip of its own until then."""

    __slots__ = ("_read", "_value", "_done")

    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read
        self._done = False
        self._value: Any = None

    def get(self) -> T:
        if not self._done:
            self._value, self._done = self._read(), True
        return self._value
