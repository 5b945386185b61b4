"""The stop signals of ``hazel serve`` / ``hazel worker`` (SIGINT, SIGTERM) from the moment the command starts.

Light on purpose (the standard library only): the commands install it before they import the server (uvicorn,
FastAPI, the workflows: about 2 s on a loaded machine), read their settings and wait for the database, so that a
signal in that window is kept instead of killing the process; ``bot.server.processes`` then stops at once
(``event`` ends the wait for the database; uvicorn is handed ``received``).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """SIGINT/SIGTERM received since ``install``: ``received`` (the signal numbers, in order) and ``event`` (set
    by the first). Install from the main thread (``signal.signal``'s rule)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.event = threading.Event()
        self._previous: dict[int, Any] = {}

    def install(self) -> StopSignals:
        """Make SIGINT and SIGTERM recorded here (instead of raising ``KeyboardInterrupt`` / ending the process);
        returns self."""
        for sig in STOP_SIGNALS:
            previous = signal.signal(sig, self._record)
            self._previous.setdefault(sig, previous)
        return self

    def restore(self) -> None:
        """Put back the handlers ``install`` replaced (no-op when it was not called)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        self.event.set()
