"""Writes that several paths share, always inside the caller's transaction: opening a steering request with
its notification, closing one, ending a run, and recording a run's progress for the channels to report.

Each exists once: a decision, a rewind, a cancel and a timeout close a request with ``close_request``; a
rejection, a cancel and a timeout end a run with ``end_run``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable

from bot.engine import deadlines, permissions
from bot.engine.workflow import SteeringPoint, Workflow
from store import Tx
from store.fast import Later
from store.models import SYSTEM, Actor, OutboxKind, RequestStatus, RunStatus, SteeringRequest, Vote
from store.waiting import NATIVE_KEY


@dataclass(frozen=True)
class Asked:
    """A run's latest steering request as the caller already knows it (its id and channel): where the run's
    progress is reported. ``request_id`` None: the run has never asked anyone (progress goes to the console).
    A caller that holds this (a run it just started, a request it just decided) spares the transaction the
    query for it."""

    request_id: int | None
    channel: str = "console"


NEVER_ASKED = Asked(None)


def open_requests(tx: Tx, *, run_id: str, wf: Workflow, points: list[SteeringPoint], checkpoint_seq: int,
                  now: datetime, steps: list[str] | None = None, asked: Asked | None = None,
                  paused: list[str] | None = None) -> list[int]:
    """``open_request`` for each of ``points``, the requests a run waits on at once (a LangGraph super-step's
    interrupts). Each one's progress is reported in the thread of the run's request before them, never in the
    thread of a request opened with it (a run asking for the first time reports nothing: each request
    announces itself). Returns the request ids."""
    if asked is None and len(points) > 1:
        previous = tx.requests.latest_for_run(run_id)
        asked = Asked(previous.id, previous.channel) if previous is not None else NEVER_ASKED
    return [open_request(tx, run_id=run_id, wf=wf, point=point, checkpoint_seq=checkpoint_seq, now=now, steps=steps,
                         asked=asked, paused=paused) for point in points]


def open_request(tx: Tx, *, run_id: str, wf: Workflow, point: SteeringPoint, checkpoint_seq: int, now: datetime,
                 steps: list[str] | None = None, asked: Asked | None = None, paused: list[str] | None = None) -> int:
    """Insert a pending steering request at ``checkpoint_seq`` and its ``request.opened`` outbox message
    (plus a ``run.progress`` message in the thread of the previous request, when steps ran since), with its
    ``next_action_at`` set for the scheduler (see ``bot.engine.deadlines``) and noted in ``tx.deadline``, which
    the store hands to ``on_deadline`` once the transaction commits. Returns the request id.
    ``asked``: the run's previous request, when the caller knows it (else it is read). ``paused``: the graph
    nodes of the last of ``steps`` that stopped to ask for steering rather than finished (a LangGraph
    super-step's interrupts; reported as such, not as done)."""
    due_at = now + timedelta(seconds=point.timeout_sec) if point.timeout_sec else None
    native = wf.nodes.get(point.name) is point  # else asked at run time (LangGraph): its own settings
    request_id = tx.requests.insert(run_id=run_id, checkpoint_seq=checkpoint_seq, point=point.name,
                                    title=point.title, channel=point.channel,
                                    approvals_required=point.approvals_required, now=now, due_at=due_at,
                                    workflow=wf.name, workflow_version=wf.version,
                                    point_key=NATIVE_KEY if native else permissions.permission_key(point))
    first_action_at = deadlines.next_action_at(point, created_at=now, due_at=due_at)
    if first_action_at is not None:  # the scheduler's first look: reminder, escalation or timeout
        tx.timers.reschedule(request_id, first_action_at)
        tx.notify_deadline(first_action_at)  # schedulers re-arm for it (this process's: after the commit)
    progress(tx, run_id=run_id, now=now, event="waiting", steps=steps or [], next_request_id=request_id,
             exclude_request_id=request_id, asked=asked, paused=paused or None)
    tx.outbox.add(channel=point.channel, kind=OutboxKind.REQUEST_OPENED, now=now, run_id=run_id,
                  request_id=request_id)
    tx.hooks.emit("run.waiting", run_id=run_id, now=now, request=request_id, steps=steps or [])
    tx.events.add(action="request.opened", actor=SYSTEM, now=now, run_id=run_id, request_id=request_id,
                  point=point.name, channel=point.channel)
    return request_id


def close_request(tx: Tx, request: SteeringRequest, *, now: datetime, by: Actor, action: str,
                  status: RequestStatus = RequestStatus.DECIDED, as_read: bool = False,
                  **facts: Any) -> SteeringRequest | None:
    """Settle ``request`` (only while it is still pending: a conditional UPDATE, the database settles races)
    and queue the ``request.closed`` update of its message. Returns the request as settled, or None when it
    was settled meanwhile (someone else won; nothing was written). ``as_read``: only while it still has the
    approvals ``request`` has (else None too)."""
    after = tx.requests.settle(request.id, now=now, actor=by.label, action=action, status=status,
                               approvals=request.approvals if as_read else None)
    if after is not None:
        tx.outbox.add(channel=request.channel, kind=OutboxKind.REQUEST_CLOSED, now=now, run_id=request.run_id,
                      request_id=request.id, payload={k: v for k, v in facts.items() if v is not None})
    return after


def vote_request_later(tx: Tx, request: SteeringRequest, *, now: datetime, by: Actor
                       ) -> tuple[SteeringRequest, Later[SteeringRequest | None]]:
    """Count one approval on the pending ``request``; it settles as approved when it reaches its quorum. Queues
    the update of its message: ``request.closed`` once settled, else ``request.vote``, whose payload carries the
    vote as counted (``Vote``: who, k of n), so that it says so whenever it is delivered (after the request
    settled, too). The vote is sent without
    waiting for its answer: the request after it is predicted (``RequestRepo.vote_later``; the caller holds the
    run's lock, as every decider does) and the message update queued on the prediction. Returns it with the
    vote's answer, which the caller checks before committing (None: the request was no longer pending; its
    writes must roll back)."""
    after, answer = tx.requests.vote_later(request, now=now, actor=by.label)
    if after.status is RequestStatus.DECIDED:
        kind, payload = OutboxKind.REQUEST_CLOSED, None
    else:
        kind = OutboxKind.REQUEST_VOTE
        payload = Vote(by=by.label, approvals=after.approvals, required=after.approvals_required).payload()
    tx.outbox.add(channel=request.channel, kind=kind, now=now, run_id=request.run_id, request_id=request.id,
                  payload=payload)
    return after, answer


FOLLOWING = ("slack", "jira")
"""Kinds of channel whose request thread follows the run to its end: the run's latest request there (a Slack
thread, a Jira issue) hears how the run ended (completed, failed, rejected, cancelled) even when it ended at a
request on another channel."""


def progress(tx: Tx, *, run_id: str, now: datetime, event: str, exclude_request_id: int | None = None,
             asked: Asked | None = None, **facts: Any) -> None:
    """Queue a ``run.progress`` message (``event``: waiting, completed, failed, rejected, cancelled) for the
    channel of the run's latest earlier steering request (``asked`` when the caller knows it, else read),
    posted in that request's thread (a run that never asked anyone reports on the console), and the
    ``run.<event>`` hook event.

    An ending (any event but ``waiting``) is also queued, once, for the run's latest request on each kind of
    channel in ``FOLLOWING`` other than that request's own (a Slack thread that said the run now waits at a
    Jira point hears how it ended there, and a Jira issue that said it waits at a Slack point)."""
    if event != "waiting":  # run.waiting is emitted by open_request, with its request
        tx.hooks.emit(f"run.{event}", run_id=run_id, now=now, **facts)
    if asked is None:
        previous = tx.requests.latest_for_run(run_id, exclude_id=exclude_request_id)
        asked = Asked(previous.id, previous.channel) if previous is not None else NEVER_ASKED
    if asked.request_id is None and event == "waiting":
        return  # the first request announces itself
    payload = {"event": event, **{k: v for k, v in facts.items() if v is not None}}
    follow: tuple[str, ...] = ()
    if event != "waiting" and asked.request_id is not None:  # (a run that never asked has no thread anywhere)
        # (not where the run's latest request is: its thread is told by the message itself)
        follow = tuple(k for k in FOLLOWING if asked.channel.split(":", 1)[0] != k)
    tx.outbox.add(channel=asked.channel, kind=OutboxKind.RUN_PROGRESS, now=now, run_id=run_id,
                  request_id=asked.request_id, payload=payload, and_latest_on=follow)


def end_run(tx: Tx, *, run_id: str, status: RunStatus, now: datetime, by: Actor,
            from_statuses: Iterable[RunStatus] | None = None, request_id: int | None = None,
            reason: str | None = None, error: str | None = None, steps: list[str] | None = None,
            asked: Asked | None = None, keep_lease: bool = False) -> bool:
    """End the run as ``status`` (rejected, cancelled, failed, completed): move it from ``from_statuses``
    (None: the caller already moved it, with its own conditional or fenced write), record ``run.<status>``
    in the audit log (by ``by``; a completion is not an audit event) and report it to the channels and hooks
    (``asked``: see ``progress``).
    Returns False, writing nothing, when the run was not in ``from_statuses`` (someone else moved it first).
    ``keep_lease``: the run's lease stays (a run cancelled while a process executes its step: that process
    still holds it until its step ends, ``RunRepo.drop_lease``, and a rewind waits for it)."""
    lease = {} if keep_lease else {"lease_owner": None, "lease_token": None, "lease_expires_at": None}
    if from_statuses is not None and not tx.runs.transition(
            run_id, from_statuses=list(from_statuses), now=now, status=status, wake_at=None, **lease,
            **({"error": error} if error is not None else {})):
        return False
    if status is not RunStatus.COMPLETED:
        tx.events.add(action=f"run.{status.value}", actor=by, now=now, run_id=run_id, request_id=request_id,
                      reason=reason, **({"error": error} if error is not None else {}))
    ended_by = status is not RunStatus.COMPLETED  # (who, as a name and as the identity they acted as)
    progress(tx, run_id=run_id, now=now, event=status.value, by=by.label if ended_by else None,
             by_id=by.id if ended_by else None, by_channel=by.channel if ended_by else None, reason=reason,
             error=error, steps=steps, asked=asked)
    return True
