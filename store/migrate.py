"""Alembic, driven from code: the migration scripts ship inside the ``store`` package.

Every command checks the schema before it starts (``ensure``). That check reads the version table with one plain
query and compares it with ``HEAD``; Alembic (and the Mako templates it pulls in, ~65 ms of imports) is loaded
only to migrate or when the revisions differ. ``tests/store/test_migrations.py`` keeps ``HEAD`` equal to the
newest script's revision.

Creating or upgrading the schema is serialized across processes (``schema_lock``): two or three first starts
at once on an empty database (``hazel serve`` beside two ``hazel worker``) used to race, one creating the tables
while another saw them half-made ("schema revision unknown") or, on PostgreSQL, created them too ("duplicate
key value violates unique constraint pg_type_typname_nsp_index"). Now one migrates; the others wait for its
lock, read the revision again and go on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from typing import TYPE_CHECKING, Any, Iterator

from sqlalchemy import bindparam, column, inspect, select, table, text
from sqlalchemy.exc import DBAPIError, ProgrammingError

from store import fast
from store.errors import SchemaNotReadyError
from store.schema import VERSION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Engine

SCRIPT_LOCATION = "store:migrations"
HEAD = "0009"
"""The revision of the newest script in ``store/migrations/versions`` (what ``hazel db upgrade`` reaches)."""
LOCK_WAIT_SEC = 60.0
"""How long a process waits for another one's schema creation or upgrade before giving up."""
PG_LOCK_KEY = 0x48617A656C_01
"""The PostgreSQL advisory lock key (``pg_advisory_lock``) of schema changes: "Hazel" in ASCII, then 01."""
SQLITE_LOCK_SUFFIX = ".hazel-migrate.lock"
"""Next to the SQLite file: the file ``flock``ed while the schema is changed (removed by its holder)."""
_POLL_SEC = 0.05


