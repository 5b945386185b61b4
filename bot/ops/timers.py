"""Firing what is due on pending steering requests: reminders, escalations and timeouts.

One pass (``fire_due``) takes the pending requests whose ``next_action_at`` has come, most overdue first, in
batches (``FOR UPDATE SKIP LOCKED`` on PostgreSQL: what another scheduler is picking is left to it). Each
request is handled in its own transaction that locks it, re-checks that it is still due, and fires with
conditional UPDATEs (``reminders_sent`` from the value seen, ``escalated_at`` from NULL), writing the outbox
message, the audit event and the next ``next_action_at`` together: a reminder or an escalation happens once
across processes and restarts.

A timeout that ends the request (``on_timeout`` approve, reject, fail, cancel) first pushes ``next_action_at``
forward by ``TIMEOUT_RETRY_SEC`` (a lease: a process that dies before acting leaves it due again), then acts
through the engine's own decision path as ``TIMEOUT_ACTOR``, with the delivery id ``timeout:<request id>``:
the request is settled once, by whoever comes first, person or timeout, and the timeout's decision is recorded
as the timeout's, never a person's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from bot.engine import deadlines
from bot.engine.errors import AlreadyDecidedError, HazelError, RunStateError
from bot.engine.transitions import progress
from bot.engine.versions import target_workflow
from bot.engine.workflow import SteeringPoint
from store import Tx
from store.models import Actor, RequestStatus, RunStatus, SteeringRequest

if TYPE_CHECKING:
    from bot.engine.hazel import Hazel

log = logging.getLogger("hazel.timers")

TIMEOUT_ACTOR = Actor(id="timeout", channel="timeout", name="timeout")
"""Who a timeout's decision is recorded as: Hazel itself, never a person (``bot.engine.permissions`` lets it act)."""
TIMEOUT_RETRY_SEC = 60.0
"""When a timeout that could not act (version not deployed, database error, crash) is tried again."""
UNRESOLVED_RETRY_SEC = 600.0
"""When a request whose steering point is not deployed (its run's version is gone) is looked at again."""


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


def fire_due(hazel: "Hazel", *, now: datetime, batch: int = 100, report: TickReport | None = None) -> TickReport:
    """Fire everything due at ``now`` on pending requests. Never raises for one request's failure: it is
    logged, reported in ``errors`` and tried again later."""
    report = report or TickReport()
    seen: set[int] = set()
    while True:
        with hazel.store.read() as tx:
            ids = [i for i in tx.timers.due_request_ids(now=now, limit=batch) if i not in seen]
        if not ids:
            return report
        for request_id in ids:
            seen.add(request_id)
            try:
                fire_request(hazel, request_id, now=now, report=report)
            except Exception as exc:  # one bad request must not stop the others
                log.exception("scheduler: request %s failed", request_id)
                report.errors.append((request_id, f"{type(exc).__name__}: {exc}"))
                _postpone(hazel, request_id, now + timedelta(seconds=TIMEOUT_RETRY_SEC))


def fire_request(hazel: "Hazel", request_id: int, *, now: datetime, report: TickReport) -> None:
    """Fire what is due on one request (see the module docstring)."""
    with hazel.store.transaction() as tx:
        request = tx.timers.lock_due(request_id, now=now)
        if request is None:
            return  # handled meanwhile, or another scheduler holds it now
        run = tx.runs.get(request.run_id)
        wf = target_workflow(hazel.registry, run) if run is not None else None
        point = wf.nodes.get(request.point) if wf is not None else None
        if not isinstance(point, SteeringPoint):
            log.warning("scheduler: request %s waits at %r of %s v%s, which is not deployed; looking again in "
                        "%.0f s", request.id, request.point, run.workflow if run else "?",
                        run.workflow_version if run else "?", UNRESOLVED_RETRY_SEC)
            tx.timers.reschedule(request.id, now + timedelta(seconds=UNRESOLVED_RETRY_SEC))
            return
        due = deadlines.due(point, created_at=request.created_at, due_at=request.due_at,
                            reminders_sent=request.reminders_sent, escalated_at=request.escalated_at, now=now)
        if due.timeout is not None:
            tx.timers.reschedule(request.id, now + timedelta(seconds=TIMEOUT_RETRY_SEC))
        else:
            _remind_and_escalate(tx, request, point, due, now, report)
            after = tx.requests.get(request.id)
            assert after is not None
            tx.timers.reschedule(request.id, deadlines.next_action_at(
                point, created_at=after.created_at, due_at=after.due_at, reminders_sent=after.reminders_sent,
                escalated_at=after.escalated_at))
    if due.timeout is None:
        hazel.deliverer.wake()
        return
    if act_on_timeout(hazel, request, point, due.timeout):
        report.timeouts.append((request.id, due.timeout))


