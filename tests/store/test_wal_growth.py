"""SQLite's log is grown before a process's first write (``store.wal``): the ``-wal`` file reaches its working
size, the database holds only what was committed, a crash after it loses nothing, and a log that cannot be
grown leaves the writes as they would have been."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time

from sqlalchemy import text

from store import db
from store.wal import WAL_PREALLOCATE_PAGES

FRAME_BYTES = 4096 + 24


def _wal_bytes(path) -> int:  # noqa: ANN001
    return os.path.getsize(f"{path}-wal") if os.path.exists(f"{path}-wal") else 0


def _insert(engine, value: int) -> None:  # noqa: ANN001
    with db.transaction(engine) as conn:
        conn.execute(text("INSERT INTO t (x) VALUES (:x)"), {"x": value})


def _tables(path) -> list[str]:  # noqa: ANN001
    with sqlite3.connect(path) as raw:
        return [name for (name,) in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def test_the_first_write_grows_the_log_and_commits_only_its_own_rows(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "grown.db"
    engine = db.make_engine(f"sqlite:///{path}")
    with engine.connect() as conn:  # a reader grows nothing
        conn.execute(text("SELECT 1"))
    assert _wal_bytes(path) < FRAME_BYTES * 10
    with db.transaction(engine) as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    assert _wal_bytes(path) >= 32 + WAL_PREALLOCATE_PAGES * FRAME_BYTES
    db_file_bytes = os.path.getsize(path)
    for value in range(50):
        _insert(engine, value)
    assert _wal_bytes(path) < 32 + (WAL_PREALLOCATE_PAGES + 30) * FRAME_BYTES  # written over, not appended
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*), sum(x) FROM t")).one() == (50, sum(range(50)))
    engine.dispose()  # the last connection checkpoints the log into the file and deletes it
    assert not os.path.exists(f"{path}-wal")
    assert _tables(path) == ["t"]  # the pad table was never committed
    assert os.path.getsize(path) <= db_file_bytes + 4096 * 4
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_no_growth_when_told_none(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "plain.db"
    engine = db.make_engine(f"sqlite:///{path}", wal_preallocate_pages=0)
    with db.transaction(engine) as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    _insert(engine, 1)
    assert 0 < _wal_bytes(path) < FRAME_BYTES * 10
    engine.dispose()


def test_the_log_is_grown_again_after_every_connection_closed(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "again.db"
    engine = db.make_engine(f"sqlite:///{path}", wal_preallocate_pages=200)
    with db.transaction(engine) as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    assert _wal_bytes(path) >= 200 * FRAME_BYTES
    engine.dispose()
    assert not os.path.exists(f"{path}-wal")
    _insert(engine, 7)  # a new connection: the log is new and short
    assert _wal_bytes(path) >= 200 * FRAME_BYTES
    with engine.connect() as conn:
        assert conn.execute(text("SELECT x FROM t")).scalars().all() == [7]
    engine.dispose()


def test_a_process_killed_after_growing_the_log_loses_no_commit(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "killed.db"
    script = textwrap.dedent(f"""
        import os
        from sqlalchemy import text
        from store import db
        engine = db.make_engine("sqlite:///{path}")
        with db.transaction(engine) as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
        for value in range(30):
            with db.transaction(engine) as conn:
                conn.execute(text("INSERT INTO t (x) VALUES (:x)"), {{"x": value}})
        print(os.path.getsize("{path}-wal"), flush=True)
        os._exit(0)  # no connection closed: the log keeps its grown tail past the last commit
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=os.getcwd(), check=True)
    assert int(done.stdout) >= 32 + WAL_PREALLOCATE_PAGES * FRAME_BYTES
    with sqlite3.connect(path) as raw:  # SQLite recovers the log: every commit, and nothing past them
        assert raw.execute("SELECT count(*), sum(x) FROM t").fetchone() == (30, sum(range(30)))
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert _tables(path) == ["t"]