def _config(engine: Engine | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    if engine is not None:
        cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str:
    """The newest revision among the migration scripts, as Alembic reads them (``HEAD`` is the cached answer)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config()).get_current_head() or ""


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None when it has no version table (or an empty one).

    A read: on SQLite its transaction is a plain ``BEGIN`` (``store.db``'s begin hook makes every other
    transaction SQLAlchemy begins a writer's ``BEGIN IMMEDIATE``), so that the check every command starts with
    (``ensure``) and ``/healthz`` (``Store.health``) answer while another process holds the write lock: in WAL
    mode a reader never waits for a writer.

    Raises:
        sqlalchemy.exc.DBAPIError: the database failed otherwise (unreachable, the connection lost).
    """
    with engine.connect().execution_options(hazel_write=False) as conn:
        try:
            return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
        except DBAPIError as exc:  # no version table: a database Alembic has never touched
            if exc.connection_invalidated or not no_such_table(exc):
                raise
            return None


def no_such_table(exc: DBAPIError) -> bool:
    """Whether ``exc`` says the queried table does not exist (PostgreSQL's UndefinedTable, a
    ``ProgrammingError``; SQLite's "no such table")."""
    from sqlalchemy.exc import ProgrammingError

    return isinstance(exc, ProgrammingError) or "no such table" in str(exc.orig)


def behind(current: str | None) -> str | None:
    """Why a running process of this Hazel cannot work on a database at schema revision ``current`` (None: no
    version table): the schema lacks what this Hazel's migrations add (a ``hazel db downgrade`` under it), in
    the words every command refuses with; None at ``HEAD`` or above. A newer revision is not a problem for a
    process already running: migrations only add (expand first), so that a rolling deploy migrates with the new
    release while the old processes keep working, until they are rolled (a process of this Hazel refuses to
    *start* on it: ``check_not_newer``). Reads no migration script (no Alembic: cheap enough for every health
    probe): revisions are compared as the zero-padded numbers they are."""
    if current is None:
        return "the database has no Hazel schema revision (no version table): run `hazel db upgrade`"
    if current >= HEAD:
        return None
    return _behind(current, HEAD)


ORPHANED = (f"the database has Hazel's tables but no schema revision ({VERSION_TABLE} is gone or empty): Hazel "
            "cannot tell which migrations ran; restore it from a backup, or record the revision it is at with "
            "`hazel db stamp REVISION` (the newest migration of the Hazel that last ran on it, `hazel db current` "
            "there)")
"""What a database that lost its revision row (or its version table) is told: ``hazel db upgrade`` would create
the tables again and fail (``table … already exists``), and every command sent the person there."""


def orphaned(engine: Engine, current: str | None) -> bool:
    """Whether the database, at revision ``current`` (``current_revision``), has Hazel's tables without a
    revision: ``current`` is None and a ``hazel_`` table other than the version table exists."""
    return current is None and any(t.startswith("hazel_") and t != VERSION_TABLE
                                   for t in inspect(engine).get_table_names())


def stamp(engine: Engine, revision: str) -> None:
    """Record that the database is at ``revision`` (one of this Hazel's) without running a migration
    (Alembic's ``stamp``), holding ``schema_lock``: for a database whose tables are at that revision but whose
    version row was lost (``ORPHANED``), and only for such a one: a database that has a revision, or no Hazel
    tables, is refused (stamped, it would claim tables it lacks; a fresh-user finding, s29).

    Raises:
        ValueError: ``revision`` is not one of this Hazel's revisions; the database has a revision (``hazel db
            upgrade`` / ``downgrade`` move it) or no Hazel tables (``hazel db upgrade`` creates them).
        SchemaLockTimeoutError: another process kept changing the schema longer than ``LOCK_WAIT_SEC``.
    """
    from alembic import command

    if revision not in known_revisions():
        raise ValueError(f"unknown schema revision {revision!r}; this Hazel knows "
                         f"{', '.join(sorted(known_revisions()))}")
    with schema_lock(engine):
        before = current_revision(engine)
        if before is not None:
            raise ValueError(f"the database is at schema revision {before}: `hazel db stamp` only records a lost "
                             "one; `hazel db upgrade` and `hazel db downgrade` move it (nothing changed)")
        if not orphaned(engine, before):
            raise ValueError("the database has no Hazel tables: nothing to stamp; `hazel db upgrade` creates them "
                             "(nothing changed)")
        problem = _not_at(engine, revision)
        if problem is not None:
            raise ValueError(f"{problem} (nothing changed)")
        command.stamp(_config(engine), revision, purge=True)


def _not_at(engine: Engine, revision: str) -> str | None:
    """Why the database's Hazel tables are not those of ``revision`` (None: they are, every table and column of
    it and none beyond): what they lack or hold beyond it, and the revision whose tables they are when one
    matches. Stamped, a revision the tables are not at was a typo nothing in the CLI could undo: an older one
    on the newest tables (``db upgrade`` failed on ``duplicate column``, s30 F5), the newest on older tables (a
    run failed on ``no such column``, s31 F6), one in between on tables before it (``db upgrade`` said it
    succeeded and every command failed after: s33 F2)."""
    have = _shape(engine)
    wanted = schema_at(revision)
    if have == wanted:
        return None
    matches = [r for r in sorted(known_revisions(), reverse=True) if schema_at(r) == have]
    match = matches[0] if matches else None
    if len(matches) > 1:  # (0004 and 0005 make the same tables: 0005 rewrites data only; s34 F10)
        named = " or ".join(sorted(matches))
        return (f"the tables are those of revision {named}, not {revision}'s (each of those makes the same tables): "
                "record the newest migration of the Hazel that last ran on it, `hazel db stamp "
                f"{min(matches)}` when you cannot tell (an upgrade then runs the later ones again)")
    if match is not None and match > revision:
        newest = ", this Hazel's newest" if match == HEAD else ""
        return (f"the tables are those of revision {match}{newest} (every table and column it has is there), not "
                f"{revision}'s: `hazel db stamp {match}`")
    lacking = sorted(wanted - have)
    if lacking:
        shown = _first_five(lacking)
        if match is None:
            return (f"the tables lack what revision {revision} has ({shown}) and match no revision of this Hazel "
                    "(changed by hand?); restore the database from a backup")
        return (f"the tables lack what revision {revision} has ({shown}): they are at an older revision; `hazel db "
                f"stamp {match}`, then `hazel db upgrade`")
    shown = _first_five(sorted(have - wanted))
    if match is not None:  # (older: revision dropped what they hold)
        return (f"the tables hold what revision {revision} has not ({shown}): they are those of revision {match}; "
                f"`hazel db stamp {match}`, then `hazel db upgrade`")
    return (f"the tables hold what revision {revision} has not ({shown}): they match no revision of this Hazel "
            "(changed by hand?); restore the database from a backup")


def _first_five(names: list[str]) -> str:
    """``a, b, c, d, e and 3 more``: the first five of ``names``, and how many more."""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _shape(engine: Engine) -> frozenset[str]:
    """The database's Hazel tables, their columns and their indexes (``table``, ``table.column``, ``index
    name``), the version table left out. (0007 differs from 0006 in an index only; 0005 makes the same ones as
    0004: it rewrites data. PostgreSQL lists the index behind a unique constraint too, SQLite does not: it is
    left out.)"""
    seen = inspect(engine)
    out: set[str] = set()
    for name in seen.get_table_names():
        if name.startswith("hazel_") and name != VERSION_TABLE:
            out.add(name)
            out.update(f"{name}.{c['name']}" for c in seen.get_columns(name))
            out.update(f"index {i['name']}" for i in seen.get_indexes(name) if not i.get("duplicates_constraint"))
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def schema_at(revision: str) -> frozenset[str]:
    """The Hazel tables, columns and indexes (``_shape``) a database has at ``revision``: this Hazel's migrations
    up to it, run on a scratch SQLite file (they make the same on PostgreSQL; about 0.2 s a revision; kept for
    the process)."""
    import tempfile

    from alembic import command
    from sqlalchemy import create_engine

    with tempfile.TemporaryDirectory() as scratch:
        engine = create_engine(f"sqlite:///{scratch}/schema.db")
        try:
            command.upgrade(_config(engine), revision)
            return _shape(engine)
        finally:
            engine.dispose()


def _behind(current: str | None, head: str) -> str:
    return f"the database is at schema revision {current or 'unknown'}, this Hazel needs {head}: run `hazel db upgrade`"


_SQLITE_SCHEMA_WORDS = ("no such column", "no such table", "has no column named")
"""SQLite's words for a statement naming a table or column the database does not have (an ``OperationalError``,
the class of an outage's errors too)."""
_PG_SCHEMA_STATES = ("42P01", "42703")
"""PostgreSQL's ``undefined_table`` and ``undefined_column`` (a ``ProgrammingError``)."""


def names_missing_schema(exc: BaseException) -> bool:
    """Whether ``exc`` (SQLAlchemy's database error, or the driver's own) says a statement named a table or
    column the database does not have: a schema that is not this Hazel's (a ``hazel db downgrade`` under a
    running process), not a database that is down, although SQLite raises it as an ``OperationalError``. Reads
    the error only (``behind`` tells whether the revision is older)."""
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "sqlstate", None) in _PG_SCHEMA_STATES:
        return True
    said = str(orig)
    return type(orig).__module__ == "sqlite3" and any(words in said for words in _SQLITE_SCHEMA_WORDS)


