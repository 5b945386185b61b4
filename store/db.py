"""Engines and transactions: one implementation for SQLite and PostgreSQL with small dialect hooks.

SQLite (the embedded default) runs in WAL mode; write transactions start with ``BEGIN IMMEDIATE`` so that
writers queue on SQLite's lock (up to ``busy_timeout_ms``) instead of failing half-way when two threads
upgrade a read lock at once. Within one process, write transactions on one database file first take turns on
a lock of this module (``write_turn``), so that a thread never waits inside SQLite's busy handler for another
thread of the same process: SQLite holds the waiting connection's mutex while it waits, and a thread holding
the write lock that meanwhile needs that mutex (the garbage collector finalising a cursor of that connection,
whatever thread it runs in) waited for it until the busy timeout, 30 s, then failed ("database is locked",
seen in the test suite). The lock also hands the turn over at once, where the busy handler polls (sleeping up
to 100 ms between tries). Other processes still queue on SQLite's own lock.

PostgreSQL runs at READ COMMITTED; races are settled by conditional UPDATEs, unique keys and ``SELECT … FOR UPDATE SKIP LOCKED``. A pooled PostgreSQL connection is pinged before use when
it sat idle for ``PING_IDLE_SEC`` or more (SQLAlchemy's pessimistic disconnect handling, without paying a round
trip on every transaction of a run executing steps back to back).
"""

from __future__ import annotations

import os
import select
import threading
import time
import weakref
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from sqlalchemy import Connection, Engine, create_engine, event, exc
from sqlalchemy.engine import make_url

from store.errors import UnsupportedDatabaseError
from store.wal import WAL_PREALLOCATE_PAGES, WalGrowth

if TYPE_CHECKING:
    from store.txconn import TxConnection

SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite connection waits for another process's write lock before it fails with "database is
locked" (SQLite's ``busy_timeout``; ``make_engine``'s default, read when an engine is made), in milliseconds."""
SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT = 5, 517
"""SQLite's result codes (``sqlite3.Error.sqlite_errorcode``; the second an extended code of the first)."""
PING_IDLE_SEC = 1.0
"""A PostgreSQL connection idle in the pool at least this long is checked with ``SELECT 1`` before use."""


