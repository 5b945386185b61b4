"""Waiting in tests for something another thread or process does (never a fixed sleep)."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(predicate: Callable[[], object], timeout_sec: float, what: str) -> None:
    """Poll ``predicate`` every 50 ms until it is true; fail the test after ``timeout_sec`` naming ``what``."""
    deadline = time.monotonic() + timeout_sec
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
