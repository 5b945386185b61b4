"""Executing runs in a long-running process: a pool of worker threads that claim ready runs, woken at once
in-process (``Hazel.on_ready``) and across processes by PostgreSQL ``LISTEN/NOTIFY``, with a periodic sweep as
the safety net and a recovery sweep for runs whose worker died. Nothing runs per waiting run."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

from sqlalchemy.engine import make_url

from store.notify import READY_CHANNEL

if TYPE_CHECKING:
    from bot.engine.hazel import Hazel

log = logging.getLogger("hazel.worker")


class WorkerPool:
    """``threads`` workers claiming ready runs (woken at once by ``Hazel.on_ready``, and every ``sweep_sec``
    as a safety net) plus a recovery sweep for runs whose worker died. One pool per process; nothing runs per
    waiting run."""

    def __init__(self, hazel: "Hazel", *, threads: int = 4, sweep_sec: float = 1.0) -> None:
        self.hazel = hazel
        self.threads = threads
        self.sweep_sec = sweep_sec
        self._wake = threading.Condition()
        self._pending_wakes = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listener: ReadyListener | None = None
        hazel.on_ready(lambda _run_id: self.wake())

    def wake(self) -> None:
        with self._wake:
            self._pending_wakes += 1
            self._wake.notify()

    def start(self) -> None:
        """Start the worker threads (and, on PostgreSQL, the LISTEN connection)."""
        if self.hazel.store.dialect == "postgresql" and self._listener is None:
            self._listener = ReadyListener(self.hazel.store.url, lambda _run_id: self.wake())
            self._listener.start()
        for i in range(self.threads):
            t = threading.Thread(target=self._loop, name=f"hazel-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout_sec: float = 30.0) -> None:
        """Stop claiming; runs being executed finish their current step, checkpoint it and are handed back
        (another process, or this one when it starts again, continues them). Waits up to ``timeout_sec``."""
        self._stop.set()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        with self._wake:
            self._wake.notify_all()
        for t in self._threads:
            t.join(timeout=timeout_sec)
        self._threads.clear()

    def work_once(self) -> bool:
        """Claim and drive one ready run. False when none was ready."""
        run = self.hazel.runner.claim()
        if run is None:
            return False
        self.hazel.runner.drive(run, hand_back=self._stop)
        return True

    def drain(self) -> int:
        """Drive ready runs in this thread until none is ready now. Returns how many drives happened."""
        n = 0
        while self.work_once():
            n += 1
        return n

    def _loop(self) -> None:
        last_recovery = 0.0
        while not self._stop.is_set():
            try:
                if time.monotonic() - last_recovery > max(self.hazel.settings.lease_sec / 2, 1.0):
                    last_recovery = time.monotonic()
                    self.hazel.runner.recover()
                if self.work_once():
                    continue
            except Exception:
                log.exception("worker loop error; continuing")
                self._stop.wait(1.0)
                continue
            with self._wake:
                if self._pending_wakes == 0:
                    self._wake.wait(self.sweep_sec)
                self._pending_wakes = max(0, self._pending_wakes - 1)


class ReadyListener:
    """A thread holding one PostgreSQL connection that ``LISTEN``s on ``hazel_ready`` and calls
    ``on_ready(run_id)`` for each notification; it reconnects with backoff when the connection drops (the
    worker pool's sweep covers the gap)."""

    def __init__(self, url: str, on_ready: Callable[[str], None], *, poll_sec: float = 1.0) -> None:
        self.conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.on_ready = on_ready
        self.poll_sec = poll_sec
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hazel-listen", daemon=True)
        self.connected = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.poll_sec * 3)

    def _loop(self) -> None:
        import psycopg

        backoff = 0.5
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {READY_CHANNEL}")
                    self.connected.set()
                    backoff = 0.5
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=self.poll_sec):
                            self.on_ready(note.payload)
            except Exception as exc:  # connection lost: the sweep covers the gap while we reconnect
                self.connected.clear()
                log.warning("LISTEN %s connection lost (%s); reconnecting in %.1fs", READY_CHANNEL,
                            type(exc).__name__, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