def make_engine(
    url: str, *, sqlite_synchronous: str = "FULL", busy_timeout_ms: int | None = None, pool_size: int = 10,
    wal_preallocate_pages: int = WAL_PREALLOCATE_PAGES,
) -> Engine:
    """Create an engine for ``url`` (``sqlite:///path.db`` or ``postgresql+psycopg://…``).

    ``sqlite_synchronous`` is SQLite's ``PRAGMA synchronous`` (FULL: a committed checkpoint survives power
    loss; NORMAL: it survives a process crash). ``busy_timeout_ms``: how long a writer waits for another
    process's write lock (default ``BUSY_TIMEOUT_MS``, 30 s; then ``is_sqlite_busy``). ``wal_preallocate_pages``:
    the frames SQLite's log is grown to before this process's first write (``store.wal``; 0: not grown). All
    three ignored on PostgreSQL.

    A database error's text never holds its statement's parameters (``hide_parameters``: SQLAlchemy writes
    ``[SQL parameters hidden due to hide_parameters=True]`` in their place; ``store.fast`` raises its own so):
    they are a run's state, a person's text, which an error's text carries into logs, tracebacks and the
    error a run stores.

    The pool lends its most recently returned connection first (``pool_use_lifo``): its statements are
    already prepared (the sqlite3 module's statement cache, psycopg's prepared statements) and, on SQLite,
    its page cache is warm, where the default order cycles through every pooled connection
    (``python -m bench``, in-process resumes on SQLite: 600 → 660 per second, resume latency 0.93 → 0.85 ms,
    the first rewind after a run 2.2 → 1.9 ms; A/B alternated on one machine).

    Raises:
        ValueError: unknown ``sqlite_synchronous``.
        UnsupportedDatabaseError: neither SQLite nor PostgreSQL; an in-memory SQLite database (it would keep
            nothing past the process, and each pooled connection would see a database of its own); a PostgreSQL
            driver other than psycopg 3 (``postgresql+psycopg2://``: the statements of ``store.steps`` are
            psycopg's).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise UnsupportedDatabaseError(
            "an in-memory SQLite database keeps nothing past the process (no run, no checkpoint): use "
            "sqlite:///FILE (a file path)")
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "psycopg":
        raise UnsupportedDatabaseError(
            f"PostgreSQL driver {parsed.get_driver_name()!r}: Hazel talks to PostgreSQL through psycopg 3, "
            "use postgresql+psycopg://…")
    if parsed.get_backend_name() == "sqlite":
        busy_timeout_ms = BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms
        if sqlite_synchronous.upper() not in SQLITE_SYNCHRONOUS:
            raise ValueError(f"sqlite_synchronous must be one of {SQLITE_SYNCHRONOUS}")
        engine = create_engine(
            url,
            connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
            pool_size=pool_size,
            max_overflow=20,
            pool_use_lifo=True,
            hide_parameters=True,
        )
        _sqlite_hooks(engine, sqlite_synchronous.upper(), busy_timeout_ms)
        if not parsed.database.startswith("file:"):
            path = os.path.realpath(parsed.database)
            turns = _WriteTurns.of(path, busy_timeout_ms / 1000)
            if wal_preallocate_pages > 0:
                turns.growth = WalGrowth(engine, path, wal_preallocate_pages)
            _WRITE_TURNS[engine] = turns
        return engine
    if parsed.get_backend_name() == "postgresql":
        # connect_timeout: an unreachable server fails fast (health checks answer 503 instead of hanging)
        engine = create_engine(url, pool_size=pool_size, max_overflow=20, pool_use_lifo=True,
                               connect_args={"connect_timeout": 10}, hide_parameters=True)
        _ping_idle_connections(engine)
        return engine
    raise UnsupportedDatabaseError(
        f"unsupported database {parsed.get_backend_name()!r}: use sqlite:///FILE or postgresql+psycopg://…")


def unopened_why(url: str) -> str:
    """Why SQLite could not open the file of ``url`` (its error says only "unable to open database file"):
    ``" (the directory /srv/x does not exist)"``, ``" (… is a directory)"``, ``" (the directory … is not
    writable by this user)"``; ``""`` when none of these is so (or ``url`` is not a SQLite file's)."""
    try:
        parsed = make_url(url)
    except Exception:  # (named on its own: not a URL)
        return ""
    name = parsed.database or ""
    if not parsed.drivername.startswith("sqlite") or not name or name == ":memory:":
        return ""
    if parsed.query.get("uri") in ("true", "1") and name.startswith("file:"):
        name = name.removeprefix("file:").split("?", 1)[0]
    path = os.path.abspath(name)
    directory = os.path.dirname(path)
    if os.path.isdir(path):
        return f" ({path} is a directory)"
    if not os.path.isdir(directory):
        return f" (the directory {directory} does not exist: create it first)"
    if not os.path.exists(path) and not os.access(directory, os.W_OK | os.X_OK):
        return f" (the directory {directory} is not writable by this user, and the database file is new)"
    if os.path.exists(path) and not os.access(path, os.R_OK):
        return f" ({path} is not readable by this user)"
    return ""


