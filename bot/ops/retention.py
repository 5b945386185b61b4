"""Retention: ``hazel prune`` and the scheduled policy (``HAZEL_RETENTION_DAYS``).

Runs that ended (completed, failed, rejected, cancelled) more than ``older_than_days`` ago lose their
checkpoint history: the final state stays (the head checkpoint, rewritten as a full snapshot), and so do the
run, its steering requests, decisions and audit log. The history of a waiting, ready or running run is never
touched. A LangGraph run also loses its graph history (``hazel_lg_checkpoints`` and ``hazel_lg_writes`` rows):
it keeps the graph checkpoint its final state points at (rewritten as a standalone snapshot, with the
serializer of the graph's checkpointer that ``graph_snapshots`` finds) and its pending writes. After pruning,
a run can no longer be rewound to a dropped checkpoint; a failed run can still be retried from its last good
checkpoint (the head). Each run is compacted in its own short transaction; the
runs due are listed from the prunable-run list (``store.retention``), by the time they ended, so a prune costs
what it removes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from store.models import SYSTEM, Actor

if TYPE_CHECKING:
    from store import Store
    from store.retention import GraphSnapshots

SECONDS_PER_DAY = 86_400


@dataclass
class PruneReport:
    """What a prune did (or, with ``dry_run``, would do). ``ended_before``: the cutoff (UTC);
    ``runs``: ids of the runs compacted; ``checkpoints_deleted``: Hazel checkpoint rows removed;
    ``graph_checkpoints_deleted`` / ``graph_writes_deleted``: LangGraph checkpoint and pending-write rows removed
    (``hazel_lg_checkpoints``, ``hazel_lg_writes``); ``bytes_freed``: stored payload bytes removed, Hazel's and
    the graph's (rewritten snapshots subtracted). With ``dry_run`` the graph counts and the bytes are upper
    bounds (what is kept is known only when compacting)."""

    ended_before: datetime
    dry_run: bool
    runs: list[str] = field(default_factory=list)
    checkpoints_deleted: int = 0
    graph_checkpoints_deleted: int = 0
    graph_writes_deleted: int = 0
    bytes_freed: int = 0


def ended_before(now: datetime, older_than_days: float) -> datetime:
    """``now - older_than_days`` (UTC); the earliest time a datetime holds (year 1) when that is before it: no
    run ended so long ago (``hazel prune --older-than 999999`` answered ``OverflowError``)."""
    try:
        return now - timedelta(seconds=older_than_days * SECONDS_PER_DAY)
    except OverflowError:
        return datetime.min.replace(tzinfo=timezone.utc)


def prune(store: "Store", *, older_than_days: float, now: datetime, dry_run: bool = False,
          actor: Actor = SYSTEM, batch: int = 100, graph_snapshots: "GraphSnapshots | None" = None) -> PruneReport:
    """Compact the checkpoints of runs that ended before ``now - older_than_days``. ``graph_snapshots``: how a
    LangGraph run's kept graph checkpoints are rewritten as snapshots (``bot.engine.Hazel.graph_snapshots``);
    None: their chains back to a snapshot are kept instead (``store.retention``).

    Raises:
        ValueError: ``older_than_days`` is negative.
    """
    if older_than_days < 0:
        raise ValueError("older_than_days must be 0 or more")
    report = PruneReport(ended_before=ended_before(now, older_than_days), dry_run=dry_run)
    after = None
    while True:
        with store.read() as tx:
            page = tx.retention.page(ended_before=report.ended_before, after=after, limit=batch)
        if page.settled and not dry_run:  # nothing to drop: not listed again
            with store.transaction() as tx:
                tx.retention.forget(page.settled)
        for cand in page.candidates:
            if dry_run:
                report.runs.append(cand.run_id)
                report.checkpoints_deleted += cand.checkpoints - 1
                report.graph_checkpoints_deleted += max(cand.graph.checkpoints - 1, 0)  # at most: one is kept
                report.graph_writes_deleted += cand.graph.writes  # at most: the kept one's stay
                report.bytes_freed += cand.stored_bytes + cand.graph.bytes  # an upper bound: the head stays
                continue
            with store.transaction() as tx:
                done = tx.retention.compact(cand.run_id, ended_before=report.ended_before,
                                            graph_snapshots=graph_snapshots)
                if done is None:
                    continue
                graph = ({"graph_checkpoints_deleted": done.graph_checkpoints_deleted,
                          "graph_writes_deleted": done.graph_writes_deleted}
                         if done.graph_before.checkpoints or done.graph_before.writes else {})
                tx.events.add(action="run.pruned", actor=actor, now=now, run_id=cand.run_id,
                              checkpoints_deleted=done.deleted, bytes_freed=done.bytes_freed,
                              ended_before=report.ended_before.isoformat(), **graph)
            report.runs.append(cand.run_id)
            report.checkpoints_deleted += done.deleted
            report.graph_checkpoints_deleted += done.graph_checkpoints_deleted
            report.graph_writes_deleted += done.graph_writes_deleted
            report.bytes_freed += done.bytes_freed
        if page.after is None:
            report.runs.sort()  # by id, whatever order they ended in
            return report
        after = page.after
