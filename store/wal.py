"""SQLite's write-ahead log grown to its working size before the commits that would extend it, one at a time.

In WAL mode every commit appends its pages to the ``-wal`` file, and with ``synchronous=FULL`` waits for them
to reach the disk (``fdatasync``). While the file grows, that wait also covers the file's new size and the
blocks the filesystem allocates for it (on ext4 a journal commit more); once SQLite has checkpointed the log
and starts again at its beginning (after ``wal_autocheckpoint`` pages, 1,000 by default) it writes over
blocks that exist and the wait is for the data alone. The log is deleted when the last connection to the
database closes, so every process that opens the database alone starts in the slow regime: on the 2-core VM
of ``bench/`` a step's commit took 210-310 µs while the log grew against 130-170 µs once it was reused
(``bench/README.md``, "The session after ec92208").

So, once per pool of connections that could have found no log, the first write transaction of a process
first grows the log to ``pages`` frames if it is shorter: PostgreSQL creates its WAL segments zero-filled to
their full size (``wal_init_zero``) for the same reason. The growth goes through SQLite alone: one
transaction inserts ``pages`` pages of zeros into a table it creates, with a page cache of 8 pages so that
SQLite spills them to the log as it goes (``PRAGMA cache_size``; spilling is SQLite's ``cache_spill``,
on by default), then rolls back. Nothing is committed: the frames lie past the log's last commit, where
SQLite's recovery never reads (a frame counts only up to the last frame that ends a commit, its checksums
chained from the log's header), and the next commits write over them. The database file does not change.
Cost, measured on the same VM: 7 ms for 1,000 pages, and the first commit after it 4 ms (its ``fdatasync``
writes the 4 MB out); it pays for itself after about 100 commits.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any

from sqlalchemy import Engine

log = logging.getLogger(__name__)

WAL_PREALLOCATE_PAGES = 1000
"""Frames the log is grown to (SQLite's default ``wal_autocheckpoint``, after which it starts again at its
beginning): ``HAZEL_SQLITE_WAL_PREALLOCATE_PAGES``; 0 grows nothing."""

_FRAME_HEADER_BYTES = 24
_WAL_HEADER_BYTES = 32
_SPILL_CACHE_PAGES = 8
FREE_SPACE_FACTOR = 64
"""The log is grown only where the file system keeps at least this many times the growth free afterwards (256
MB for 1,000 pages of 4 KB): on a disk nearly full, 4 MB taken at once would fill it sooner than the log would."""

_GROW = ("INSERT INTO hazel_wal_pad SELECT zeroblob(?) FROM (WITH RECURSIVE n(i) AS "
         "(SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT i FROM n)")


class WalGrowth:
    """The growth of one engine's SQLite log (``store.db.take_turn`` runs it with the process's write turn
    held). ``pending``: whether the next write transaction looks at the log's size first; set again whenever
    the engine's pool opens or closes a connection (SQLite deletes the log when the last one closes)."""

    def __init__(self, engine: Engine, db_path: str, pages: int) -> None:
        self._engine = weakref.ref(engine)  # the engine keeps this (store.db._WRITE_TURNS): no cycle
        self.wal_path = db_path + "-wal"
        self.pages = pages
        self.pending = pages > 0
        self.page_size = 4096
        """The database's page size (SQLite's default until read at the first growth)."""

    def target_bytes(self) -> int:
        """The size of a log of ``pages`` frames, in bytes."""
        return log_bytes(self.pages, self.page_size)

    def connected(self) -> None:
        """A connection was opened or closed: look at the log before the next write."""
        self.pending = self.pages > 0

    def run(self) -> None:
        """Grow the log to ``pages`` frames unless it holds them already, or the disk lacks room for it
        (``FREE_SPACE_FACTOR``). Never raises, and never waits for another process: while one holds SQLite's
        write lock, the growth is tried again at a later write; a log that cannot be grown (a read-only file, a
        full disk) is left as it is, and the transaction that follows meets the same condition and reports it."""
        engine = self._engine()
        if engine is None or wal_bytes(self.wal_path) >= self.target_bytes():  # (the page size known, or 4 KB)
            self.pending = False
            return
        try:
            pool = engine.pool
            if pool.checkedout() >= pool.size():  # (QueuePool's) no wait for a connection while holding the
                return  # write turn: the next turn tries again
            fairy = engine.raw_connection()
        except Exception as exc:  # noqa: BLE001 - the database unreachable: the caller's own checkout says so
            log.debug("the SQLite log of %s was not grown: %s", self.wal_path, type(exc).__name__)
            return
        self.pending = False  # (after opening that connection, which set it again)
        try:
            raw = fairy.driver_connection
            self.page_size = raw.execute("PRAGMA page_size").fetchone()[0]
            if free_bytes(self.wal_path) < FREE_SPACE_FACTOR * self.target_bytes():  # (at its page size: s18 M2)
                log.debug("the SQLite log of %s is not grown: its disk is nearly full", self.wal_path)
                return
            grow(raw, self.pages, self.wal_path, page_size=self.page_size)
        except Exception as exc:  # noqa: BLE001 - a log left as it is; the caller's transaction decides
            log.debug("the SQLite log of %s was not grown: %s", self.wal_path, type(exc).__name__)
            from store.db import is_sqlite_busy  # (store.db imports this module)

            if is_sqlite_busy(exc):
                self.pending = True  # another process writes: at a later write (the connection is sound)
            else:
                fairy.invalidate()
        finally:
            fairy.close()