_VERSIONS = table(VERSION_TABLE, column("version_num"))
_CURRENT = select(_VERSIONS.c.version_num)
_AT_HEAD = select(_VERSIONS.c.version_num).where(_VERSIONS.c.version_num >= bindparam("head")).cte("at_head")
_GUARD_AT_HEAD = fast.guarded(_AT_HEAD, select(_AT_HEAD.c.version_num))
"""PostgreSQL: the revision, failing the statement (``store.fast.guarded``) unless it is ``HEAD`` or newer."""


def require_head(conn: Any) -> "fast.Result | None":
    """Check, inside the transaction of ``conn`` (a ``store.db.transaction``'s), that the database is at the
    revision this Hazel needs (``HEAD``) or a newer one (``behind``), with one statement of the version table's
    one row. In a PostgreSQL transaction that commits with its statements (``conn.guarding``: ``Tx.pipeline(
    commit=True)``) the statement is sent with the others, no round trip of its own, and fails the transaction
    itself (COMMIT included) when the revision is older: returns its ``Result`` then (the caller reads it once
    the pipeline has ended, releasing its cursor, and tells a failure by ``refusal`` once the pipeline raises).
    Elsewhere the revision is read and compared at once (None).

    Raises:
        SchemaNotReadyError: (read at once) the revision is older than ``HEAD``, or there is no version table.
    """
    if getattr(conn, "guarding", False):
        return fast.execute(conn, _GUARD_AT_HEAD, {"head": HEAD})
    try:
        current = fast.execute(conn, _CURRENT, {}).scalar()
    except DBAPIError as exc:
        if exc.connection_invalidated or not names_missing_schema(exc):
            raise
        raise SchemaNotReadyError(behind(None)) from exc
    said = behind(current)
    if said is not None:
        raise SchemaNotReadyError(said)
    return None


