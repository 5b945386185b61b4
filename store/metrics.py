"""What ``/metrics`` reads from the database at scrape time: runs by workflow and status, pending steering
requests by age, the outbox backlog. Three aggregate queries, no per-run work (``tx.metrics.snapshot``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, func, select

from store.dialect import Dialect
from store.models import OutboxStatus, RequestStatus
from store.schema import outbox, runs, steering_requests


@dataclass(frozen=True)
class MetricsSnapshot:
    """``runs``: ``(workflow, status, count)``. ``waiting``: pending requests in all, the sum of their
    ``created_at`` as Unix seconds, the oldest ``created_at``, and per age bound (seconds, in the order asked)
    how many waited at most that long. ``outbox``: ``(status, kind, count, oldest created_at)`` of pending and
    dead messages."""

    runs: list[tuple[str, str, int]]
    waiting_total: int
    waiting_epoch_sum: float
    waiting_oldest: datetime | None
    waiting_within: list[int]
    outbox: list[tuple[str, str, int, datetime | None]]


class MetricsRepo:
    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def snapshot(self, *, now: datetime, age_bounds_sec: tuple[float, ...]) -> MetricsSnapshot:
        """Everything ``/metrics`` shows of the database at ``now``."""
        run_rows = self.conn.execute(select(runs.c.workflow, runs.c.status, func.count())
                                     .group_by(runs.c.workflow, runs.c.status)).all()
        created = steering_requests.c.created_at
        columns = [func.count(), func.sum(self.dialect.epoch_seconds(created)), func.min(created)]
        for bound in age_bounds_sec:
            columns.append(func.count().filter(created >= now - timedelta(seconds=bound)))
        total, epoch_sum, oldest, *within = self.conn.execute(
            select(*columns).where(steering_requests.c.status == RequestStatus.PENDING.value)).one()
        outbox_rows = self.conn.execute(
            select(outbox.c.status, outbox.c.kind, func.count(), func.min(outbox.c.created_at))
            .where(outbox.c.status.in_([OutboxStatus.PENDING.value, OutboxStatus.DEAD.value]))
            .group_by(outbox.c.status, outbox.c.kind)).all()
        return MetricsSnapshot(
            runs=[(w, s, int(n)) for w, s, n in run_rows], waiting_total=int(total or 0),
            waiting_epoch_sum=float(epoch_sum or 0.0), waiting_oldest=oldest,
            waiting_within=[int(n or 0) for n in within],
            outbox=[(s, k, int(n), first) for s, k, n, first in outbox_rows])
