"""Cross-process wake-ups on PostgreSQL, sent inside the transaction that causes them (delivered to listeners
only when it commits; a rollback takes them back):

- ``NOTIFY hazel_ready, '<run id>'``: a run became ready (workers claim it);
- ``NOTIFY hazel_deadline, '<ISO 8601 UTC time>'``: a steering request's first reminder, escalation or timeout,
  or a retry's wake-up, was set for that time (schedulers re-arm their one timer if it is earlier);

and ``ReadyListener``, the one ``LISTEN`` connection of a worker process, which hears both. A no-op on SQLite,
where workers share a process or fall back to their periodic sweep, and schedulers to their tick.
"""

from __future__ import annotations

import logging
import secrets
import threading
from datetime import datetime, timezone
from typing import Callable

from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from store import fast

READY_CHANNEL = "hazel_ready"
DEADLINE_CHANNEL = "hazel_deadline"
log = logging.getLogger("hazel.worker")
_NOTIFY = text("SELECT pg_notify(:channel, :run_id)")
_NOTIFY_DEADLINE = text("SELECT pg_notify(:channel, :at)")


def notify_ready(conn: Connection, run_id: str) -> None:
    """``NOTIFY hazel_ready`` with ``run_id`` (PostgreSQL only; the caller checks the dialect)."""
    conn.execute(_NOTIFY, {"channel": READY_CHANNEL, "run_id": run_id})


def notify_deadline(conn: Connection, at: datetime) -> None:
    """``NOTIFY hazel_deadline`` with ``at`` (timezone-aware) as ISO 8601 UTC text (PostgreSQL only; the caller
    checks the dialect). Sent without waiting for its answer inside a ``store.fast.pipeline`` block."""
    fast.execute(conn, _NOTIFY_DEADLINE, {"channel": DEADLINE_CHANNEL,
                                          "at": at.astimezone(timezone.utc).isoformat()})


def parse_deadline(payload: str) -> datetime | None:
    """The time of a ``hazel_deadline`` payload (UTC, timezone-aware), or None when it is not one."""
    try:
        at = datetime.fromisoformat(payload)
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


class ReadyListener:
    """A thread holding one PostgreSQL connection that ``LISTEN``s on ``hazel_ready`` (and, with
    ``on_deadline``, on ``hazel_deadline``) and calls ``on_ready(run_id)`` / ``on_deadline(at)`` for each
    notification; it reconnects with backoff when the connection drops (the worker pool's sweep and the
    scheduler's tick cover the gap). The callbacks run on this thread: they must be quick.

    Args:
        url: the store's SQLAlchemy URL (``postgresql+psycopg://…``).
        on_ready: called with the run id of each ``hazel_ready`` notification.
        on_deadline: called with the time (UTC) of each ``hazel_deadline`` notification (None: not listened to).
        poll_sec: how long one wait for notifications lasts before the stop flag is checked again (``stop()``
            does not wait for it: it wakes the connection with a notification on this listener's own channel).
    """

    def __init__(self, url: str, on_ready: Callable[[str], None], *,
                 on_deadline: Callable[[datetime], None] | None = None, poll_sec: float = 1.0) -> None:
        self.conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.on_ready = on_ready
        self.on_deadline = on_deadline
        self.poll_sec = poll_sec
        self._stop = threading.Event()
        self._stop_channel = f"hazel_stop_{secrets.token_hex(8)}"  # stop() wakes this listener alone
        self._thread = threading.Thread(target=self._loop, name="hazel-listen", daemon=True)
        self.connected = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop listening and wait (up to ``3 * poll_sec``) for the thread to end: a notification on this
        listener's own channel ends its current wait at once; when the database cannot be reached for it, the
        wait ends within ``poll_sec``."""
        import psycopg

        self._stop.set()
        if self._thread.is_alive() and self.connected.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=2) as conn:
                    conn.execute("SELECT pg_notify(%s, '')", (self._stop_channel,))
            except Exception:  # the database is away: the listener's wait ends by its timeout
                log.debug("could not wake the %s listener to stop it", READY_CHANNEL, exc_info=True)
        self._thread.join(timeout=self.poll_sec * 3)

    def _dispatch(self, channel: str, payload: str) -> None:
        if channel == READY_CHANNEL:
            self.on_ready(payload)
        elif channel == DEADLINE_CHANNEL and self.on_deadline is not None:
            at = parse_deadline(payload)
            if at is None:
                log.warning("ignoring a %s notification that is not a time: %r", DEADLINE_CHANNEL, payload[:100])
                return
            try:
                self.on_deadline(at)
            except Exception:  # a scheduler's fault must not drop the connection the workers listen on
                log.exception("%s listener failed", DEADLINE_CHANNEL)

    def _loop(self) -> None:
        import psycopg

        backoff = 0.5
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {READY_CHANNEL}")
                    if self.on_deadline is not None:
                        conn.execute(f"LISTEN {DEADLINE_CHANNEL}")
                    conn.execute(f"LISTEN {self._stop_channel}")
                    self.connected.set()
                    backoff = 0.5
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=self.poll_sec):
                            if self._stop.is_set():
                                break
                            self._dispatch(note.channel, note.payload)
            except Exception as exc:  # connection lost: the sweep covers the gap while we reconnect
                self.connected.clear()
                log.warning("LISTEN %s connection lost (%s); reconnecting in %.1fs", READY_CHANNEL,
                            type(exc).__name__, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
