"""``OutboxRepo.claim_due`` takes a run's messages to one channel one at a time, in id order: not while an
earlier one is pending (waiting for its retry, or claimed), and again once it is sent or dead."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from store import Store
from store.models import OutboxKind


def test_a_later_message_waits_for_the_earlier_one_of_its_run_and_channel(store: Store) -> None:
    now = datetime.now(timezone.utc)
    with store.transaction() as tx:
        for run, channel, kind in [("r1", "slack:C1", OutboxKind.REQUEST_OPENED), ("r1", "slack:C1",
                                   OutboxKind.REQUEST_CLOSED), ("r1", "jira:MIG", OutboxKind.RUN_PROGRESS),
                                   ("r2", "slack:C1", OutboxKind.REQUEST_OPENED)]:
            tx.outbox.add(channel=channel, kind=kind, now=now, run_id=run, request_id=1)
    with store.transaction() as tx:
        first = tx.outbox.claim_due(now=now, lease_sec=60)
    assert [(m.run_id, m.channel, m.kind) for m in first] == [
        ("r1", "slack:C1", "request.opened"), ("r1", "jira:MIG", "run.progress"), ("r2", "slack:C1", "request.opened")]
    opened = first[0]
    later = now + timedelta(seconds=120)  # the claim lapsed ...
    with store.transaction() as tx:
        tx.outbox.mark_failed(opened.id, error="timed out", retry_at=later + timedelta(seconds=30))
    with store.transaction() as tx:  # ... and it failed: waiting for its retry, it still holds the update back
        assert [m.kind for m in tx.outbox.claim_due(now=later, lease_sec=60, run_ids=["r1"], channels=["slack"])] == []
    with store.transaction() as tx:
        tx.outbox.mark_failed(opened.id, error="given up", retry_at=None)  # dead: holds nothing back
    with store.transaction() as tx:
        assert [m.kind for m in tx.outbox.claim_due(now=later, lease_sec=60, run_ids=["r1"], channels=["slack"])] == ["request.closed"]
