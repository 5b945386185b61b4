"""Cross-process wake-ups on PostgreSQL: ``NOTIFY hazel_ready, '<run id>'`` sent inside the transaction that
made a run ready (delivered to listeners only when it commits), and ``ReadyListener``, the one ``LISTEN``
connection of a worker process. A no-op on SQLite, where workers share one process or fall back to their
periodic sweep."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

READY_CHANNEL = "hazel_ready"
log = logging.getLogger("hazel.worker")
_NOTIFY = text("SELECT pg_notify(:channel, :run_id)")


def notify_ready(conn: Connection, run_id: str) -> None:
    """``NOTIFY hazel_ready`` with ``run_id`` (PostgreSQL only; the caller checks the dialect)."""
    conn.execute(_NOTIFY, {"channel": READY_CHANNEL, "run_id": run_id})


class ReadyListener:
    """A thread holding one PostgreSQL connection that ``LISTEN``s on ``hazel_ready`` and calls
    ``on_ready(run_id)`` for each notification; it reconnects with backoff when the connection drops (the
    worker pool's sweep covers the gap).

    Args:
        url: the store's SQLAlchemy URL (``postgresql+psycopg://…``).
        poll_sec: how long one wait for notifications lasts before the stop flag is checked again.
    """

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
