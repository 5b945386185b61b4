"""Retention: ``hazel prune`` and the scheduled policy (``HAZEL_RETENTION_DAYS``).

Runs that ended (completed, failed, rejected, cancelled) more than ``older_than_days`` ago lose their
checkpoint history: the final state stays (the head checkpoint, rewritten as a full snapshot), and so do the
run, its steering requests, decisions and audit log. The history of a waiting, ready or running run is never
touched. After pruning, a run can no longer be rewound to a dropped checkpoint; a failed run can still be
retried from its last good checkpoint (the head). Each run is compacted in its own short transaction; the
runs due are listed from the prunable-run list (``store.retention``), by the time they ended, so a prune costs
what it removes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from store.models import SYSTEM, Actor

if TYPE_CHECKING:
    from store import Store

SECONDS_PER_DAY = 86_400


@dataclass
class PruneReport:
    """What a prune did (or, with ``dry_run``, would do). ``ended_before``: the cutoff (UTC);
    ``runs``: ids of the runs compacted; ``checkpoints_deleted``: rows removed; ``bytes_freed``: stored payload
    bytes removed (the rewritten head snapshot subtracted)."""

    ended_before: datetime
    dry_run: bool
    runs: list[str] = field(default_factory=list)
    checkpoints_deleted: int = 0
    bytes_freed: int = 0


def prune(store: "Store", *, older_than_days: float, now: datetime, dry_run: bool = False,
          actor: Actor = SYSTEM, batch: int = 100) -> PruneReport:
    """Compact the checkpoints of runs that ended before ``now - older_than_days``.

    Raises:
        ValueError: ``older_than_days`` is negative.
    """
    if older_than_days < 0:
        raise ValueError("older_than_days must be 0 or more")
    report = PruneReport(ended_before=now - timedelta(seconds=older_than_days * SECONDS_PER_DAY), dry_run=dry_run)
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
                report.bytes_freed += cand.stored_bytes  # an upper bound: the head snapshot stays
                continue
            with store.transaction() as tx:
                done = tx.retention.compact(cand.run_id, ended_before=report.ended_before)
                if done is None:
                    continue
                tx.events.add(action="run.pruned", actor=actor, now=now, run_id=cand.run_id,
                              checkpoints_deleted=done.deleted, bytes_freed=done.bytes_before - done.bytes_after,
                              ended_before=report.ended_before.isoformat())
            report.runs.append(cand.run_id)
            report.checkpoints_deleted += done.deleted
            report.bytes_freed += done.bytes_before - done.bytes_after
        if page.after is None:
            report.runs.sort()  # by id, whatever order they ended in
            return report
        after = page.after
