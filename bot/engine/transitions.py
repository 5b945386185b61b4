"""Writes that several paths share, always inside the caller's transaction: opening a steering request with
its notification, and recording a run's progress for the channels to report."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bot.engine import deadlines
from bot.ops import hooks
from bot.engine.workflow import SteeringPoint, Workflow
from store import Tx
from store.models import Actor

SYSTEM = Actor(id="hazel", channel="system", name="Hazel")


def open_request(tx: Tx, *, run_id: str, wf: Workflow, point: SteeringPoint, checkpoint_seq: int, now: datetime,
                 steps: list[str] | None = None) -> int:
    """Insert a pending steering request at ``checkpoint_seq`` and its ``request.opened`` outbox message
    (plus a ``run.progress`` message in the thread of the previous request, when steps ran since), with its
    ``next_action_at`` set for the scheduler (see ``bot.engine.deadlines``). Returns the request id."""
    due_at = now + timedelta(seconds=point.timeout_sec) if point.timeout_sec else None
    request_id = tx.requests.insert(run_id=run_id, checkpoint_seq=checkpoint_seq, point=point.name,
                                    title=point.title, channel=point.channel,
                                    approvals_required=point.approvals_required, now=now, due_at=due_at)
    first_action_at = deadlines.next_action_at(point, created_at=now, due_at=due_at)
    if first_action_at is not None:  # the scheduler's first look: reminder, escalation or timeout
        tx.timers.reschedule(request_id, first_action_at)
    progress(tx, run_id=run_id, now=now, event="waiting", steps=steps or [], next_request_id=request_id,
             exclude_request_id=request_id)
    tx.outbox.add(channel=point.channel, kind="request.opened", now=now, run_id=run_id, request_id=request_id)
    hooks.emit(tx, "run.waiting", run_id=run_id, now=now, request=request_id, steps=steps or [])
    tx.events.add(action="request.opened", actor=SYSTEM, now=now, run_id=run_id, request_id=request_id,
                  point=point.name, channel=point.channel)
    return request_id


def progress(tx: Tx, *, run_id: str, now: datetime, event: str, exclude_request_id: int | None = None,
             **facts: Any) -> None:
    """Queue a ``run.progress`` message (``event``: waiting, completed, failed, rejected, cancelled) for the
    channel of the run's latest earlier steering request, posted in that request's thread. A run that never
    asked anyone reports on the console."""
    if event != "waiting":  # run.waiting is emitted by open_request, with its request
        hooks.emit(tx, f"run.{event}", run_id=run_id, now=now, **facts)
    previous = tx.requests.latest_for_run(run_id, exclude_id=exclude_request_id)
    if previous is None and event == "waiting":
        return  # the first request announces itself
    channel = previous.channel if previous is not None else "console"
    tx.outbox.add(channel=channel, kind="run.progress", now=now, run_id=run_id,
                  request_id=previous.id if previous is not None else None,
                  payload={"event": event, **{k: v for k, v in facts.items() if v is not None}})