def _remind_and_escalate(tx: Tx, request: SteeringRequest, point: SteeringPoint, due: deadlines.Due,
                         now: datetime, report: TickReport) -> None:
    if due.reminder and tx.timers.count_reminders(request.id, seen=request.reminders_sent,
                                                  slots=due.reminder_slots):
        tx.outbox.add(channel=request.channel, kind="reminder", now=now, run_id=request.run_id,
                      request_id=request.id, payload={"reminder": due.reminder_slots})
        tx.events.add(action="request.reminded", actor=TIMEOUT_ACTOR, now=now, run_id=request.run_id,
                      request_id=request.id, reminder=due.reminder_slots, channel=request.channel,
                      missed=due.reminder_slots - request.reminders_sent - 1 or None)
        report.reminders.append(request.id)
    if due.escalation and tx.timers.escalate(request.id, now=now):
        target = point.escalate_channel or request.channel
        tx.outbox.add(channel=target, kind="escalation", now=now, run_id=request.run_id, request_id=request.id,
                      payload={"timed_out": due.timed_out})
        tx.events.add(action="request.escalated", actor=TIMEOUT_ACTOR, now=now, run_id=request.run_id,
                      request_id=request.id, channel=target,
                      to=point.escalate_to.describe() if point.escalate_to is not None else None,
                      reason=(f"timed out after {_sec(point.timeout_sec)} s" if due.timed_out
                              else f"waited {_sec(point.escalate_after_sec)} s"))
        report.escalations.append(request.id)


def act_on_timeout(hazel: "Hazel", request: SteeringRequest, point: SteeringPoint, action: str) -> bool:
    """Apply ``on_timeout`` to ``request`` as ``TIMEOUT_ACTOR``. True when it acted; False when a person (or
    another scheduler) settled the request first. Other failures are logged, recorded in the audit log
    once per distinct error, and tried again after ``TIMEOUT_RETRY_SEC``."""
    waited = f"timed out after {_sec(point.timeout_sec)} s"
    try:
        if action in ("approve", "reject"):
            hazel.decide(request.run_id, action, TIMEOUT_ACTOR, request_id=request.id,
                         delivery_id=f"timeout:{request.id}",
                         payload={"reason": waited} if action == "reject" else None)
        else:
            return end_waiting_run(hazel, request, RunStatus.FAILED if action == "fail" else RunStatus.CANCELLED,
                                   f"{point.title!r} {waited} (on_timeout={action})")
    except AlreadyDecidedError:
        return False
    except HazelError as exc:
        log.warning("scheduler: timeout of request %s (%s) could not act: %s; trying again in %.0f s",
                    request.id, action, exc, TIMEOUT_RETRY_SEC)
        _record_timeout_failure(hazel, request, action, str(exc))
        return False
    return True


def end_waiting_run(hazel: "Hazel", request: SteeringRequest, status: RunStatus, message: str) -> bool:
    """End the run waiting on ``request`` as ``failed`` (with ``message`` as its error; ``hazel retry`` asks
    again) or ``cancelled``, in one transaction that first settles the request (only if still pending, so
    a person's decision that came first wins). Returns False when the request was no longer pending.

    Raises:
        RunStateError: the run is not waiting (nothing is changed).
    """
    now = hazel.clock()
    action = "fail" if status is RunStatus.FAILED else "cancel"
    with hazel.store.transaction() as tx:
        settled = tx.requests.settle(request.id, now=now, actor=TIMEOUT_ACTOR.label, action=action,
                                     status=RequestStatus.CANCELLED)
        if settled is None:
            return False
        extra = {"error": message} if status is RunStatus.FAILED else {}
        if not tx.runs.transition(request.run_id, from_statuses=[RunStatus.WAITING], now=now, status=status,
                                  wake_at=None, **extra):
            raise RunStateError(f"run {request.run_id} is not waiting on request {request.id}")
        tx.outbox.add(channel=request.channel, kind="request.closed", now=now, run_id=request.run_id,
                      request_id=request.id, payload={"cancelled": True, "timed_out": True})
        tx.events.add(action=f"run.{status.value}", actor=TIMEOUT_ACTOR, now=now, run_id=request.run_id,
                      request_id=request.id, reason=message)
        progress(tx, run_id=request.run_id, now=now, event=status.value, by=TIMEOUT_ACTOR.label,
                 **({"error": message} if status is RunStatus.FAILED else {"reason": message}))
    hazel.deliverer.wake()
    return True


def _record_timeout_failure(hazel: "Hazel", request: SteeringRequest, action: str, error: str) -> None:
    with hazel.store.transaction() as tx:
        earlier = [e for e in tx.events.for_run(request.run_id)
                   if e.action == "timeout.failed" and e.request_id == request.id and e.detail.get("error") == error]
        if not earlier:
            tx.events.add(action="timeout.failed", actor=TIMEOUT_ACTOR, now=hazel.clock(), run_id=request.run_id,
                          request_id=request.id, on_timeout=action, error=error[:500],
                          retry_sec=TIMEOUT_RETRY_SEC)


def _postpone(hazel: "Hazel", request_id: int, at: datetime) -> None:
    try:
        with hazel.store.transaction() as tx:
            tx.timers.reschedule(request_id, at)
    except Exception:  # the database itself is failing: the next tick sees the request again
        log.exception("scheduler: could not postpone request %s", request_id)


def _sec(value: float | None) -> str:
    """``259200`` rather than ``259200.0``."""
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
