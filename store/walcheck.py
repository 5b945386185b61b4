"""SQLite: the write-ahead log copied back into the database file by a thread of its own, not by a commit.

In WAL mode a commit appends the pages it changed to the ``-wal`` file, and by default the commit that takes
the file past 1,000 pages also copies them back into the database file and syncs it (SQLite's
*autocheckpoint*, https://www.sqlite.org/wal.html#automatic_checkpoint), inside that commit. A resume writes
about 37 pages (22 for the decision, 14 for the step that ends the run: each table and index it touches), so
every 27th resume or so paid for a checkpoint: resume latency p99 2.3 ms against a median of 0.9
(``python -m bench``, item 4, SQLite; the slow resumes came exactly 27 apart).

Here a process keeps one ``Checkpointer`` per database file: a thread with a connection of its own that runs
``PRAGMA wal_checkpoint(PASSIVE)`` every ``EVERY_COMMITS`` write transactions of the process (counted where
writers give their turn back: ``store.db``). A passive checkpoint copies what no reader still needs, waits for
no lock (https://www.sqlite.org/c3ref/wal_checkpoint_v2.html) and runs with the GIL released, on the other
core, while the writers go on appending. The log starts over from its beginning only when a writer finds it
copied in full, which under steady writes is after SQLite's own autocheckpoint, kept behind the thread at
``AUTOCHECKPOINT_PAGES``: that one runs in a commit, every 10,000 pages (about 270 resumes), and copies only
what the thread has not. So a busy file's ``-wal`` reaches about 40 MB and stays that size (SQLite reuses it
from its beginning; a file's last connection to close checkpoints it and removes it).

Measured (1,000 in-process resumes, SQLite, ``synchronous=FULL``, the 2-core VM of ``bench/``): resume latency
p99 2.2-2.4 ms → 1.4-1.7, p99.5 2.2-2.7 → 1.6-1.8, median and resumes per second unchanged; pauses per second
about 8 % fewer (the thread's writes share the disk with the commits). Taking the writers' turn to finish each
checkpoint (so that the log starts over at 11 MB) put p99 back at 2.7 ms: a finished checkpoint syncs the
database file, and the writers waited for it. The thread starts with the first write it is told of and ends when idle for
``IDLE_SEC`` (the next write starts it again) or when the store is disposed: no thread per run, none in a
process that only reads.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

log = logging.getLogger(__name__)

EVERY_COMMITS = 256
"""Write transactions between two checkpoints: about 2,800 pages (11 MB) of log at a resume's 11 pages per
commit. Fewer, larger checkpoints write each page once for many commits that changed it, and fewer commits
share the disk with one (measured, 1,000 resumes, resume latency p99 | p99.5: every 32 commits 1.8 | 2.0 ms,
every 128 1.8 | 1.9, every 256 1.4-1.7 | 1.6-1.8; SQLite's autocheckpoint alone, every 1,000 pages, 2.2 |
2.3; every 3,000 pages, in the commits, 1.5-1.7 | 2.3-2.7)."""
AUTOCHECKPOINT_PAGES = 10_000
"""SQLite's ``wal_autocheckpoint`` on Hazel's connections (default 1,000): a checkpoint in the commit that
takes the log past 40 MB, which copies what the thread has not and lets the next writer start the log over;
the only one in processes that write less than ``EVERY_COMMITS`` times (SQLite also checkpoints when a file's
last connection closes)."""
IDLE_SEC = 5.0
"""The thread ends after this long without a write (and its connection closes)."""


class Checkpointer:
    """Checkpoints the WAL of the SQLite file at ``path`` in a thread of its own (see the module docstring).
    ``committed`` is called by every write transaction of the process on that file; thread-safe."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.every = EVERY_COMMITS
        self.idle_sec = IDLE_SEC
        self.checkpoints = 0
        """Checkpoints run so far (tests read it)."""
        self._writes = 0
        self._wake = threading.Event()
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def committed(self) -> None:
        """One more write transaction on the file (under the process's write turn: no lock needed for the
        count); every ``every``-th wakes the thread, started when not running."""
        self._writes += 1
        if self._writes < self.every:
            return
        self._writes = 0
        thread = self._thread
        if thread is None or not thread.is_alive():
            self._start()
        self._wake.set()

    def _start(self) -> None:
        with self._guard:
            if self._stopping or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name="hazel-wal-checkpoint", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:  # the file went away: SQLite's autocheckpoint remains
            log.debug("WAL checkpoints of %s stay in the commits: %s", self.path, exc)
            return
        try:
            while self._wake.wait(self.idle_sec) and not self._stopping:
                self._wake.clear()
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except sqlite3.Error as exc:  # (busy: another checkpoint runs; the next one catches up)
                    log.debug("WAL checkpoint of %s: %s", self.path, exc)
        finally:
            conn.close()

    def stop(self, timeout_sec: float = 5.0) -> None:
        """End the thread (waiting at most ``timeout_sec`` for a checkpoint in progress); a later write
        starts it again."""
        with self._guard:
            self._stopping = True
            thread, self._thread = self._thread, None
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_sec)
        with self._guard:
            self._stopping = False
            self._wake.clear()
