"""Item 1, the floor: the cheapest durable write of a 1 KB row with Hazel's own driver and settings.

The connection comes from ``store.db.make_engine`` (so SQLite has the same WAL, ``synchronous``, busy timeout
and ``BEGIN IMMEDIATE``; PostgreSQL the same psycopg connection), and the statements go straight to the
driver: no SQLAlchemy statement, no Hazel code. On SQLite the log is grown first, as Hazel's first write in a
process grows it (``store.wal``): the floor stays the cheapest durable write there is, where commits that
extend the ``-wal`` file cost 40-70 % more. SQLite: ``BEGIN IMMEDIATE``, the INSERT, ``COMMIT`` (in
process: no round trips). PostgreSQL: the INSERT alone in autocommit mode, its own transaction: one round
trip and its commit (the same as BEGIN + INSERT + COMMIT durably, minus two round trips), so that a Hazel
step, which is one statement on PostgreSQL too, is measured against the cheapest commit there is.
"""

from __future__ import annotations

import time

from store import db, wal

from bench.databases import SqliteBackend
from bench.workload import step_text


def floor_us_per_commit(url: str, n_rows: int, *, warm_up_rows: int = 0) -> float:
    """Mean microseconds of one INSERT + COMMIT of a 1 KB row, over ``n_rows`` commits after ``warm_up_rows``
    untimed ones (on a fresh database: as many as item 2's warm-up run has steps, so that the timed commits
    meet the same state of SQLite's WAL as the run's steps; see ``bench/README.md``, item 1)."""
    engine = db.make_engine(url, pool_size=1)
    row = step_text(0).encode()
    sqlite = db.is_sqlite(engine)
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        if sqlite:
            cur.execute("BEGIN IMMEDIATE")
            cur.execute("CREATE TABLE IF NOT EXISTS hazel_bench_floor (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
            insert = "INSERT INTO hazel_bench_floor (payload) VALUES (?)"
        else:
            cur.execute("CREATE TABLE IF NOT EXISTS hazel_bench_floor "
                        "(id BIGSERIAL PRIMARY KEY, payload BYTEA NOT NULL)")
            insert = "INSERT INTO hazel_bench_floor (payload) VALUES (%s)"
        raw.commit()
        if sqlite:  # the log grown first, as Hazel's first write grows it (store.wal)
            wal.grow(raw.driver_connection, wal.WAL_PREALLOCATE_PAGES, SqliteBackend.file_of(url) + "-wal")
        else:
            raw.driver_connection.autocommit = True
        def commit_one() -> None:
            if sqlite:
                cur.execute("BEGIN IMMEDIATE")
                cur.execute(insert, (row,))
                raw.commit()
            else:
                cur.execute(insert, (row,))  # committed as it completes

        for _ in range(warm_up_rows):
            commit_one()
        started = time.perf_counter()
        for _ in range(n_rows):  # (a call adds ~0.1 µs to a commit of ~200)
            commit_one()
        elapsed = time.perf_counter() - started
        if sqlite:
            cur.execute("BEGIN IMMEDIATE")
        cur.execute("DROP TABLE hazel_bench_floor")
        raw.commit()
        if not sqlite:
            raw.driver_connection.autocommit = False
        cur.close()
    finally:
        raw.close()
        engine.dispose()
    return elapsed / n_rows * 1e6
