"""What the scheduler reads and writes: pending steering requests whose ``next_action_at`` has come, and
ready runs whose retry backoff (``wake_at``) ends.

Every write is a conditional UPDATE, so that a reminder or an escalation happens once however many
schedulers (processes, restarts) look at the same request: ``reminders_sent`` moves only from the value the
caller saw, ``escalated_at`` only from NULL, and only while the request is pending.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, Sequence

from sqlalchemy import Connection, func, select, update

from store.dialect import Dialect
from store.models import RequestStatus, RunStatus, SteeringRequest
from store.runs import of_versions
from store.schema import runs, steering_requests

_PENDING = RequestStatus.PENDING.value


def _request(row: Any) -> SteeringRequest:
    return SteeringRequest.model_validate(dict(row._mapping))


class TimerRepo:
    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    # -- steering requests ----------------------------------------------------------------------------

    def due_request_ids(self, *, now: datetime, limit: int = 100,
                        runnable: Mapping[str, Sequence[int]] | None = None) -> list[int]:
        """Ids of pending requests whose ``next_action_at`` is at or before ``now``, most overdue first. On
        PostgreSQL rows another scheduler is picking or handling right now are left to it (``FOR UPDATE SKIP
        LOCKED``), so that concurrent schedulers share the work. ``runnable`` (``{workflow: [versions]}``, as a
        worker's claim takes it; None: any): only requests of runs of those versions, so that a process without
        a run's workflow version (a rolling deploy) leaves its due items to one that has it."""
        t = steering_requests.c
        due = (t.status == _PENDING) & (t.next_action_at <= now)
        if runnable is not None:
            due &= t.run_id.in_(select(runs.c.id).where(of_versions(sorted(runnable.items()))))
        stmt = select(t.id).where(due).order_by(t.next_action_at, t.id).limit(limit)
        stmt = self.dialect.lock(stmt, skip_locked=True)
        return [r.id for r in self.conn.execute(stmt)]

    def lock_due(self, request_id: int, *, now: datetime) -> SteeringRequest | None:
        """The request, locked for this transaction, if it is still pending and due at ``now``; None when it
        is not (decided, or handled by another scheduler meanwhile). On PostgreSQL this waits for a scheduler
        or a decision holding the row (``FOR UPDATE``, one row: no deadlock) and then reads it as they left
        it; on SQLite the write transaction already holds the database's write lock."""
        t = steering_requests.c
        stmt = select(steering_requests).where((t.id == request_id) & (t.status == _PENDING)
                                               & (t.next_action_at <= now))
        stmt = self.dialect.lock(stmt)
        row = self.conn.execute(stmt).first()
        return _request(row) if row else None

    def count_reminders(self, request_id: int, *, seen: int, slots: int) -> bool:
        """Record the reminder slots passed (``reminders_sent = slots``) if it still is ``seen`` and the
        request is pending. True when this call won (send the reminder), False when someone else did."""
        t = steering_requests.c
        res = self.conn.execute(update(steering_requests).where(
            (t.id == request_id) & (t.reminders_sent == seen) & (t.status == _PENDING)
        ).values(reminders_sent=slots))
        return res.rowcount == 1

    def escalate(self, request_id: int, *, now: datetime) -> bool:
        """Mark the pending request escalated at ``now`` unless it already is. True when this call did."""
        t = steering_requests.c
        res = self.conn.execute(update(steering_requests).where(
            (t.id == request_id) & t.escalated_at.is_(None) & (t.status == _PENDING)
        ).values(escalated_at=now))
        return res.rowcount == 1

    def reschedule(self, request_id: int, next_action_at: datetime | None) -> None:
        """Set when the scheduler looks at the request next (None: never)."""
        self.conn.execute(update(steering_requests).where(steering_requests.c.id == request_id)
                          .values(next_action_at=next_action_at))

    def earliest_request_action(self, *, after: datetime | None = None) -> datetime | None:
        """The earliest ``next_action_at`` among pending requests, only those later than ``after`` when given
        (None: nothing scheduled then)."""
        t = steering_requests.c
        where = t.status == _PENDING
        if after is not None:
            where = where & (t.next_action_at > after)
        return self.conn.execute(select(func.min(t.next_action_at)).where(where)).scalar()

    # -- retry backoffs ----------------------------------------------------------------------------------

    def due_retries(self, *, now: datetime, limit: int = 100) -> list[str]:
        """Ready runs whose retry backoff has ended (``wake_at <= now``) and no worker took yet."""
        stmt = (select(runs.c.id).where((runs.c.status == RunStatus.READY.value) & runs.c.wake_at.is_not(None)
                                        & (runs.c.wake_at <= now)).order_by(runs.c.wake_at).limit(limit))
        return [r.id for r in self.conn.execute(stmt)]

    def earliest_retry(self, *, after: datetime | None = None) -> datetime | None:
        """The earliest ``wake_at`` among ready runs, only those later than ``after`` when given (None: no
        retry is waiting then)."""
        where = runs.c.status == RunStatus.READY.value
        if after is not None:
            where = where & (runs.c.wake_at > after)
        return self.conn.execute(select(func.min(runs.c.wake_at)).where(where)).scalar()
