"""The two databases of a bench run: SQLite files in a temporary directory, and a fresh PostgreSQL database
created for the run and dropped after it.

Every measurement that needs empty tables asks its backend for ``fresh_url()``: a new migrated SQLite file, or
the run's PostgreSQL database with every table truncated (TRUNCATE gives each table new, empty files, so sizes
measured after it start from the empty schema).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import sqlite3
import tempfile
from contextlib import ExitStack, contextmanager
from typing import Callable, Iterator

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from store import Store, db

PG_ADMIN_URL = os.environ.get("HAZEL_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
"""Admin connection used to create and drop the bench database (``HAZEL_BENCH_POSTGRES_URL``)."""


class SqliteBackend:
    """SQLite files (WAL, Hazel's default ``synchronous=FULL``) under one temporary directory."""

    name = "sqlite"
    label = "SQLite"

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._n = 0
        self._template: str | None = None

    def path(self, tag: str) -> str:
        self._n += 1
        return os.path.join(self.directory, f"{self._n:03d}-{tag}.db")

    def fresh_url(self, tag: str = "hazel", *, migrate: bool = True) -> str:
        """A new SQLite file, migrated to Hazel's schema unless ``migrate=False`` (a copy of one file migrated
        once, its WAL folded in: the same bytes as a file migrated anew, without running the migrations again)."""
        path = self.path(tag)
        if migrate:
            shutil.copyfile(self._migrated_template(), path)
        return f"sqlite:///{path}"

    def _migrated_template(self) -> str:
        if self._template is None:
            template = os.path.join(self.directory, "template.db")
            store = Store(f"sqlite:///{template}")
            store.upgrade()
            store.dispose()
            file_size_bytes(template)  # folds the WAL into the file, which is then complete on its own
            self._template = template
        return self._template

    @staticmethod
    def file_of(url: str) -> str:
        return make_url(url).database or ""

    def size_bytes(self, url: str, tables: tuple[str, ...] = ()) -> int:
        """Bytes on disk of the database file after folding the WAL into it (``tables`` is ignored: the
        file holds one workload). Every connection to the file must be closed first."""
        return file_size_bytes(self.file_of(url))


def file_size_bytes(path: str) -> int:
    """Bytes of a SQLite file once its WAL is checkpointed into it (``wal_checkpoint(TRUNCATE)``)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    wal = path + "-wal"
    return os.path.getsize(path) + (os.path.getsize(wal) if os.path.exists(wal) else 0)


class PostgresBackend:
    """One fresh database for the whole bench run (``hazel_bench_<random>``), migrated once."""

    name = "postgresql"
    label = "PostgreSQL"

    def __init__(self, url: str) -> None:
        self.url = url
        self.conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        """The same database as a libpq URL (for LangGraph's PostgresSaver, which takes psycopg's)."""
        self._engine = create_engine(url, isolation_level="AUTOCOMMIT")
        self.cleanups: list[Callable[[], None]] = []
        """Called (last added first) before the bench database is dropped: what a measurement left on the
        server for the next ones (a template database) goes with it."""

    def fresh_url(self, tag: str = "hazel", *, migrate: bool = True) -> str:
        """The bench database with every table emptied (Hazel's, the floor's and LangGraph's)."""
        with self._engine.connect() as conn:
            names = conn.execute(text(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename NOT IN ('hazel_alembic_version', 'checkpoint_migrations')")).scalars().all()
            if names:
                conn.execute(text("TRUNCATE " + ", ".join(f'"{n}"' for n in names) + " RESTART IDENTITY CASCADE"))
        return self.url

    def size_bytes(self, url: str, tables: tuple[str, ...]) -> int:
        """Sum of ``pg_total_relation_size`` (heap, TOAST and indexes) of ``tables`` that exist."""
        with self._engine.connect() as conn:
            return int(conn.execute(text(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname = ANY(:names)"),
                {"names": list(tables)}).scalar_one())

    def server_version(self) -> str:
        with self._engine.connect() as conn:
            return str(conn.execute(text("SHOW server_version")).scalar_one())

    def dispose(self) -> None:
        self._engine.dispose()


def pg_unreachable_reason(admin_url: str = PG_ADMIN_URL) -> str | None:
    """None when PostgreSQL answers at ``admin_url``, else why not (one line)."""
    return db.unreachable_reason(admin_url)


@contextmanager
def sqlite_backend() -> Iterator[SqliteBackend]:
    directory = tempfile.mkdtemp(prefix="hazel-bench-")
    try:
        yield SqliteBackend(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def postgres_backend(admin_url: str = PG_ADMIN_URL) -> Iterator[PostgresBackend]:
    """Create ``hazel_bench_<random>``, migrate it, yield it, and drop it (``WITH (FORCE)``) afterwards."""
    name = f"hazel_bench_{secrets.token_hex(4)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    backend = None
    try:
        store = Store(url)
        store.upgrade()
        store.dispose()
        backend = PostgresBackend(url)
        yield backend
    finally:
        if backend is not None:
            for cleanup in reversed(backend.cleanups):
                try:
                    cleanup()
                except Exception:  # the bench database is still dropped
                    logging.getLogger("bench").exception("a PostgreSQL cleanup failed")
            backend.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


HAZEL_TABLES = ("hazel_runs", "hazel_checkpoints", "hazel_steering_requests", "hazel_decisions", "hazel_events",
                "hazel_outbox")
LANGGRAPH_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "writes")


BACKEND_CHOICES = ("sqlite", "postgresql", "both")
"""The ``--backend`` values of the bench's single-item commands (``bench.db_size``, ``bench.cli_speed``)."""


def chosen(stack: ExitStack, choice: str) -> list[SqliteBackend | PostgresBackend]:
    """The backends ``choice`` (one of ``BACKEND_CHOICES``) names, entered on ``stack`` (dropped when it
    closes); PostgreSQL is left out when it is unreachable."""
    backends: list[SqliteBackend | PostgresBackend] = []
    if choice in ("sqlite", "both"):
        backends.append(stack.enter_context(sqlite_backend()))
    if choice in ("postgresql", "both") and pg_unreachable_reason() is None:
        backends.append(stack.enter_context(postgres_backend()))
    return backends
