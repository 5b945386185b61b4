"""``TimerRepo``: the conditional writes that make a reminder or an escalation happen once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from store import NewCheckpoint, Store
from store.models import RequestStatus, RunStatus

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def pending_request(store: Store, run_id: str, *, next_action_at: datetime | None) -> int:
    with store.transaction() as tx:
        tx.runs.insert(run_id=run_id, workflow="wf", workflow_version=1, started_by="a", started_via="console",
                       now=T0, status=RunStatus.WAITING)
        tx.checkpoints.write(NewCheckpoint(run_id=run_id, seq=0, parent_seq=None, branch=0, step="__start__",
                                           next_step="review", workflow_version=1, created_at=T0), {}, None)
        request_id = tx.requests.insert(run_id=run_id, checkpoint_seq=0, point="review", title="Review",
                                        channel="console", approvals_required=1, now=T0, due_at=None)
        tx.timers.reschedule(request_id, next_action_at)
    return request_id


def test_due_requests_most_overdue_first(store: Store) -> None:
    late = pending_request(store, "r1", next_action_at=T0 + timedelta(minutes=5))
    early = pending_request(store, "r2", next_action_at=T0 + timedelta(minutes=1))
    pending_request(store, "r3", next_action_at=T0 + timedelta(hours=1))
    pending_request(store, "r4", next_action_at=None)
    now = T0 + timedelta(minutes=10)
    with store.transaction() as tx:
        assert tx.timers.due_request_ids(now=now) == [early, late]
        assert tx.timers.due_request_ids(now=now, limit=1) == [early]
        assert tx.timers.earliest_request_action() == T0 + timedelta(minutes=1)
        tx.requests.settle(early, now=now, actor="x", action="approve")
    with store.transaction() as tx:
        assert tx.timers.due_request_ids(now=now) == [late]  # only pending ones
        assert tx.timers.lock_due(early, now=now) is None
        assert tx.timers.lock_due(late, now=T0) is None  # not due yet
        assert tx.timers.lock_due(late, now=now).id == late


def test_reminders_and_escalation_are_counted_once(store: Store) -> None:
    request_id = pending_request(store, "r1", next_action_at=T0)
    with store.transaction() as tx:
        assert tx.timers.count_reminders(request_id, seen=0, slots=1) is True
        assert tx.timers.count_reminders(request_id, seen=0, slots=1) is False  # a stale scheduler loses
        assert tx.timers.escalate(request_id, now=T0) is True
        assert tx.timers.escalate(request_id, now=T0 + timedelta(seconds=1)) is False
    with store.read() as tx:
        request = tx.requests.get(request_id)
    assert request.reminders_sent == 1 and request.escalated_at == T0
    with store.transaction() as tx:
        tx.requests.settle(request_id, now=T0, actor="x", action="cancel", status=RequestStatus.CANCELLED)
        assert tx.timers.count_reminders(request_id, seen=1, slots=2) is False  # not pending any more


def test_due_retries_and_earliest_wake(store: Store) -> None:
    with store.transaction() as tx:
        for run_id, wake in (("a", T0 + timedelta(seconds=30)), ("b", T0 + timedelta(seconds=5)), ("c", None)):
            tx.runs.insert(run_id=run_id, workflow="wf", workflow_version=1, started_by="x", started_via="console",
                           now=T0)
            tx.runs.transition(run_id, from_statuses=[RunStatus.READY], now=T0, wake_at=wake)
    with store.read() as tx:
        assert tx.timers.earliest_retry() == T0 + timedelta(seconds=5)
        assert tx.timers.due_retries(now=T0) == []
        assert tx.timers.due_retries(now=T0 + timedelta(seconds=10)) == ["b"]
        assert tx.timers.due_retries(now=T0 + timedelta(minutes=1)) == ["b", "a"]