def test_a_log_that_cannot_be_grown_leaves_the_writes_as_they_were(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "locked.db"
    engine = db.make_engine(f"sqlite:///{path}", busy_timeout_ms=1_500)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode=WAL")
    other.execute("CREATE TABLE t (x INTEGER)")
    other.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock
    started = time.monotonic()
    try:
        with db.transaction(engine) as conn:
            conn.execute(text("INSERT INTO t (x) VALUES (1)"))
    except Exception as exc:  # noqa: BLE001 - what the writer meets is SQLite's own answer
        assert db.is_sqlite_busy(exc), exc
    else:
        raise AssertionError("a write went through a held lock")
    # one busy timeout, the write's own: the growth asked for the lock without waiting (it waited a whole busy
    # timeout before the write's, fresh-user finding s17 F1: 60 s where the message says 30)
    assert time.monotonic() - started < 2.7
    other.execute("ROLLBACK")
    _insert(engine, 2)  # the lock released: the write goes through, and the log is grown before it
    assert _wal_bytes(path) >= 32 + WAL_PREALLOCATE_PAGES * FRAME_BYTES
    assert [x for (x,) in other.execute("SELECT x FROM t")] == [2]
    other.close()
    engine.dispose()


def test_the_setting_reaches_the_engines_store(tmp_path) -> None:  # noqa: ANN001
    from bot.engine import Hazel
    from bot.settings import Settings

    for pages, grown in ((0, False), (300, True)):
        path = tmp_path / f"engine-{pages}.db"
        settings = Settings(HAZEL_DATABASE_URL=f"sqlite:///{path}", HAZEL_SQLITE_WAL_PREALLOCATE_PAGES=pages)
        hazel = Hazel(settings, load_workflows=False)
        try:
            with db.transaction(hazel.store.engine) as conn:
                conn.execute(text("CREATE TABLE t (x INTEGER)"))
            assert (_wal_bytes(path) >= 300 * FRAME_BYTES) is grown, (pages, _wal_bytes(path))
        finally:
            hazel.close()


def test_grow_looks_under_the_lock_and_only_at_a_log(tmp_path) -> None:  # noqa: ANN001
    from store.wal import grow

    path = tmp_path / "grow.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("CREATE TABLE t (x INTEGER)")
    assert grow(raw, 100, f"{path}-wal") is True
    grown = _wal_bytes(path)
    assert grown >= 100 * FRAME_BYTES
    assert grow(raw, 100, f"{path}-wal") is False  # (another process got there first)
    assert _wal_bytes(path) == grown
    raw.close()

    journal = tmp_path / "journal.db"  # a database SQLite keeps in rollback-journal mode: no log to grow
    raw = sqlite3.connect(journal, isolation_level=None)
    raw.execute("CREATE TABLE t (x INTEGER)")
    size = os.path.getsize(journal)
    assert grow(raw, 100, f"{journal}-wal") is False
    assert os.path.getsize(journal) == size and not os.path.exists(f"{journal}-wal")
    assert _tables(journal) == ["t"]
    raw.close()


def test_no_growth_on_a_disk_nearly_full(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from store import wal

    path = tmp_path / "full.db"
    monkeypatch.setattr(wal, "free_bytes", lambda _path: 63 * (32 + WAL_PREALLOCATE_PAGES * FRAME_BYTES))
    engine = db.make_engine(f"sqlite:///{path}")
    with db.transaction(engine) as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    assert _wal_bytes(path) < FRAME_BYTES * 10
    monkeypatch.setattr(wal, "free_bytes", lambda _path: 64 * (32 + WAL_PREALLOCATE_PAGES * FRAME_BYTES))
    engine.dispose()  # (a new connection: the log is looked at again)
    _insert(engine, 1)
    assert _wal_bytes(path) >= WAL_PREALLOCATE_PAGES * FRAME_BYTES
    engine.dispose()


def test_a_database_of_small_pages_is_grown_once(tmp_path) -> None:  # noqa: ANN001
    from sqlalchemy import event

    path = tmp_path / "small-pages.db"
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA page_size=512")
        raw.execute("CREATE TABLE t (x INTEGER)")
    engine = db.make_engine(f"sqlite:///{path}")
    _insert(engine, 1)
    assert _wal_bytes(path) >= 32 + WAL_PREALLOCATE_PAGES * (512 + 24)
    checkouts: list[int] = []
    event.listen(engine.pool, "checkout", lambda *_args: checkouts.append(1))
    with engine.connect(), engine.connect():  # a second connection opened: the log is looked at again
        pass
    checkouts.clear()
    _insert(engine, 2)
    assert len(checkouts) == 1  # the write's own: the log's size was known to be enough (s17 F6)
    engine.dispose()


def test_the_free_space_needed_follows_the_page_size(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from store import wal

    path = tmp_path / "large-pages.db"
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA page_size=65536")
        raw.execute("CREATE TABLE t (x INTEGER)")
    enough_for_4k_pages = 64 * (32 + WAL_PREALLOCATE_PAGES * FRAME_BYTES)
    monkeypatch.setattr(wal, "free_bytes", lambda _path: enough_for_4k_pages)  # not for 1,000 pages of 64 KB
    engine = db.make_engine(f"sqlite:///{path}")
    _insert(engine, 1)
    assert _wal_bytes(path) < 10 * (65536 + 24)  # (s18 M2: it grew to 64 MB, leaving far less than 64 times)
    engine.dispose()
