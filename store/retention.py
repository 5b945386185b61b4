"""Retention: compacting the checkpoint history of runs that ended long ago.

Compacting a run keeps ONE checkpoint, its head (the final state), rewritten as a full snapshot with no parent
so that it loads on its own, and deletes every other checkpoint of the run (all branches). The run row, its
steering requests, decisions and audit events stay. Only ended runs (completed, failed, rejected, cancelled)
are touched, under a conditional UPDATE that locks the run row and re-checks its status and end time, so a
run that was retried or rewound meanwhile is never compacted, and a worker can never read a half-compacted
history.

A LangGraph run (``bot.engine.lgraph``: its head's state holds the pointer ``lg_checkpoint``, its graph's thread
is the run id) loses its graph history in the same transaction: of its ``hazel_lg_checkpoints`` rows it keeps
the graph checkpoint the head points at and the newest of each other namespace (a subgraph's), with their
pending writes; a kept checkpoint stored as a change of one deleted is rewritten as a standalone snapshot with
no parent first (``LangGraphRepo.drop``, as ``HazelSaver.prune`` does). Rewriting needs the graph's serializer,
which the caller hands over (``graph_snapshots``); without it (the workflow is not deployed in the process
that prunes) the kept checkpoints' chains back to their snapshots are kept too, so the final state still
loads. A head whose pointer is not stored leaves the graph rows as they are.

Candidates come from ``hazel_prunable_runs`` (``store.schema.prunable_runs``): the ended runs not compacted
yet, by the time they ended, kept by triggers (a run entering an ended status is added, one leaving it is
removed) and by compaction (a compacted run, or one found with nothing to drop, is removed). Listing them is
a range of its index up to the cutoff, and each candidate's history is counted on its own rows, so a prune
costs what it removes, whatever the number of runs pruned before or not due yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from sqlalchemy import Connection, and_, func, or_, select, update

from store import codec
from store.checkpoints import CheckpointRepo
from store.lgraph import Key, LangGraphRepo, Snapshots, StoredRow, ThreadSize
from store.models import RunStatus
from store.schema import checkpoints, prunable_runs, runs

GraphSnapshots = Callable[[str, int], Snapshots | None]
"""``(workflow, version) -> Snapshots | None``: how the graph checkpoints of a run of that workflow are rewritten
as snapshots (its LangGraph checkpointer's serializer: ``bot.engine.Hazel.graph_snapshots``); None when not
known here."""

ENDED = (RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.REJECTED.value, RunStatus.CANCELLED.value)


@dataclass(frozen=True)
class PruneCandidate:
    """An ended run with history to drop: ``checkpoints`` rows in all and ``stored_bytes`` of payload
    (``ended_at`` is the run's ``updated_at``: the last change of an ended run is its end); ``graph``: what
    its LangGraph thread holds (``hazel_lg_checkpoints`` and ``hazel_lg_writes`` rows; zero for a native run)."""

    run_id: str
    status: str
    ended_at: datetime
    head_seq: int
    checkpoints: int
    stored_bytes: int
    graph: ThreadSize = ThreadSize()


@dataclass(frozen=True)
class CandidatePage:
    """One page of ``RetentionRepo.page``: ``candidates`` (runs with history to drop, by end time), ``settled``
    (``(run_id, ended_at)`` of listed runs whose history is one checkpoint already: nothing to drop, for
    ``RetentionRepo.forget``) and ``after``: where the next page starts (None: this was the last)."""

    candidates: list[PruneCandidate] = field(default_factory=list)
    settled: list[tuple[str, datetime]] = field(default_factory=list)
    after: tuple[datetime, str] | None = None


@dataclass(frozen=True)
class Compacted:
    """What compacting one run did: Hazel checkpoint rows deleted, their payload bytes before and after;
    ``graph_before`` / ``graph_after``: what its LangGraph thread held (all zero for a native run)."""

    run_id: str
    deleted: int
    bytes_before: int
    bytes_after: int
    graph_before: ThreadSize = ThreadSize()
    graph_after: ThreadSize = ThreadSize()

    @property
    def graph_checkpoints_deleted(self) -> int:
        return self.graph_before.checkpoints - self.graph_after.checkpoints

    @property
    def graph_writes_deleted(self) -> int:
        return self.graph_before.writes - self.graph_after.writes

    @property
    def bytes_freed(self) -> int:
        """Payload bytes removed, Hazel's and the graph's (rewritten snapshots subtracted)."""
        return self.bytes_before - self.bytes_after + self.graph_before.bytes - self.graph_after.bytes


class RetentionRepo:
    def __init__(self, conn: Connection, checkpoint_repo: CheckpointRepo) -> None:
        self.conn = conn
        self.checkpoints = checkpoint_repo

    def page(self, *, ended_before: datetime, after: tuple[datetime, str] | None = None,
             limit: int = 100) -> CandidatePage:
        """The next ``limit`` not yet compacted ended runs that ended before ``ended_before``, by end time and
        id, starting after ``after`` (keyset pagination; see ``CandidatePage``)."""
        q = prunable_runs.c
        cond = q.ended_at < ended_before
        if after is not None:
            cond &= or_(q.ended_at > after[0], and_(q.ended_at == after[0], q.run_id > after[1]))
        listed = self.conn.execute(
            select(q.run_id, q.ended_at, runs.c.status, runs.c.updated_at, runs.c.head_seq)
            .select_from(prunable_runs.join(runs, runs.c.id == q.run_id))
            .where(cond).order_by(q.ended_at, q.run_id).limit(limit)).all()
        if not listed:
            return CandidatePage()
        due = [r for r in listed if r.status in ENDED and r.updated_at < ended_before]
        stats = {}
        if due:
            stats = {r.run_id: (int(r.n), int(r.bytes or 0)) for r in self.conn.execute(
                select(checkpoints.c.run_id, func.count().label("n"), func.sum(checkpoints.c.stored_bytes)
                       .label("bytes")).where(checkpoints.c.run_id.in_([r.run_id for r in due]))
                .group_by(checkpoints.c.run_id))}
        many = [r.run_id for r in due if stats.get(r.run_id, (0, 0))[0] > 1]
        graphs = LangGraphRepo(self.conn, self.checkpoints.dialect).thread_sizes(many) if many else {}
        candidates, settled = [], []
        for r in due:
            n, stored = stats.get(r.run_id, (0, 0))
            if n > 1:
                candidates.append(PruneCandidate(run_id=r.run_id, status=r.status, ended_at=r.updated_at,
                                                 head_seq=r.head_seq, checkpoints=n, stored_bytes=stored,
                                                 graph=graphs.get(r.run_id, ThreadSize())))
            else:
                settled.append((r.run_id, r.ended_at))
        last = listed[-1]
        return CandidatePage(candidates, settled, (last.ended_at, last.run_id) if len(listed) == limit else None)

    def candidates(self, *, ended_before: datetime, after: tuple[datetime, str] | None = None,
                   limit: int = 100) -> list[PruneCandidate]:
        """Ended runs whose end is before ``ended_before`` and that hold more than one checkpoint, among the
        next ``limit`` not yet compacted ones (``page``)."""
        return self.page(ended_before=ended_before, after=after, limit=limit).candidates

    def forget(self, settled: list[tuple[str, datetime]]) -> int:
        """Take runs with nothing to drop off the prunable list (``CandidatePage.settled``), each only while it
        is still listed with the end time seen (a run that was rewound and ended again stays). Returns how
        many were taken off."""
        q = prunable_runs.c
        return sum(self.conn.execute(prunable_runs.delete().where((q.run_id == run_id) & (q.ended_at == ended_at))
                                     ).rowcount for run_id, ended_at in settled)

    def compact(self, run_id: str, *, ended_before: datetime,
                graph_snapshots: GraphSnapshots | None = None) -> Compacted | None:
        """Keep only the head checkpoint of ``run_id`` (as a parentless full snapshot) if the run is still
        ended before ``ended_before``; None when it is not (retried, rewound, or unknown) or there is nothing
        to drop. A LangGraph run's graph history goes down to what the head needs (the module docstring;
        ``graph_snapshots`` rewrites kept graph checkpoints as snapshots). Locks the run row until the
        transaction ends; the run leaves the prunable list.

        Raises:
            RuntimeError: the run's head checkpoint is missing.
            ValueError: a graph checkpoint the head needs cannot be decoded (nothing of the run changes).
        """
        locked = self.conn.execute(update(runs).where(
            (runs.c.id == run_id) & runs.c.status.in_(ENDED) & (runs.c.updated_at < ended_before)
        ).values(status=runs.c.status).returning(runs.c.head_seq, runs.c.workflow,
                                                 runs.c.workflow_version)).first()
        if locked is None:
            return None
        head_seq = locked.head_seq
        before = self.conn.execute(select(func.count(), func.coalesce(func.sum(checkpoints.c.stored_bytes), 0))
                                   .where(checkpoints.c.run_id == run_id)).one()
        self.conn.execute(prunable_runs.delete().where(prunable_runs.c.run_id == run_id))
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
        graph_before = graph_after = ThreadSize()
        pointer = head.tree.get("lg_checkpoint") if isinstance(head.tree, dict) else None
        if isinstance(pointer, str):
            snapshots = graph_snapshots(locked.workflow, locked.workflow_version) if graph_snapshots else None
            graph_before, graph_after = self._compact_graph(run_id, pointer, snapshots)
        return Compacted(run_id=run_id, deleted=deleted, bytes_before=int(before[1]), bytes_after=len(payload),
                         graph_before=graph_before, graph_after=graph_after)

    def _compact_graph(self, thread_id: str, pointer: str,
                       snapshots: Snapshots | None) -> tuple[ThreadSize, ThreadSize]:
        """Drop the graph checkpoints of ``thread_id`` but the one ``pointer`` names (namespace '') and the
        newest of each other namespace (see the module docstring). Returns the thread's sizes before and
        after (equal: nothing dropped)."""
        repo = LangGraphRepo(self.conn, self.checkpoints.dialect)
        before = repo.thread_sizes([thread_id]).get(thread_id, ThreadSize())
        keys = repo.keys_of_threads([thread_id])  # oldest first within each namespace
        keep = {k for k in keys if k[1] == "" and k[2] == pointer}
        if not keep:  # the head's graph checkpoint is not stored: not ours to guess what it needs
            return before, before
        keep |= {k for k in {k[:2]: k for k in keys if k[1] != ""}.values()}
        if snapshots is None:  # no serializer here: keep the chains the kept checkpoints read back
            keep |= set(repo.with_ancestors(sorted(keep)))
            snapshots = _no_snapshots
        doomed = [k for k in keys if k not in keep]
        if not doomed:
            return before, before
        repo.drop(doomed, snapshots)
        return before, repo.thread_sizes([thread_id]).get(thread_id, ThreadSize())


def _no_snapshots(rows: Mapping[Key, StoredRow], keys: Sequence[Key]) -> dict[Key, dict[str, Any]]:
    raise RuntimeError(f"graph checkpoints {sorted(keys)} would need rewriting, with no serializer to do it")