def refusal(engine: Engine, exc: DBAPIError) -> SchemaNotReadyError | None:
    """After the pipeline of a transaction that sent ``require_head``'s guard raised ``exc``: the
    ``SchemaNotReadyError`` to raise instead when the schema is why (``exc`` is a guard's failure or names a
    table the database lacks, and the revision, read again on another connection of ``engine``, is older than
    ``HEAD``); None when it is not (``exc`` stands: another guard's failure, an outage). Reads nothing for an
    outage's error."""
    if not (fast.guard_failed(exc) or isinstance(exc, ProgrammingError) and names_missing_schema(exc)):
        return None
    try:
        said = behind(current_revision(engine))
    except DBAPIError:
        return None
    return SchemaNotReadyError(said) if said is not None else None


def known_revisions() -> set[str]:
    """Every revision among this Hazel's migration scripts."""
    from alembic.script import ScriptDirectory

    return {script.revision for script in ScriptDirectory.from_config(_config()).walk_revisions()}


class SchemaTooNewError(SchemaNotReadyError):
    """The database is at a revision this Hazel has no script for: a newer Hazel migrated it. Neither running
    nor ``hazel db upgrade`` can work with it (Alembic cannot go from a revision it does not know); a newer Hazel
    is needed."""

    def __init__(self, current: str, head: str) -> None:
        super().__init__(f"the database is at schema revision {current!r}, newer than this Hazel (which knows "
                         f"revisions up to {head}): use a newer Hazel with this database")
        self.current, self.head = current, head


def check_not_newer(engine: Engine, current: str | None = None) -> None:
    """Refuse a database whose revision no script of this Hazel knows (``current``: its revision, when the
    caller has read it).

    Raises:
        SchemaTooNewError: the database is at an unknown (newer) revision.
    """
    current = current_revision(engine) if current is None else current
    if current is not None and current not in known_revisions():
        raise SchemaTooNewError(current, head_revision())


class SchemaLockTimeoutError(SchemaNotReadyError):
    """Another process kept the schema lock (it was creating or upgrading the schema) longer than we waited."""


@contextlib.contextmanager
def schema_lock(engine: Engine, *, wait_sec: float = LOCK_WAIT_SEC) -> Iterator[None]:
    """Hold the cross-process lock of schema changes on ``engine``'s database for the ``with`` block.

    PostgreSQL: the session advisory lock ``PG_LOCK_KEY``, on a connection of its own (Alembic migrates on
    another one). SQLite file: ``flock`` on ``<file>.hazel-migrate.lock``, which the holder removes before it
    lets go (a waiter that then holds a removed file's lock tries again). An in-memory SQLite database (one
    process) takes no lock. Not re-entrant: a process holding it must not ask for it again.

    Raises:
        SchemaLockTimeoutError: another process held the lock longer than ``wait_sec`` seconds.
    """
    deadline = time.monotonic() + wait_sec
    if engine.dialect.name == "postgresql":
        with _pg_lock(engine, deadline, wait_sec):
            yield
        return
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    try:
        import fcntl  # noqa: F401  (POSIX only)
    except ImportError:  # pragma: no cover - Windows: no cross-process lock
        yield
        return
    folder = os.path.dirname(os.path.realpath(database))
    if not os.path.isdir(folder):  # (the lock file could not be made: "unexpected FileNotFoundError")
        raise SchemaNotReadyError(f"the SQLite database {database} cannot be created: its directory {folder} "
                                  "does not exist (create it, or point HAZEL_DATABASE_URL elsewhere)")
    with _file_lock(os.path.realpath(database) + SQLITE_LOCK_SUFFIX, deadline, wait_sec):
        yield


