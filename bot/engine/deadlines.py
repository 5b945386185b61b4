"""When a pending steering request needs the scheduler: reminders, escalation and timeout (pure rules).

All times derive from what the request row stores (``created_at``, ``due_at``, ``reminders_sent``,
``escalated_at``) and from its steering point, so that any process, after any restart, computes the same
schedule:

- reminder slot ``k`` (k = 0, 1, …) is at ``created_at + first + k * remind_every_sec``, where ``first`` is
  ``remind_after_sec`` (or ``remind_every_sec`` when only that is set); without ``remind_every_sec`` there is
  one slot. ``reminders_sent`` counts the slots already passed: a scheduler that was down while several slots
  passed sends ONE reminder for them, not a burst. A reminder sent late by half a ``remind_every_sec`` or more
  (the scheduler was stopped, or behind) also stands for the next slot, which is then at most half a period
  away: reminders are never less than half a period apart, and the series keeps its slots.
- escalation is at ``created_at + escalate_after_sec``, once (``escalated_at`` set).
- the timeout is at ``due_at`` (``created_at + timeout_sec``) when the point has an ``on_timeout``;
  ``on_timeout="escalate"`` is an escalation at ``due_at`` (nothing more once escalated). A point with
  ``timeout_sec`` and no ``on_timeout`` only shows its due date.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.engine.workflow import SteeringPoint

ENDING_TIMEOUTS = ("approve", "reject", "fail", "cancel")
"""``on_timeout`` values that settle the request (``escalate`` leaves it pending)."""


@dataclass(frozen=True)
class Due:
    """What is due on a request at a given time.

    ``reminder``: a reminder is due; ``reminder_slots``: the reminder slots it stands for (the new
    ``reminders_sent``: those passed by then, plus the next one when this reminder is late by half a period
    or more); ``missed``: how many of the slots passed went by without a reminder (besides the one it is
    for). ``escalation``: escalation is due (by ``escalate_after_sec``, or by an
    ``on_timeout="escalate"`` timeout when ``timed_out``). ``timeout``: an ending timeout is due (the
    point's ``on_timeout`` is one of ``ENDING_TIMEOUTS``); reminders and escalation are then skipped.
    """

    reminder: bool = False
    reminder_slots: int = 0
    missed: int = 0
    escalation: bool = False
    timed_out: bool = False
    timeout: str | None = None

    @property
    def anything(self) -> bool:
        return self.reminder or self.escalation or self.timeout is not None


def _first_reminder_sec(point: SteeringPoint) -> float | None:
    return point.remind_after_sec if point.remind_after_sec is not None else point.remind_every_sec


def reminder_at(point: SteeringPoint, *, created_at: datetime, slot: int) -> datetime | None:
    """When reminder slot ``slot`` (0-based) comes; None when the point has no such slot."""
    first = _first_reminder_sec(point)
    if first is None or (slot > 0 and not point.remind_every_sec):
        return None
    return created_at + timedelta(seconds=first + slot * (point.remind_every_sec or 0.0))


def reminder_slots_passed(point: SteeringPoint, *, created_at: datetime, now: datetime) -> int:
    """How many reminder slots have come by ``now``."""
    first = _first_reminder_sec(point)
    if first is None:
        return 0
    elapsed_sec = (now - created_at).total_seconds() - first
    if elapsed_sec < 0:
        return 0
    if not point.remind_every_sec:
        return 1
    return math.floor(elapsed_sec / point.remind_every_sec) + 1


def escalation_at(point: SteeringPoint, *, created_at: datetime, escalated_at: datetime | None) -> datetime | None:
    """When the request escalates by ``escalate_after_sec`` (None: not configured, or already escalated)."""
    if escalated_at is not None or point.escalate_after_sec is None:
        return None
    return created_at + timedelta(seconds=point.escalate_after_sec)


def timeout_at(point: SteeringPoint, *, due_at: datetime | None, escalated_at: datetime | None) -> datetime | None:
    """When the point's ``on_timeout`` fires (None: no timeout action, or an escalation already done)."""
    if due_at is None or point.on_timeout is None:
        return None
    if point.on_timeout == "escalate" and escalated_at is not None:
        return None
    return due_at


def next_action_at(point: SteeringPoint, *, created_at: datetime, due_at: datetime | None,
                   reminders_sent: int = 0, escalated_at: datetime | None = None) -> datetime | None:
    """The earliest time the scheduler must look at the request again (None: never)."""
    times = [
        reminder_at(point, created_at=created_at, slot=reminders_sent),
        escalation_at(point, created_at=created_at, escalated_at=escalated_at),
        timeout_at(point, due_at=due_at, escalated_at=escalated_at),
    ]
    present = [t for t in times if t is not None]
    return min(present) if present else None


def due(point: SteeringPoint, *, created_at: datetime, due_at: datetime | None, reminders_sent: int,
        escalated_at: datetime | None, now: datetime) -> Due:
    """What is due at ``now`` for a request in the given state."""
    timeout = timeout_at(point, due_at=due_at, escalated_at=escalated_at)
    timed_out = timeout is not None and timeout <= now
    if timed_out and point.on_timeout in ENDING_TIMEOUTS:
        return Due(timed_out=True, timeout=point.on_timeout)
    slots = reminder_slots_passed(point, created_at=created_at, now=now)
    reminder = slots > reminders_sent
    counted = max(slots, reminders_sent)
    if reminder and point.remind_every_sec:  # late by half a period or more: it stands for the next slot too
        counted = reminder_slots_passed(point, created_at=created_at,
                                        now=now + timedelta(seconds=point.remind_every_sec / 2))
    escalate = escalation_at(point, created_at=created_at, escalated_at=escalated_at)
    return Due(
        reminder=reminder, reminder_slots=counted, missed=max(0, slots - reminders_sent - 1),
        escalation=(escalate is not None and escalate <= now) or timed_out, timed_out=timed_out,
    )
