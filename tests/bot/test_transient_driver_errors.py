"""An outage met where Hazel talks to the database driver directly raises the driver's own error
(``psycopg.OperationalError`` "connection failed", ``sqlite3.OperationalError`` "unable to open database
file"), not SQLAlchemy's: the runner takes it as the database being down (the run is left to recovery), not as
Hazel's own error outside a step (which fails the run). Real errors of the real drivers: a connection to a
port nothing listens on, a database file that cannot be opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from bot.engine.runner import is_transient
from tests.support.live import free_port


def _raised(fn) -> BaseException:  # noqa: ANN001
    with pytest.raises(Exception) as caught:
        fn()
    return caught.value


def test_the_drivers_own_outage_errors_are_transient(tmp_path: Path) -> None:
    pg = _raised(lambda: psycopg.connect(f"host=127.0.0.1 port={free_port()} user=x dbname=x connect_timeout=2"))
    assert isinstance(pg, psycopg.OperationalError) and is_transient(pg)
    lite = _raised(lambda: sqlite3.connect(str(tmp_path)).execute("SELECT 1"))  # a folder is no database file
    assert isinstance(lite, sqlite3.OperationalError) and is_transient(lite)
    try:
        raise RuntimeError("writing the checkpoint failed") from pg
    except RuntimeError as wrapped:
        assert is_transient(wrapped)  # raised from an outage


def test_hazels_own_errors_are_not(tmp_path: Path) -> None:
    assert not is_transient(ValueError("cannot decode the stored state"))
    conn = sqlite3.connect(str(tmp_path / "x.db"))
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1)")
    duplicate = _raised(lambda: conn.execute("INSERT INTO t VALUES (1)"))
    assert isinstance(duplicate, sqlite3.IntegrityError) and not is_transient(duplicate)
