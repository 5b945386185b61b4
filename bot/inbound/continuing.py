"""After a start, retry or settling decision taken over HTTP the run continues at once, and the answer never
waits for its steps: the worker pool of ``hazel serve`` was woken by ``Hazel.on_ready``; in a process without
one (tests, an embedding application) the run is executed here, in a background thread."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from bot.engine import log_context

if TYPE_CHECKING:
    from bot.engine import Hazel

log = logging.getLogger("hazel.inbound")


def continue_soon(hazel: "Hazel", run_id: str, *, origin: str) -> None:
    """Let the run ``run_id`` continue without waiting for it (``origin``: ``api`` or ``web``, in the thread's
    name and the log). A failure leaves the run as committed: a worker or ``hazel retry`` picks it up."""
    if hazel.has_ready_listeners:
        return

    def drive() -> None:
        try:
            with log_context(run_id=run_id):
                hazel.drive(run_id=run_id)
        except Exception:
            log.exception("%s: executing run %s in the background failed", origin, run_id)

    threading.Thread(target=drive, name=f"hazel-{origin}-run-{run_id}", daemon=True).start()
