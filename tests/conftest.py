"""Shared fixtures: every database test runs on SQLite (a file in tmp_path) and on PostgreSQL.

PostgreSQL: ``HAZEL_TEST_POSTGRES_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``) is
the admin connection; the session creates a fresh database ``hazel_test_<random>``, migrates it once, empties
its tables before each test and drops it at the end. When the server is unreachable the PostgreSQL cases are
skipped, unless ``HAZEL_TEST_REQUIRE_POSTGRES=1`` (CI), where the run fails instead.
``HAZEL_TEST_BACKENDS=sqlite`` (or ``postgresql``) limits the backends.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from store import Store
from store.db import unreachable_reason
from store.schema import ALL_TABLES, pending_counts, prunable_runs, run_counts, runs

PG_ADMIN_URL = os.environ.get("HAZEL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("HAZEL_TEST_REQUIRE_POSTGRES") == "1"
BACKENDS = [b.strip() for b in os.environ.get("HAZEL_TEST_BACKENDS", "sqlite,postgresql").split(",") if b.strip()]


def _one_tls_context() -> None:
    """Every ``httpx`` client of the test process (the tests' requests into our own endpoints, ``httpx.post``
    included) gets one default TLS context, built once: httpx builds one per client, loading certifi's bundle
    again each time (17-20 ms of CPU: the largest cost of a webhook test on the 2-core VM, about a sixth of the
    Jira webhook tests' CPU). The tests talk plain HTTP on loopback; a context asked for with other arguments
    (a custom ``verify``, a client certificate) is built as httpx builds it."""
    import functools

    from httpx._transports import default as transports  # (httpx's own name for it, patched in this process)

    build = getattr(transports, "create_ssl_context", None)
    if build is None:  # another httpx: each client builds its own, as before
        return
    shared = functools.lru_cache(maxsize=1)(lambda: build())

    def create_ssl_context(verify=True, cert=None, trust_env=True):  # noqa: ANN001, ANN202
        return shared() if (verify is True and cert is None and trust_env) else build(verify=verify, cert=cert, trust_env=trust_env)

    transports.create_ssl_context = create_ssl_context


_one_tls_context()


def _pg_reachable() -> str | None:
    """None when PostgreSQL answers, else the reason."""
    return unreachable_reason(PG_ADMIN_URL)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): four workers a core, at most 16. The suite waits on subprocesses,
    sleeps, fsyncs and PostgreSQL much of the time: on the 2-core VM (2,654 tests, 2026-12-06) three workers kept
    the cores less than half busy and took 411 s, five 338 s, eight 247 s (the cores busy), twelve 260 s (each
    worker collects the suite again). At most 16: each worker holds its own connections to PostgreSQL.
    ``HAZEL_TEST_WORKERS`` overrides the count."""
    chosen = os.environ.get("HAZEL_TEST_WORKERS")
    return int(chosen) if chosen else min(4 * (os.cpu_count() or 1), 16)


def pytest_sessionstart(session: pytest.Session) -> None:
    if "postgresql" in BACKENDS and REQUIRE_PG:
        reason = _pg_reachable()
        if reason is not None:
            pytest.exit(f"HAZEL_TEST_REQUIRE_POSTGRES=1 but PostgreSQL at {PG_ADMIN_URL} is unreachable: {reason}",
                        returncode=3)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test session."""
    reason = _pg_reachable()
    if reason is not None:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL unreachable: {reason}")
        pytest.skip(f"PostgreSQL unreachable ({reason}); set HAZEL_TEST_REQUIRE_POSTGRES=1 to fail instead")
    name = f"hazel_test_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    store = Store(url)
    store.upgrade()
    store.dispose()
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def empty_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # noqa: ANN001
    """An empty database (no schema): a SQLite file, or a PostgreSQL database created for the test."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    request.getfixturevalue("pg_url")  # skips when PostgreSQL is unreachable
    name = f"hazel_test_old_{secrets.token_hex(3)}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


_EMPTIERS: dict[str, Engine] = {}
_BIG = 1000
"""Above this many runs, emptying the tables TRUNCATEs them (as a fresh database leaves them: no dead rows)."""


def _truncate(url: str) -> None:
    """Empty every table and restart the sequences, as ``TRUNCATE ... RESTART IDENTITY`` does. A test's few rows
    are DELETEd (a few ms; a TRUNCATE of the eleven tables takes 70 to 200 ms: it makes new files for every
    table and index); after a test of more than ``_BIG`` runs, the tables are TRUNCATEd."""
    engine = _EMPTIERS.get(url)
    if engine is None:  # NullPool: no connection stays open on the test database between tests
        engine = _EMPTIERS[url] = create_engine(url, poolclass=NullPool)
    names = [t.name for t in ALL_TABLES]
    with engine.begin() as conn:
        if conn.execute(text(f"SELECT count(*) > {_BIG} FROM {runs.name}")).scalar():
            conn.execute(text(f"TRUNCATE {', '.join(names)} RESTART IDENTITY CASCADE"))
            return
        counters = {run_counts.name, pending_counts.name, prunable_runs.name}  # kept by triggers: emptied last
        for name in [n for n in reversed(names) if n not in counters] + [n for n in names if n in counters]:
            conn.execute(text(f"DELETE FROM {name}"))
        conn.execute(text(
            "SELECT setval(s.seqrelid, s.seqstart, false) FROM pg_sequence s JOIN pg_depend d "
            "ON d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid AND d.deptype IN ('a', 'i') "
            "JOIN pg_class t ON t.oid = d.refobjid WHERE t.relname = ANY(:names)"), {"names": names})


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per session (per xdist worker): each test's database is a copy of it."""
    path = tmp_path_factory.mktemp("template") / "hazel.db"
    store = Store(f"sqlite:///{path}")
    store.upgrade()
    store.dispose()
    leftovers = [p.name for p in path.parent.iterdir() if p != path]
    assert not leftovers, leftovers  # the WAL is checkpointed and gone once the last connection closes
    return path


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:  # noqa: ANN001
    """The URL of an empty, migrated database: SQLite file (a copy of the session's migrated template) or
    PostgreSQL (the session's database, emptied)."""
    if request.param == "sqlite":
        path = tmp_path / "hazel.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url = request.getfixturevalue("pg_url")
    _truncate(url)
    return url


@pytest.fixture(autouse=True)
def _close_engines() -> Iterator[None]:
    """Every Hazel built with ``tests.support.engine.make_hazel`` is closed after its test, so that
    connection pools never pile up against PostgreSQL's connection limit. First the runs a test's REST or web
    decision let continue in the background (``bot.inbound.continuing.continue_soon``: a thread per decision)
    end: one still writing after the test would write into the next test's emptied database (seen: its
    outbox row kept an id the restarted sequence handed out again, a duplicate key in the next test)."""
    yield
    for thread in threading.enumerate():
        if thread.name.startswith("hazel-") and "-run-" in thread.name:
            thread.join(timeout=30)
    from tests.support.engine import close_all

    close_all()


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store(db_url)
    yield s
    s.dispose()
