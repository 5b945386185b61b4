"""Item 1, the floor: single-row INSERT + COMMIT of a 1 KB row with Hazel's own driver and settings.

The connection comes from ``store.db.make_engine`` (so SQLite has the same WAL, ``synchronous``, busy timeout
and ``BEGIN IMMEDIATE``; PostgreSQL the same psycopg connection in a transaction that the INSERT opens), but the
statements go straight to the driver: no SQLAlchemy statement, no Hazel code.
"""

from __future__ import annotations

import time

from store import db

from bench.workload import step_text


def floor_us_per_commit(url: str, n_rows: int) -> float:
    """Mean microseconds of one INSERT + COMMIT of a 1 KB row, over ``n_rows`` commits."""
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
        started = time.perf_counter()
        for _ in range(n_rows):
            if sqlite:
                cur.execute("BEGIN IMMEDIATE")
            cur.execute(insert, (row,))
            raw.commit()
        elapsed = time.perf_counter() - started
        if sqlite:
            cur.execute("BEGIN IMMEDIATE")
        cur.execute("DROP TABLE hazel_bench_floor")
        raw.commit()
        cur.close()
    finally:
        raw.close()
        engine.dispose()
    return elapsed / n_rows * 1e6
