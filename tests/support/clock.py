"""A clock tests move by hand: ``Hazel(clock=clock)``, then ``clock.advance(sec)``."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone


class FakeClock:
    """Callable returning a fixed, timezone-aware UTC time until advanced (thread-safe)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self.now += timedelta(seconds=seconds)
            return self.now
