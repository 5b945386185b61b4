"""The ``hazel_events`` table: the audit log of who did what, when, through which channel."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from store import fast
from store.models import Actor, AuditEvent
from store.schema import events


_INSERT = events.insert()
"""Built once and executed with a parameter dict (SQLAlchemy reuses the compiled form; see ``store.checkpoints``)."""


class EventRepo:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def add(self, *, action: str, actor: Actor, now: datetime, run_id: str | None = None,
            request_id: int | None = None, **detail: Any) -> None:
        """Record that ``actor`` (its identity and its person) did ``action``; ``detail``: JSON facts.
        A console proxy (``--as``, or a person link the operator made) is recorded with ``acting_for`` in the
        detail."""
        if actor.acting_for is not None:
            detail = {"acting_for": actor.acting_for, **detail}
        fast.execute(self.conn, _INSERT, dict(
            run_id=run_id, request_id=request_id, actor_id=actor.id, actor_name=actor.name,
            channel=actor.channel, action=action, detail=detail, created_at=now, person=actor.who,
        ))

    def for_run(self, run_id: str, *, limit: int = 1000) -> list[AuditEvent]:
        rows = self.conn.execute(select(events).where(events.c.run_id == run_id)
                                 .order_by(events.c.id).limit(limit))
        return [AuditEvent.model_validate(dict(r._mapping)) for r in rows]

    def latest_cause(self, run_id: str) -> AuditEvent | None:
        """The run's newest event that set it going: ``run.started``, ``run.retried`` or a decision
        (``decision.*`` but ``decision.refused``); None when it has none. For rare paths (a retry refused
        because the run is running), through ``ix_hazel_events_run_id``."""
        e = events.c
        moving = (e.action.in_(["run.started", "run.retried"])
                  | (e.action.startswith("decision.") & (e.action != "decision.refused")))
        row = self.conn.execute(select(events).where((e.run_id == run_id) & moving)
                                .order_by(e.id.desc()).limit(1)).first()
        return AuditEvent.model_validate(dict(row._mapping)) if row else None

    def crashes_at(self, run_id: str, head_seq: int, *, limit: int = 50) -> int:
        """How many times in a row the run was recovered from a dead process (``run.recovered``, ``owner died``)
        at checkpoint ``head_seq``, since what last set it going (a start, a retry, a decision): its newest
        events, newest first, counted until another kind of recovery, another checkpoint or such a cause. For a
        rare path (a dead worker's run), through ``ix_hazel_events_run_id``; at most ``limit`` events read."""
        e = events.c
        rows = self.conn.execute(
            select(e.action, e.detail).where((e.run_id == run_id) & (
                e.action.in_(["run.recovered", "run.started", "run.retried"])
                | (e.action.startswith("decision.") & (e.action != "decision.refused"))))
            .order_by(e.id.desc()).limit(limit))
        n = 0
        for action, detail in rows:
            detail = detail or {}
            if action != "run.recovered" or detail.get("reason") != "owner died" or \
                    detail.get("head_seq") != head_seq:
                break
            n += 1
        return n

    def recent(self, *, action_prefix: str | None = None, limit: int = 100) -> list[AuditEvent]:
        stmt = select(events)
        if action_prefix:
            stmt = stmt.where(events.c.action.startswith(action_prefix, autoescape=True))
        rows = self.conn.execute(stmt.order_by(events.c.id.desc()).limit(limit))
        return [AuditEvent.model_validate(dict(r._mapping)) for r in rows]
