"""One pass over what is due on pending steering requests: reminders, escalations and timeouts.

``fire_due`` takes the pending requests whose ``next_action_at`` has come, most overdue first, in batches
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL: what another scheduler is picking is left to it), and has the
engine fire each (``Hazel.fire_request``: one transaction per request, once across processes and restarts;
see ``bot.engine.timeouts``). One request's failure never stops the others: it is logged, reported, and
looked at again ``TIMEOUT_RETRY_SEC`` later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from bot.engine import TIMEOUT_RETRY_SEC, error_line, log_error

if TYPE_CHECKING:
    from bot.engine import Hazel

log = logging.getLogger("hazel.timers")


@dataclass
class TickReport:
    """What one pass fired: request ids reminded and escalated, ``(request id, on_timeout)`` of timeouts that
    acted, run ids woken for their retry, and ``(request id, error)`` of those that failed (tried again later)."""

    reminders: list[int] = field(default_factory=list)
    escalations: list[int] = field(default_factory=list)
    timeouts: list[tuple[int, str]] = field(default_factory=list)
    retries_woken: list[str] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)

    @property
    def fired(self) -> int:
        return len(self.reminders) + len(self.escalations) + len(self.timeouts)


def fire_due(hazel: "Hazel", *, now: datetime, batch: int = 100, report: TickReport | None = None,
             held: dict[int, datetime] | None = None) -> TickReport:
    """Fire everything due at ``now`` on pending requests. Never raises for one request's failure. A request that
    failed is tried again ``TIMEOUT_RETRY_SEC`` later: its deadline is postponed in the database, or, when that
    write fails too (a full disk), in ``held`` (request id -> when; the caller's, kept across ticks: the
    scheduler's): it fired again at every tick, two ERROR lines each, on a disk already full (s33 F6)."""
    report = report or TickReport()
    held = held if held is not None else {}
    seen: set[int] = {i for i, until in held.items() if until > now}
    for request_id in [i for i in held if i not in seen]:
        del held[request_id]
    while True:
        ids = [i for i in hazel.due_request_ids(now=now, limit=batch) if i not in seen]
        if not ids:
            return report
        for request_id in ids:
            seen.add(request_id)
            try:
                fired = hazel.fire_request(request_id=request_id, now=now)
            except Exception as exc:  # one bad request must not stop the others
                log_error(log, exc, "scheduler: request %s failed", request_id)  # (no SQL, no parameters)
                report.errors.append((request_id, error_line(exc)))
                later = now + timedelta(seconds=TIMEOUT_RETRY_SEC)
                if not _postpone(hazel, request_id, later):
                    held[request_id] = later
                continue
            if fired.reminded:
                report.reminders.append(request_id)
            if fired.escalated:
                report.escalations.append(request_id)
            if fired.timeout is not None:
                report.timeouts.append((request_id, fired.timeout))


def _postpone(hazel: "Hazel", request_id: int, at: datetime) -> bool:
    """Whether ``request_id``'s deadline could be put off to ``at`` in the database."""
    try:
        hazel.postpone_request(request_id=request_id, until=at)
    except Exception as exc:  # the database itself is failing: held in memory instead (``fire_due``)
        log_error(log, exc, "scheduler: could not postpone request %s", request_id)
        return False
    return True
