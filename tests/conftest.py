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
from typing import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from store import Store
from store.db import unreachable_reason
from store.schema import ALL_TABLES

PG_ADMIN_URL = os.environ.get("HAZEL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("HAZEL_TEST_REQUIRE_POSTGRES") == "1"
BACKENDS = [b.strip() for b in os.environ.get("HAZEL_TEST_BACKENDS", "sqlite,postgresql").split(",") if b.strip()]


def _pg_reachable() -> str | None:
    """None when PostgreSQL answers, else the reason."""
    return unreachable_reason(PG_ADMIN_URL)


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


def _truncate(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        names = ", ".join(t.name for t in ALL_TABLES)
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:  # noqa: ANN001
    """The URL of an empty, migrated database: SQLite file or PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'hazel.db'}"
        store = Store(url)
        store.upgrade()
        store.dispose()
        return url
    url = request.getfixturevalue("pg_url")
    _truncate(url)
    return url


@pytest.fixture(autouse=True)
def _close_engines() -> Iterator[None]:
    """Every Hazel built with ``tests.support.engine.make_hazel`` is closed after its test, so that
    connection pools never pile up against PostgreSQL's connection limit."""
    yield
    from tests.support.engine import close_all

    close_all()


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store(db_url)
    yield s
    s.dispose()
