"""Retention: compacting the checkpoint history of runs that ended long ago.

Compacting a run keeps ONE checkpoint, its head (the final state), rewritten as a full snapshot with no parent
so that it loads on its own, and deletes every other checkpoint of the run (all branches). The run row, its
steering requests, decisions and audit events stay. Only ended runs (completed, failed, rejected, cancelled)
are touched, under a conditional UPDATE that locks the run row and re-checks its status and end time, so a
run that was retried or rewound meanwhile is never compacted, and a worker can never read a half-compacted
history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, func, select, update

from store import codec
from store.checkpoints import CheckpointRepo
from store.models import RunStatus
from store.schema import checkpoints, runs

ENDED = (RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.REJECTED.value, RunStatus.CANCELLED.value)


@dataclass(frozen=True)
class PruneCandidate:
    """An ended run with history to drop: ``checkpoints`` rows in all and ``stored_bytes`` of payload
    (``ended_at`` is the run's ``updated_at``: the last change of an ended run is its end)."""

    run_id: str
    status: str
    ended_at: datetime
    head_seq: int
    checkpoints: int
    stored_bytes: int


@dataclass(frozen=True)
class Compacted:
    """What compacting one run did: checkpoint rows deleted, payload bytes before and after."""

    run_id: str
    deleted: int
    bytes_before: int
    bytes_after: int


class RetentionRepo:
    def __init__(self, conn: Connection, checkpoint_repo: CheckpointRepo) -> None:
        self.conn = conn
        self.checkpoints = checkpoint_repo

    def candidates(self, *, ended_before: datetime, after_id: str = "", limit: int = 100) -> list[PruneCandidate]:
        """Ended runs whose end is before ``ended_before`` and that hold more than one checkpoint, by id,
        starting after ``after_id`` (keyset pagination)."""
        per_run = (select(checkpoints.c.run_id, func.count().label("n"),
                          func.sum(checkpoints.c.stored_bytes).label("bytes"))
                   .group_by(checkpoints.c.run_id).having(func.count() > 1).subquery())
        stmt = (select(runs.c.id, runs.c.status, runs.c.updated_at, runs.c.head_seq, per_run.c.n, per_run.c.bytes)
                .join(per_run, per_run.c.run_id == runs.c.id)
                .where(runs.c.status.in_(ENDED) & (runs.c.updated_at < ended_before) & (runs.c.id > after_id))
                .order_by(runs.c.id).limit(limit))
        return [PruneCandidate(run_id=r.id, status=r.status, ended_at=r.updated_at, head_seq=r.head_seq,
                               checkpoints=int(r.n), stored_bytes=int(r.bytes or 0))
                for r in self.conn.execute(stmt)]

    def compact(self, run_id: str, *, ended_before: datetime) -> Compacted | None:
        """Keep only the head checkpoint of ``run_id`` (as a parentless full snapshot) if the run is still
        ended before ``ended_before``; None when it is not (retried, rewound, or unknown) or there is nothing
        to drop. Locks the run row until the transaction ends."""
        locked = self.conn.execute(update(runs).where(
            (runs.c.id == run_id) & runs.c.status.in_(ENDED) & (runs.c.updated_at < ended_before)
        ).values(status=runs.c.status).returning(runs.c.head_seq)).first()
        if locked is None:
            return None
        head_seq = locked.head_seq
        before = self.conn.execute(select(func.count(), func.coalesce(func.sum(checkpoints.c.stored_bytes), 0))
                                   .where(checkpoints.c.run_id == run_id)).one()
        if before[0] <= 1:
            return None
        head = self.checkpoints.load(run_id, head_seq)
        if head is None:
            raise RuntimeError(f"run {run_id} has no head checkpoint #{head_seq}")
        payload, compressed = codec.dump_payload(head.tree)
        self.conn.execute(update(checkpoints).where(
            (checkpoints.c.run_id == run_id) & (checkpoints.c.seq == head_seq)
        ).values(parent_seq=None, base_seq=head_seq, chain_len=0, payload=payload, compressed=compressed,
                 stored_bytes=len(payload)))
        deleted = self.conn.execute(checkpoints.delete().where(
            and_(checkpoints.c.run_id == run_id, checkpoints.c.seq != head_seq))).rowcount
        return Compacted(run_id=run_id, deleted=deleted, bytes_before=int(before[1]), bytes_after=len(payload))
