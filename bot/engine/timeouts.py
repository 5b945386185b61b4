"""What the scheduler asks of the engine for one pending steering request: send its reminder, escalate it,
or apply its timeout (the rules of when are ``bot.engine.deadlines``; the clock is ``bot.ops.scheduler``).

``fire`` handles one request in its own transaction that locks it, re-checks that it is still due, and fires
with conditional UPDATEs (``reminders_sent`` from the value seen, ``escalated_at`` from NULL), writing the
outbox message, the audit event and the next ``next_action_at`` together: a reminder or an escalation happens
once across processes and restarts.

A timeout that ends the request (``on_timeout`` approve, reject, fail, cancel) first pushes ``next_action_at``
forward by ``TIMEOUT_RETRY_SEC`` (a lease: a process that dies before acting leaves it due again), then acts
through the engine's own paths as ``TIMEOUT`` with the delivery id ``timeout:<request id>``: approve and reject
are decisions, fail and cancel end the run (``Steering.end_waiting``). The request is settled once, by whoever
comes first, person or timeout, and the timeout's decision is recorded as the timeout's, never a person's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable

from bot.engine import deadlines
from bot.engine.errors import AlreadyDecidedError, HazelError
from bot.engine.registry import Registry
from bot.engine.steering import Steering
from bot.engine.versions import request_point, target_workflow
from bot.engine.workflow import SteeringPoint
from store import Store, Tx
from store.models import SYSTEM, TIMEOUT, OutboxKind, RunStatus, SteeringRequest

log = logging.getLogger("hazel.timers")

TIMEOUT_RETRY_SEC = 60.0
"""When a timeout that could not act (version not deployed, database error, crash) is tried again."""
UNRESOLVED_RETRY_SEC = 600.0
"""When a request whose steering point is not deployed (its run's version is gone) is looked at again."""


@dataclass(frozen=True)
class Fired:
    """What firing one request did: a reminder sent, an escalation, the ``on_timeout`` that acted (None:
    none, or a person settled the request first), and the error of a timeout that could not act."""

    reminded: bool = False
    escalated: bool = False
    timeout: str | None = None
    error: str | None = None


class Timeouts:
    """Fires reminders, escalations and timeouts of single requests (see the module docstring)."""

    def __init__(self, store: Store, registry: Registry, steering: Steering, *, clock: Callable[[], datetime],
                 on_outbox: Callable[[], None]) -> None:
        self.store = store
        self.registry = registry
        self.steering = steering
        self.clock = clock
        self.on_outbox = on_outbox

    def fire(self, request_id: int, *, now: datetime) -> Fired:
        """Fire what is due at ``now`` on one request (nothing when it is not due or not pending any more)."""
        with self.store.transaction() as tx:
            request = tx.timers.lock_due(request_id, now=now)
            if request is None:
                return Fired()  # handled meanwhile, or another scheduler holds it now
            run = tx.runs.get(request.run_id)
            wf = target_workflow(self.registry, run) if run is not None else None
            point = request_point(tx, wf, run, request) if run is not None else None
            if not isinstance(point, SteeringPoint):
                log.warning("scheduler: request %s waits at %r of %s v%s, which is not deployed; looking again "
                            "in %.0f s", request.id, request.point, run.workflow if run else "?",
                            run.workflow_version if run else "?", UNRESOLVED_RETRY_SEC)
                tx.timers.reschedule(request.id, now + timedelta(seconds=UNRESOLVED_RETRY_SEC))
                return Fired()
            due = deadlines.due(point, created_at=request.created_at, due_at=request.due_at,
                                reminders_sent=request.reminders_sent, escalated_at=request.escalated_at, now=now)
            if due.timeout is not None:
                tx.timers.reschedule(request.id, now + timedelta(seconds=TIMEOUT_RETRY_SEC))
                fired = Fired()
            else:
                fired = _remind_and_escalate(tx, request, point, due, now)
                after = tx.requests.get(request.id)
                assert after is not None
                tx.timers.reschedule(request.id, deadlines.next_action_at(
                    point, created_at=after.created_at, due_at=after.due_at, reminders_sent=after.reminders_sent,
                    escalated_at=after.escalated_at))
        if due.timeout is None:
            self.on_outbox()
            return fired
        return self._act(request, point, due.timeout)

    def postpone(self, request_id: int, until: datetime) -> None:
        """Look at the request again at ``until`` (after an error)."""
        with self.store.transaction() as tx:
            tx.timers.reschedule(request_id, until)

    def _act(self, request: SteeringRequest, point: SteeringPoint, action: str) -> Fired:
        """Apply ``on_timeout`` as ``TIMEOUT``; a failure is logged, audited once per distinct error, and
        tried again after ``TIMEOUT_RETRY_SEC``."""
        waited = f"timed out after {_sec(_waited_sec(request, point))} s"
        try:
            if action in ("approve", "reject"):
                self.steering.decide(request.run_id, action, TIMEOUT, request_id=request.id,
                                     delivery_id=f"timeout:{request.id}",
                                     payload={"reason": waited} if action == "reject" else None)
            elif not self.steering.end_waiting(request, RunStatus.FAILED if action == "fail" else RunStatus.CANCELLED,
                                               f"{point.title!r} {waited} (on_timeout={action})"):
                return Fired()
        except AlreadyDecidedError:
            return Fired()
        except HazelError as exc:
            log.warning("scheduler: timeout of request %s (%s) could not act: %s; trying again in %.0f s",
                        request.id, action, exc, TIMEOUT_RETRY_SEC)
            self._record_failure(request, action, str(exc))
            return Fired(error=str(exc))
        return Fired(timeout=action)

    def _record_failure(self, request: SteeringRequest, action: str, error: str) -> None:
        with self.store.transaction() as tx:
            earlier = [e for e in tx.events.for_run(request.run_id) if e.action == "timeout.failed"
                       and e.request_id == request.id and e.detail.get("error") == error]
            if not earlier:
                tx.events.add(action="timeout.failed", actor=TIMEOUT, now=self.clock(), run_id=request.run_id,
                              request_id=request.id, on_timeout=action, error=error[:500],
                              retry_sec=TIMEOUT_RETRY_SEC)


def _waited_sec(request: SteeringRequest, point: SteeringPoint) -> float | None:
    """The wait a timeout of ``request`` ends, in seconds: from its ``created_at`` to the ``due_at`` it was opened
    with, as stored; the point's ``timeout_sec`` when the request has no due time. (The code that fires it may
    declare another ``timeout_sec`` than the process that opened it: the message says the wait that happened,
    s25 F7.)"""
    if request.due_at is not None:
        return round((request.due_at - request.created_at).total_seconds(), 3)
    return point.timeout_sec


def _remind_and_escalate(tx: Tx, request: SteeringRequest, point: SteeringPoint, due: deadlines.Due,
                         now: datetime) -> Fired:
    """Queue the reminder and the escalation ``due`` calls for (each once: conditional updates). When both fall
    due together (a catch-up after a restart, or the same moment) the escalation is queued first, so that it
    is announced before a reminder that already names the backup approvers (a run's messages to one channel are
    delivered in order)."""
    reminded = escalated = False
    if due.escalation and tx.timers.escalate(request.id, now=now):
        target = point.escalate_channel or request.channel
        tx.outbox.add(channel=target, kind=OutboxKind.ESCALATION, now=now, run_id=request.run_id,
                      request_id=request.id, payload={"timed_out": due.timed_out})
        tx.events.add(action="request.escalated", actor=SYSTEM, now=now, run_id=request.run_id,
                      request_id=request.id, channel=target,
                      to=point.escalate_to.describe() if point.escalate_to is not None else None,
                      reason=(f"timed out after {_sec(_waited_sec(request, point))} s" if due.timed_out
                              else f"waited {_sec(point.escalate_after_sec)} s"))
        escalated = True
    if due.reminder and tx.timers.count_reminders(request.id, seen=request.reminders_sent,
                                                  slots=due.reminder_slots):
        tx.outbox.add(channel=request.channel, kind=OutboxKind.REMINDER, now=now, run_id=request.run_id,
                      request_id=request.id, payload={"reminder": due.reminder_slots})
        tx.events.add(action="request.reminded", actor=SYSTEM, now=now, run_id=request.run_id,
                      request_id=request.id, reminder=due.reminder_slots, channel=request.channel,
                      missed=due.missed or None)
        reminded = True
    return Fired(reminded=reminded, escalated=escalated)


def _sec(value: float | None) -> str:
    """``259200`` rather than ``259200.0``."""
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