def _timeout(wait_sec: float) -> SchemaLockTimeoutError:
    return SchemaLockTimeoutError(
        f"another process has been creating or upgrading the database schema for over {wait_sec:g} s: "
        "try again once it is done (or run `hazel db upgrade`)")


@contextlib.contextmanager
def _pg_lock(engine: Engine, deadline: float, wait_sec: float) -> Iterator[None]:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        while not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": PG_LOCK_KEY}).scalar():
            if time.monotonic() > deadline:
                raise _timeout(wait_sec)
            time.sleep(_POLL_SEC)
        try:
            yield
        finally:
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_LOCK_KEY})
            except DBAPIError:  # the connection broke: the server dropped the lock with the session
                conn.invalidate()


@contextlib.contextmanager
def _file_lock(path: str, deadline: float, wait_sec: float) -> Iterator[None]:
    import fcntl

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise _timeout(wait_sec) from None
                    time.sleep(_POLL_SEC)
            try:
                on_disk = os.stat(path)
            except FileNotFoundError:
                on_disk = None
            mine = os.fstat(fd)
            if on_disk is not None and (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino):
                break  # the lock of the file that is still there: ours
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # its holder removed it before we got it: lock the new one
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # before letting go: a waiter finds it gone and tries again
        os.close(fd)


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Run every migration up to ``revision`` on ``engine``'s database, holding ``schema_lock``. Returns the
    revision the database was at when the lock was taken (None: empty), so that of two upgrades at once only the
    one that migrated reports a change.

    Raises:
        SchemaTooNewError: the database is at a revision newer than this Hazel's scripts.
        SchemaNotReadyError: the database has Hazel's tables without a revision (``ORPHANED``).
        SchemaLockTimeoutError: another process kept changing the schema longer than ``LOCK_WAIT_SEC``.
    """
    with schema_lock(engine):
        before = current_revision(engine)
        if orphaned(engine, before):  # (Alembic would create every table again: "table … already exists")
            raise SchemaNotReadyError(ORPHANED)
        _upgrade(engine, revision)
    return before


def _upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    check_not_newer(engine)
    command.upgrade(_config(engine), revision)


GRAPH_STATE_REVISION = "0004"
"""The migration that created the LangGraph saver's tables: undoing it drops every graph run's checkpoints."""


def downgrade(engine: Engine, revision: str, *, discard_graph_state: bool = False) -> None:
    """Undo the migrations after ``revision`` (one of this Hazel's revisions, e.g. ``0003``) on ``engine``'s
    database: the step before rolling back to an older Hazel whose newest revision is ``revision``. Going
    below ``GRAPH_STATE_REVISION`` drops the LangGraph saver's tables; while they hold checkpoints it is
    refused unless ``discard_graph_state`` (the graph runs they belong to could not resume, be rewound or
    retried), and refused even then while a graph run is not ended (waiting, ready or running: it would be left
    so with no state to resume from).

    Raises:
        SchemaTooNewError: the database is at a revision newer than this Hazel's scripts.
        ValueError: ``revision`` is not one of this Hazel's revisions, or is above the database's (an empty
            database's: any); graph checkpoints would be dropped.
        SchemaLockTimeoutError: another process kept changing the schema longer than ``LOCK_WAIT_SEC``.
    """
    from alembic import command

    with schema_lock(engine):
        check_not_newer(engine)
        if revision not in known_revisions():
            raise ValueError(f"unknown schema revision {revision!r}; this Hazel knows "
                             f"{', '.join(sorted(known_revisions()))}")
        current = current_revision(engine)
        if current is None or revision > current:  # (Alembic: "is not a valid downgrade target", unexplained)
            raise ValueError(f"the database is at revision {current or 'none (empty)'}: {revision} is not below "
                             f"it, so there is nothing to downgrade to it (hazel db upgrade goes up)")
        if current is not None and current >= GRAPH_STATE_REVISION > revision:
            with engine.connect() as conn:
                threads, live = conn.execute(text(
                    "SELECT COUNT(DISTINCT c.thread_id), COUNT(DISTINCT CASE WHEN r.status IN ('waiting', 'ready', "
                    "'running') THEN c.thread_id END) FROM hazel_lg_checkpoints c "
                    "LEFT JOIN hazel_runs r ON r.id = c.thread_id")).one()
            if discard_graph_state and live:  # (left waiting, such a run took a decision, then failed from an
                raise ValueError(  # empty thread: s21 M2)
                    f"downgrading to {revision} would discard the graph state of {live} run(s) not ended, which "
                    "would be left waiting with nothing to resume from: cancel them first (hazel runs --status "
                    "waiting), then downgrade with --discard-graph-state")
            if threads and not discard_graph_state:  # (an ended run's kept checkpoint counts too: s21)
                raise ValueError(
                    f"downgrading to {revision} drops the LangGraph checkpoints of {threads} graph thread(s) "
                    f"(the tables of migration {GRAPH_STATE_REVISION}), {live} of them of runs not ended: those "
                    "could not resume, and no graph run could be rewound or retried; cancel the runs not ended "
                    "first (hazel runs --status waiting), then discard the state with --discard-graph-state")
        command.downgrade(_config(engine), revision)


def ensure(engine: Engine, *, upgrade_if_empty: bool = True) -> None:
    """Create the schema on an empty database; refuse to run on an out-of-date one.

    A database at ``HEAD`` is answered with one query, without a lock (a read, ``current_revision``: on SQLite
    not SQLite's write lock either, so that a command that only reads answers beside another process's writer).
    Otherwise the check (and the creation) runs under ``schema_lock``, reading the revision again once it holds
    it: a process that started beside another one creating the schema waits for it, then finds the schema made.

    Raises:
        SchemaTooNewError: the database is at a revision newer than this Hazel (a newer Hazel is needed).
        SchemaNotReadyError: the database has Hazel tables at an older revision, or is empty and
            ``upgrade_if_empty`` is False.
        SchemaLockTimeoutError: another process kept changing the schema longer than ``LOCK_WAIT_SEC``.
    """
    try:
        if current_revision(engine) == HEAD:
            return
    except DBAPIError as exc:
        # SQLite: another process is turning a new file into WAL and creating its schema, and a journal mode
        # change does not wait out the busy timeout: wait on the schema lock instead, then read again
        if "locked" not in str(exc):
            raise
    with schema_lock(engine):
        _ensure_while_locked(engine, upgrade_if_empty=upgrade_if_empty)


def _ensure_while_locked(engine: Engine, *, upgrade_if_empty: bool, wait_sec: float = LOCK_WAIT_SEC) -> None:
    """``_ensure``; on SQLite, while another process's first connection is turning the new file into WAL (a
    journal mode change neither waits out the busy timeout nor takes the schema lock), "database is locked"
    is waited out (tries every 50 ms, at most ``wait_sec``)."""
    deadline = time.monotonic() + wait_sec
    while True:
        try:
            return _ensure(engine, upgrade_if_empty=upgrade_if_empty)
        except DBAPIError as exc:
            if "locked" not in str(exc) or engine.dialect.name != "sqlite" or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _ensure(engine: Engine, *, upgrade_if_empty: bool) -> None:
    current = current_revision(engine)
    if current == HEAD:
        return
    head = head_revision()
    if current == head:
        return
    if current is None and not orphaned(engine, current):
        if upgrade_if_empty:
            _upgrade(engine)
            return
        raise SchemaNotReadyError("the database has no Hazel tables: run `hazel db upgrade`")
    if current is None:
        raise SchemaNotReadyError(ORPHANED)
    check_not_newer(engine, current)
    raise SchemaNotReadyError(_behind(current, head))
