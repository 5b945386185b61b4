"""SQLite's write-ahead log is copied back into the database file by a thread of the process
(``store.walcheck``), not by the commit that fills it: writes on a SQLite store start that thread, it
checkpoints every ``every`` write transactions, ends when idle or when the store is disposed, and SQLite's
own autocheckpoint is only the backstop."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from store import Store, db
from store.walcheck import AUTOCHECKPOINT_PAGES, Checkpointer


def _wait(condition: Callable[[], bool], timeout_sec: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_sec
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _write(store: Store, n: int) -> None:
    for _ in range(n):
        with store.transaction() as tx:
            tx.conn.exec_driver_sql("INSERT INTO t VALUES (randomblob(3000))")


def _checkpointer(store: Store) -> Checkpointer:
    turns = db.write_turns(store.engine)
    assert turns is not None
    return turns.checkpointer


@pytest.fixture
def wal(tmp_path: Path) -> Iterator[tuple[Store, Checkpointer, Path]]:
    """A SQLite store on a new file holding a table ``t``, its checkpointer woken every 10 writes."""
    path = tmp_path / "wal.db"
    store = Store(f"sqlite:///{path}")
    checkpointer = _checkpointer(store)
    checkpointer.every = 10
    try:
        with store.transaction() as tx:
            tx.conn.exec_driver_sql("CREATE TABLE t (x BLOB)")
            assert tx.conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == AUTOCHECKPOINT_PAGES
        yield store, checkpointer, path
    finally:
        store.dispose()


def test_a_thread_copies_the_log_back_while_commits_leave_it(wal: tuple[Store, Checkpointer, Path]) -> None:
    store, checkpointer, path = wal
    before = os.path.getsize(path)
    _write(store, 9)  # 10 write transactions with the CREATE: the tenth wakes the thread
    assert _wait(lambda: checkpointer.checkpoints == 1)
    thread = checkpointer._thread
    assert thread is not None and thread.name == "hazel-wal-checkpoint" and thread.daemon
    # the rows reached the database file itself: nothing but a checkpoint writes there in WAL mode
    assert os.path.getsize(path) >= before + 9 * 3000
    _write(store, 10)
    assert _wait(lambda: checkpointer.checkpoints == 2)
    assert checkpointer._thread is thread  # one thread for the file, kept while writes come
    with store.read() as tx:
        assert tx.conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 19
    store.dispose()
    assert not thread.is_alive()  # disposing the store ends it


def test_fewer_writes_than_a_checkpoint_start_no_thread(wal: tuple[Store, Checkpointer, Path]) -> None:
    store, checkpointer, path = wal
    before = os.path.getsize(path)
    _write(store, 8)
    time.sleep(0.2)
    assert checkpointer._thread is None and checkpointer.checkpoints == 0
    assert os.path.getsize(path) == before  # the commits copied nothing back
    with store.read() as tx:  # reads are not counted
        tx.conn.exec_driver_sql("SELECT count(*) FROM t").scalar()
    assert checkpointer._thread is None


def test_an_idle_thread_ends_and_the_next_writes_start_another(wal: tuple[Store, Checkpointer, Path]) -> None:
    store, checkpointer, _ = wal
    checkpointer.every, checkpointer.idle_sec = 5, 0.2
    _write(store, 4)
    assert _wait(lambda: checkpointer.checkpoints == 1)
    first = checkpointer._thread
    assert first is not None
    first.join(5)
    assert not first.is_alive()  # idle for idle_sec: gone, its connection closed
    _write(store, 5)
    assert _wait(lambda: checkpointer.checkpoints == 2)
    assert checkpointer._thread is not first and checkpointer._thread.is_alive()


def test_engines_on_one_file_share_its_thread(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'wal.db'}"
    one, two = Store(url), Store(url)
    try:
        assert _checkpointer(one) is _checkpointer(two)
        assert _checkpointer(one) is db.write_turns(one.relaxed_engine).checkpointer
    finally:
        one.dispose()
        two.dispose()


def test_postgresql_has_none(pg_url: str) -> None:
    store = Store(pg_url)
    try:
        assert db.write_turns(store.engine) is None  # no turns, no checkpointer: the server checkpoints
    finally:
        store.dispose()