def is_sqlite_busy(exc: BaseException) -> bool:
    """Whether ``exc`` (the driver's ``sqlite3.OperationalError``, SQLAlchemy's error wrapping one, or an error
    raised from either) is SQLite's ``SQLITE_BUSY``, "database is locked": another connection (another process:
    this process's writers take turns first, ``write_turn``) held the write lock for the whole busy timeout. The
    transaction that met it wrote nothing. Not ``SQLITE_BUSY_SNAPSHOT``, which fails at once: a read snapshot
    older than the last commit (``opened_cursor``), no wait for anyone."""
    seen: BaseException | None = exc
    for _ in range(5):  # the error, its driver error (``orig``), what it was raised from
        if seen is None:
            return False
        code = getattr(seen, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF == SQLITE_BUSY and code != SQLITE_BUSY_SNAPSHOT
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


def relaxed_level(synchronous: str) -> str:
    """SQLite's ``synchronous`` for a commit that need not wait for the disk, under the store's ``synchronous``:
    NORMAL under FULL or EXTRA, the store's own level otherwise (already as relaxed or more)."""
    level = synchronous.upper()
    return "NORMAL" if level in ("FULL", "EXTRA") else level


def _sqlite_hooks(engine: Engine, synchronous: str, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (SQLAlchemy's pysqlite recipe)
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        _record.info["hazel_synchronous"] = synchronous  # the connection's level (changed per transaction)
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()
        _log_may_be_new(engine)

    @event.listens_for(engine, "close")
    def _on_close(_dbapi_conn, _record):  # noqa: ANN001
        _log_may_be_new(engine)  # (SQLite deletes the log when the last connection to the file closes)

    levels = (synchronous, relaxed_level(synchronous))
    _SQLITE_LEVELS[engine] = levels

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:  # a transaction SQLAlchemy begins (Alembic's, ``engine.begin()``)
        # a writer's unless the connection says ``hazel_write=False`` (``store.migrate.current_revision``)
        options = conn.get_execution_options()
        if options.get(BEGUN):  # a ``transaction``'s: begun already
            return
        sqlite_begin(conn.connection, levels, write=options.get("hazel_write", True),
                     durable=options.get("hazel_durable", True))


def _log_may_be_new(engine: Engine) -> None:
    """A connection of ``engine`` opened or closed: its next write looks at the log's size first."""
    turns = _WRITE_TURNS.get(engine)
    if turns is not None and turns.growth is not None:
        turns.growth.connected()


_SQLITE_LEVELS: "weakref.WeakKeyDictionary[Engine, tuple[str, str]]" = weakref.WeakKeyDictionary()
"""Each SQLite engine's ``synchronous`` and the relaxed level of its commits that need not wait for the disk."""

BEGUN = "hazel_begun"
"""The execution option of a SQLAlchemy ``Connection`` made over a transaction already begun (``store.txconn``)."""


def sqlite_begin(fairy: object, levels: tuple[str, str], *, write: bool, durable: bool) -> None:
    """Begin a transaction on a pooled SQLite connection: ``BEGIN IMMEDIATE`` for a writer (``BEGIN`` for a
    reader), after setting the connection's ``synchronous`` to what the transaction needs (NORMAL for a commit
    that need not wait for the disk; SQLite refuses the change inside a transaction), only when it differs from
    the connection's last one. Straight to sqlite3, without SQLAlchemy's execution context."""
    synchronous, relaxed = levels
    sqlite_level(fairy, synchronous, synchronous if durable else relaxed)
    fairy.driver_connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")  # type: ignore[attr-defined]


def sqlite_level(fairy: object, synchronous: str, level: str) -> None:
    """Set a pooled SQLite connection's ``synchronous`` to ``level`` for its next commit (outside a
    transaction: SQLite refuses the change inside one), unless it is there already: the connection's last level
    is kept in its pool record's ``info`` (``synchronous``, the engine's, until first changed)."""
    info = fairy.info  # type: ignore[attr-defined]
    if info.get("hazel_synchronous", synchronous) != level:
        fairy.driver_connection.execute(f"PRAGMA synchronous={level}")  # type: ignore[attr-defined]
        info["hazel_synchronous"] = level


def _ping_idle_connections(engine: Engine) -> None:
    """``pool_pre_ping`` for connections idle ``PING_IDLE_SEC`` or more, and for any connection the server has
    written to since its last answer. A failed ping raises ``DisconnectionError``, on which the pool discards
    the connection and checks out another (SQLAlchemy, "Disconnect Handling - Pessimistic", custom checkout
    event). When that other one fails its ping too, the ping's driver error is raised (marked
    ``POOL_INVALIDATED``; the pool discards that connection as well): the pool would try once more and then
    give up with ``InvalidRequestError("This connection is closed")``, which says nothing of an outage.

    A connection idle in the pool has nothing to read, unless the server spoke on its own: a backend ended by
    ``pg_terminate_backend``, a server shutting down or restarting sends its error and closes the socket. That
    is checked without a round trip (``select`` with no wait on the socket): the pool lends the connection used
    last first, which is the one least likely to have been idle long enough to be pinged, and without this the
    first request after a restart met the dead connection (answered 503)."""

    @event.listens_for(engine.pool, "connect")
    def _on_connect(_dbapi_conn, record):  # noqa: ANN001
        record.info["hazel_idle_since"] = time.monotonic()

    @event.listens_for(engine.pool, "checkin")
    def _on_checkin(_dbapi_conn, record):  # noqa: ANN001
        if record is not None:
            record.info["hazel_idle_since"] = time.monotonic()

    driver_error = engine.dialect.loaded_dbapi.Error

    @event.listens_for(engine.pool, "checkout")
    def _on_checkout(dbapi_conn, record, proxy):  # noqa: ANN001
        if time.monotonic() - record.info.get("hazel_idle_since", 0.0) < PING_IDLE_SEC and not _spoke(dbapi_conn):
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as error:
            if getattr(proxy, _PING_FAILED, False) and isinstance(error, driver_error):
                # the connection opened in place of a dead one is dead too (backends being terminated, a
                # server going down): the driver's error, not a third try (after which the pool gives up with
                # ``InvalidRequestError: This connection is closed``, an error no caller takes for an outage)
                setattr(error, POOL_INVALIDATED, True)
                raise
            setattr(proxy, _PING_FAILED, True)  # (the pool lends a new proxy for each checkout)
            raise exc.DisconnectionError(f"pooled connection failed its ping: {error}") from error


_PING_FAILED = "_hazel_ping_failed"
POOL_INVALIDATED = "hazel_pool_invalidated"
"""Set (True) on a driver error that the pool's checkout raised after discarding the connection it concerns
(``store.txconn.TxConnection.begin`` raises it with ``connection_invalidated``)."""


def _spoke(dbapi_conn: object) -> bool:
    """True when the server wrote to this idle connection's socket (or closed it), or the socket is gone."""
    try:
        readable, _, _ = select.select([dbapi_conn.fileno()], [], [], 0)  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):  # closed, or no socket to look at: let the ping decide
        return True
    return bool(readable)


class _WriteTurns:
    """The lock that a process's write transactions on one SQLite file take before ``BEGIN IMMEDIATE`` (see
    the module docstring); one per file, shared by every engine of the process on it."""

    _by_path: dict[str, threading.Lock] = {}
    _guard = threading.Lock()

    def __init__(self, lock: threading.Lock, timeout_sec: float) -> None:
        self.lock = lock
        self.timeout_sec = timeout_sec
        self.growth: WalGrowth | None = None
        """The engine's log growth (``store.wal``), run in the first turn after a connection opened or closed."""

    @classmethod
    def of(cls, path: str, timeout_sec: float) -> "_WriteTurns":
        with cls._guard:
            lock = cls._by_path.setdefault(path, threading.Lock())
        return cls(lock, timeout_sec)


_WRITE_TURNS: "weakref.WeakKeyDictionary[Engine, _WriteTurns]" = weakref.WeakKeyDictionary()


def write_turns(engine: Engine) -> _WriteTurns | None:
    """The turns of this process's writers to ``engine``'s SQLite file (one lock per file, whatever the
    engine); None on PostgreSQL."""
    return _WRITE_TURNS.get(engine)


@contextmanager
def write_turn(engine: Engine) -> Iterator[None]:
    """This process's turn to write to ``engine``'s SQLite file (see the module docstring), for the whole
    block: ``transaction`` takes it, and so does code that sends ``BEGIN IMMEDIATE`` itself (``store.steps``,
    ``store.lgraph_writer``). Waits at most the busy timeout, after which SQLite's own lock decides. Nothing on
    PostgreSQL."""
    turns = _WRITE_TURNS.get(engine)
    held = take_turn(turns)
    try:
        yield
    finally:
        if held:
            turns.lock.release()  # type: ignore[union-attr]


def take_turn(turns: _WriteTurns | None) -> bool:
    """Wait for this process's turn to write (``write_turns``; at most the busy timeout). True when taken: the
    caller releases ``turns.lock`` when its transaction ends. False on PostgreSQL (None), or after the wait.
    The first turn after the engine's pool opened or closed a connection grows SQLite's log first if it is
    short (``store.wal``)."""
    if turns is None:
        return False
    held = turns.lock.acquire(timeout=turns.timeout_sec)
    growth = turns.growth
    if held and growth is not None and growth.pending:
        try:
            growth.run()  # (never raises; but a turn taken is always handed back to the caller)
        except BaseException:
            turns.lock.release()
            raise
    return held


@contextmanager
def transaction(engine: Engine, *, write: bool = True, durable: bool = True,
                snapshot: bool = True) -> Iterator["TxConnection"]:
    """One database transaction: committed when the block ends, rolled back if it raises. Yields its
    connection (``store.txconn.TxConnection``: what ``store.fast`` executes on, and a SQLAlchemy ``Connection``
    for everything else).

    ``durable=False``: the commit does not wait for the disk (SQLite ``synchronous=NORMAL`` instead of FULL;
    PostgreSQL ``SET LOCAL synchronous_commit TO OFF``, one more statement). The transaction survives a crash of
    the process at once, and a power loss (or a crash of the PostgreSQL server) from the next durable commit on
    the same database, whose wait for the disk covers everything written before it.

    ``snapshot`` (readers, ``write=False``, on PostgreSQL): REPEATABLE READ when True, READ COMMITTED when False
    (``store.txconn.TxConnection.begin``). SQLite's transactions always read one snapshot.

    On SQLite a write transaction first waits for its turn among this process's writers to the same file (at
    most the busy timeout; after that ``BEGIN IMMEDIATE`` waits and fails as it would have). A transaction that
    fails closes the cursors it left unread (``opened_cursor``) before its rollback.

    Raises:
        sqlalchemy.exc.DBAPIError: the database failed to begin, commit (``OperationalError`` when the
            connection broke; nothing was committed then, or it is not known) or execute a statement inside.
    """
    from store.txconn import TxConnection

    turns = _WRITE_TURNS.get(engine) if write else None
    held = take_turn(turns)
    try:
        conn = TxConnection.begin(engine, _SQLITE_LEVELS.get(engine), write=write, durable=durable,
                                  snapshot=snapshot)
        cursors = conn.info.setdefault(_OPEN_CURSORS, [])
        try:
            yield conn
        except BaseException:
            _close_all(cursors)  # before the rollback and before the connection goes back to the pool
            cursors.clear()
            conn.end(commit=False)
            raise
        cursors.clear()
        conn.end(commit=True)
    finally:
        if held:
            turns.lock.release()


_OPEN_CURSORS = "hazel_open_cursors"


def opened_cursor(conn: Connection, cursor: object) -> None:
    """Note a DBAPI cursor opened inside ``transaction`` whose rows may not be read (``store.fast.execute``):
    if the transaction fails, it is closed before the rollback. On SQLite an unread SELECT keeps its statement
    active, and with it a read transaction on the connection after the rollback: the next ``BEGIN IMMEDIATE``
    on that pooled connection then fails at once with "database is locked" (its snapshot is older than the
    last commit), for as long as the cursor lives, and a failed transaction's cursors live as long as its
    traceback (until the garbage collector frees the cycle). Seen: one refused rewind wedged every writer of
    ``hazel serve``."""
    conn.info.setdefault(_OPEN_CURSORS, []).append(cursor)


def _close_all(cursors: list) -> None:
    for cursor in cursors:
        try:
            cursor.close()
        except Exception:  # a connection that broke: nothing left to release
            pass


def unreachable_reason(url: str, *, timeout_sec: int = 3) -> str | None:
    """None when the database at ``url`` answers ``SELECT 1``, else why not (one line, no password)."""
    engine = create_engine(url, connect_args={"connect_timeout": timeout_sec}
                           if make_url(url).get_backend_name() == "postgresql" else {})
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        return None
    except Exception as exc:  # any failure to connect means "unreachable"
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"{type(exc).__name__}: {first}"
    finally:
        engine.dispose()


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"