def free_bytes(path: str) -> int:
    """Bytes free to an unprivileged writer on the file system of ``path`` (its folder); 0 when unknown."""
    try:
        stat = os.statvfs(os.path.dirname(path) or ".")
    except OSError:
        return 0
    return stat.f_bavail * stat.f_frsize


def log_bytes(pages: int, page_size: int) -> int:
    """The size in bytes of a log of ``pages`` frames of ``page_size``-byte pages (its header, then each frame's
    header and page: https://www.sqlite.org/fileformat2.html#walformat)."""
    return _WAL_HEADER_BYTES + pages * (page_size + _FRAME_HEADER_BYTES)


def wal_bytes(wal_path: str) -> int:
    """The size in bytes of the log at ``wal_path`` (``<database file>-wal``); 0 when there is none."""
    try:
        return os.stat(wal_path).st_size
    except OSError:
        return 0


def grow(raw: Any, pages: int, wal_path: str, *, page_size: int | None = None) -> bool:
    """Grow the log ``wal_path`` of the sqlite3 connection ``raw`` (in autocommit mode, no transaction open) to
    ``pages`` frames (``page_size``: the database's, when the caller read it; else read here). True when grown; False when it held them already (looked at under the write lock: of two
    processes starting at once, one grows it), or when the database is not in WAL mode (a file system where
    SQLite cannot share memory keeps its rollback journal: there is no log to grow).

    The write lock is asked for without waiting (``PRAGMA busy_timeout=0`` for the attempt): a growth is not
    worth the wait that the write after it will make anyway.

    Raises:
        sqlite3.Error: the write lock held by another connection (``SQLITE_BUSY``, at once), a read-only file,
            a full disk (nothing written then: the transaction is rolled back).
    """
    if str(raw.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
        return False
    if page_size is None:
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
    cache_size = raw.execute("PRAGMA cache_size").fetchone()[0]
    busy_timeout_ms = raw.execute("PRAGMA busy_timeout").fetchone()[0]
    raw.execute(f"PRAGMA cache_size={_SPILL_CACHE_PAGES}")
    raw.execute("PRAGMA busy_timeout=0")
    try:
        raw.execute("BEGIN IMMEDIATE")
        try:
            if wal_bytes(wal_path) >= log_bytes(pages, page_size):
                return False
            raw.execute("CREATE TABLE hazel_wal_pad (p BLOB)")
            # a row of a page's usable size less its cell's header fills one page (no overflow page); the
            # pages still in the cache at the rollback are never written: a cache's worth more
            raw.execute(_GROW, (page_size - 100, pages + 2 * _SPILL_CACHE_PAGES))
        finally:
            raw.execute("ROLLBACK")
    finally:
        raw.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        raw.execute(f"PRAGMA cache_size={int(cache_size)}")
    return True
