"""Several processes starting at once on an empty database: one creates the schema, the others wait for it.

Each case starts ``PROCESSES`` real Python processes that build a ``Store`` and call ``ensure_schema`` (what
every ``hazel`` command does on first use) at the same instant, on a fresh SQLite file or a fresh PostgreSQL
database, a few times over. Without the schema lock (``store.migrate.schema_lock``) one or two of them failed:
"schema revision unknown" on SQLite, "duplicate key value violates unique constraint
pg_type_typname_nsp_index" on PostgreSQL.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from store import Store
from store.migrate import HEAD, SQLITE_LOCK_SUFFIX, current_revision
from tests.conftest import BACKENDS, PG_ADMIN_URL

PROCESSES = 4
ROUNDS = 3
ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import sys, traceback
from store import Store
for url in iter(sys.stdin.readline, ""):  # one fresh database per round
    store = Store(url.strip())
    print("ready", flush=True)
    sys.stdin.readline()  # the start: every child has made its Store by then
    try:
        store.ensure_schema()
        store.dispose()
    except BaseException:
        print("failed " + traceback.format_exc().replace("\\n", "\\t"), flush=True)
    else:
        print("done", flush=True)
"""
"""A child: for each URL it reads, a ``Store`` and, once told to go, ``ensure_schema`` (what every ``hazel``
command does on first use); it answers ``done`` or ``failed <traceback, tabs for newlines>``. The same
processes serve every round (a new ``Store`` on a new database each time): no import is timed by the race."""


@pytest.fixture(params=BACKENDS)
def fresh_url_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator:
    """Makes fresh, empty databases (SQLite files in tmp_path, or PostgreSQL databases dropped at the end)."""
    made: list[str] = []
    admin = None
    if request.param == "postgresql":
        request.getfixturevalue("pg_url")  # skips when PostgreSQL is unreachable
        admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")

    def make() -> str:
        if admin is None:
            return f"sqlite:///{tmp_path / f'fresh_{len(made)}.db'}"
        name = f"hazel_test_mig_{secrets.token_hex(4)}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        made.append(name)
        return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    make.backend = request.param  # type: ignore[attr-defined]
    try:
        yield make
    finally:
        if admin is not None:
            with admin.connect() as conn:
                for name in made:
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen]]:
    """``PROCESSES`` children (``_CHILD``), shared by the rounds of a test."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(PROCESSES)]
    try:
        yield procs
    finally:
        for child in procs:
            try:
                child.stdin.close()
            except BrokenPipeError:
                pass
        for child in procs:
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _race(children: list[subprocess.Popen], url: str) -> list[tuple[int, str]]:
    """Start ``PROCESSES`` first starts on ``url`` at one instant (each told to go once all have made their
    Store); per child 0 and "" when it succeeded, else 1 and its traceback (or what it left on stderr)."""
    for line in (url, "go"):
        for child in children:
            try:
                child.stdin.write(line + "\n")
                child.stdin.flush()
            except BrokenPipeError:
                pass
        if line == url:
            for child in children:  # each has made its Store (or died: its stderr says why)
                child.stdout.readline()
    results = []
    for child in children:
        answer = child.stdout.readline()
        if answer.startswith("done"):
            results.append((0, ""))
        elif answer.startswith("failed "):
            results.append((1, answer[len("failed "):].replace("\t", "\n")))
        else:  # the child died
            child.kill()
            results.append((child.wait() or 1, child.stderr.read()))
    return results


def test_first_starts_at_once_all_succeed(fresh_url_factory, children) -> None:  # noqa: ANN001
    for _ in range(ROUNDS):
        url = fresh_url_factory()
        results = _race(children, url)
        failures = [next((line for line in reversed(err.splitlines()) if "Error" in line), f"exit {code}")
                    for code, err in results if code != 0]
        assert not failures, (failures, [err[-4000:] for code, err in results if code != 0][:1])  # (its traceback)
        store = Store(url)
        try:
            assert current_revision(store.engine) == HEAD
            store.ensure_schema()
        finally:
            store.dispose()
        if fresh_url_factory.backend == "sqlite":  # the lock file is gone with its last holder
            path = Path(make_url(url).database)
            assert not Path(str(path) + SQLITE_LOCK_SUFFIX).exists()


def test_of_upgrades_at_once_only_the_one_that_migrated_found_an_empty_database(
        fresh_url_factory) -> None:  # noqa: ANN001
    """``hazel db upgrade`` reports what it changed from the revision read under the schema lock: two at once
    used to both print "(was empty)"."""
    from concurrent.futures import ThreadPoolExecutor

    url = fresh_url_factory()
    stores = [Store(url) for _ in range(PROCESSES)]
    try:
        with ThreadPoolExecutor(PROCESSES) as pool:
            found = list(pool.map(lambda s: s.upgrade(), stores))
        assert found.count(None) == 1 and found.count(HEAD) == PROCESSES - 1, found
    finally:
        for store in stores:
            store.dispose()
