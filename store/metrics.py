"""What ``/metrics`` reads from the database at scrape time: runs by workflow and status, pending steering
requests by age, the outbox backlog (``tx.metrics.snapshot``).

Nothing here counts rows of the big tables: runs and pending requests are counted by triggers, in the
transaction that changes them, into ``hazel_run_counts`` and ``hazel_pending_counts`` (migration 0003), and a
scrape sums those counters. The number of requests pending since ``T`` is split at the minute, hour, 4-hour
and day boundaries after ``T``: the requests created in ``[T, next minute)`` are counted exactly on the index
of pending requests by creation time (at most a minute's worth), then whole minutes up to the next hour, whole
hours up to the next 4 hours, whole 4-hour blocks up to the next day and whole days from there on are summed
from the counters. A scrape reads a bounded number of counter rows (at most 59 + 3 + 5 minute, hour and
4-hour buckets per age bound, plus one per day of the age bound and one per shard for the totals), whatever
the number of runs or of requests waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from sqlalchemy import Connection, bindparam, func, select

from store.dialect import Dialect
from store.models import OutboxStatus, RequestStatus
from store.schema import outbox, pending_counts, run_counts, steering_requests

GRAINS = (60, 3600, 14400, 86400)
"""Bucket sizes of ``hazel_pending_counts`` (seconds; grain 0 holds the totals), as migration 0003 keeps them;
each divides the next."""
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


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


def _ceil(seconds: int, grain: int) -> int:
    return -(-seconds // grain) * grain


def _since_params(i: int, since: datetime) -> dict:
    """The parameters of ``_pending_since(i)`` for requests pending since ``since``: the whole minute, hour,
    4 hours and day boundaries after it (Unix seconds)."""
    micro = (since - _EPOCH) // timedelta(microseconds=1)
    start = _ceil(-(-micro // 1_000_000), GRAINS[0])  # the first whole minute at or after ``since``
    params = {f"since_{i}": since, f"minute_{i}": _EPOCH + timedelta(seconds=start)}
    for k in range(len(GRAINS)):  # grain k: buckets from b{i}_{k} up to (not including) e{i}_{k}, the next grain's
        params[f"b{i}_{k}"] = start
        if k + 1 < len(GRAINS):
            start = params[f"e{i}_{k}"] = _ceil(start, GRAINS[k + 1])
    return params


def _pending_since(i: int):  # noqa: ANN202
    """SQL for the number of requests pending since ``:since_{i}`` (see the module docstring and
    ``_since_params``)."""
    t = steering_requests.c
    pc = pending_counts.c
    total = (select(func.count()).where(
        (t.status == RequestStatus.PENDING.value) & (t.created_at >= bindparam(f"since_{i}", type_=t.created_at.type))
        & (t.created_at < bindparam(f"minute_{i}", type_=t.created_at.type))).scalar_subquery())
    for k, grain in enumerate(GRAINS):
        cond = (pc.grain == grain) & (pc.bucket >= bindparam(f"b{i}_{k}", type_=pc.bucket.type))
        if k + 1 < len(GRAINS):
            cond &= pc.bucket < bindparam(f"e{i}_{k}", type_=pc.bucket.type)
        total = total + select(func.coalesce(func.sum(pc.n), 0)).where(cond).scalar_subquery()
    return total


@lru_cache(maxsize=8)
def _waiting_statement(n_bounds: int):  # noqa: ANN202
    """One ``SELECT`` of the pending requests in all, the sums of their creation times, the oldest, and the
    number pending since ``:since_0`` … ``:since_{n_bounds - 1}``. Built once per number of bounds."""
    pc = pending_counts.c
    t = steering_requests.c
    totals = pc.grain == 0
    return select(
        select(func.coalesce(func.sum(pc.n), 0)).where(totals).scalar_subquery(),
        select(func.coalesce(func.sum(pc.sec_sum), 0)).where(totals).scalar_subquery(),
        select(func.coalesce(func.sum(pc.us_sum), 0)).where(totals).scalar_subquery(),
        select(t.created_at).where(t.status == RequestStatus.PENDING.value)
        .order_by(t.created_at, t.id).limit(1).scalar_subquery(),
        *(_pending_since(i) for i in range(n_bounds)),
    )


_RUNS = select(run_counts.c.workflow, run_counts.c.status, func.sum(run_counts.c.n)).group_by(
    run_counts.c.workflow, run_counts.c.status).having(func.sum(run_counts.c.n) != 0)
_OUTBOX = (select(outbox.c.status, outbox.c.kind, func.count(), func.min(outbox.c.created_at))
           .where(outbox.c.status.in_([OutboxStatus.PENDING.value, OutboxStatus.DEAD.value]))
           .group_by(outbox.c.status, outbox.c.kind))


class MetricsRepo:
    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def snapshot(self, *, now: datetime, age_bounds_sec: tuple[float, ...]) -> MetricsSnapshot:
        """Everything ``/metrics`` shows of the database at ``now``."""
        run_rows = self.conn.execute(_RUNS).all()
        params: dict = {}
        for i, bound in enumerate(age_bounds_sec):
            params.update(_since_params(i, now - timedelta(seconds=bound)))
        total, sec_sum, us_sum, oldest, *within = self.conn.execute(
            _waiting_statement(len(age_bounds_sec)), params).one()
        outbox_rows = self.conn.execute(_OUTBOX).all()
        return MetricsSnapshot(
            runs=[(w, s, int(count)) for w, s, count in run_rows], waiting_total=int(total or 0),
            waiting_epoch_sum=float(int(sec_sum or 0)) + int(us_sum or 0) / 1e6,
            waiting_oldest=oldest, waiting_within=[int(x or 0) for x in within],
            outbox=[(s, k, int(c), first) for s, k, c, first in outbox_rows])
