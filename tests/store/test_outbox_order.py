"""``OutboxRepo.claim_due`` takes a run's messages to one channel one at a time, in id order: not while an
earlier one is pending (waiting for its retry, or claimed), and again once it is sent or dead."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

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


def test_a_batch_says_whether_it_holds_later_messages_back(store: Store) -> None:
    now = datetime.now(timezone.utc)
    with store.transaction() as tx:
        for run, kind in [("r1", OutboxKind.REQUEST_OPENED), ("r2", OutboxKind.REQUEST_OPENED),
                          ("r2", OutboxKind.REQUEST_CLOSED)]:
            tx.outbox.add(channel="console", kind=kind, now=now, run_id=run, request_id=1)
    with store.transaction() as tx:
        first = tx.outbox.claim_due(now=now, lease_sec=60)
    assert [(m.run_id, m.kind) for m in first] == [("r1", "request.opened"), ("r2", "request.opened")]
    assert first.held_back  # r2's close waits behind its post
    with store.transaction() as tx:
        for m in first:
            tx.outbox.mark_sent(m.id, now=now)
    with store.transaction() as tx:
        second = tx.outbox.claim_due(now=now, lease_sec=60)
    assert [(m.run_id, m.kind) for m in second] == [("r2", "request.closed")] and not second.held_back


def test_the_deliverer_claims_again_only_for_what_a_batch_held_back(db_url: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Two messages of one run to one channel: two claims (the second finds the later message and says
    nothing waits behind it); one message: one claim. It claimed a third time, and a second for one, before."""
    from store import fast
    from store.outbox import OutboxRepo
    from tests.support.engine import make_hazel

    hazel = make_hazel(db_url)
    claims: list[int] = []
    claim = OutboxRepo.claim_due_later

    def counted(repo: OutboxRepo, **kwargs: object):  # noqa: ANN202
        claimed = claim(repo, **kwargs)
        return fast.Later(lambda: (claims.append(len(claimed.get())), claimed.get())[1])

    monkeypatch.setattr(OutboxRepo, "claim_due_later", counted)
    now = hazel.clock()
    with hazel.store.transaction() as tx:
        tx.outbox.add(channel="console", kind=OutboxKind.RUN_PROGRESS, now=now, run_id="r1", payload={"text": "a"})
        tx.outbox.add(channel="console", kind=OutboxKind.RUN_PROGRESS, now=now, run_id="r1", payload={"text": "b"})
    assert hazel.deliver_due() == 2 and claims == [1, 1]
    claims.clear()
    with hazel.store.transaction() as tx:
        tx.outbox.add(channel="console", kind=OutboxKind.RUN_PROGRESS, now=now, run_id="r2", payload={"text": "c"})
    assert hazel.deliver_due() == 1 and claims == [1]
    hazel.close()


def test_a_message_and_its_copy_to_the_runs_latest_request_on_a_kind_of_channel(store: Store) -> None:
    """``add(..., and_latest_on=...)``: one INSERT … SELECT, the message for its channel and a copy addressed
    to the run's newest request on each kind of channel named (its channel and id), none where the run has no
    request there."""
    now = datetime.now(timezone.utc)
    with store.transaction() as tx:
        tx.runs.insert(run_id="r1", workflow="w", workflow_version=1, started_by="me", started_via="console", now=now)
        ids = [tx.requests.insert(run_id="r1", checkpoint_seq=0, point=f"p{i}", title="t", channel=channel,
                                  approvals_required=1, now=now, due_at=None)
               for i, channel in enumerate(["slack:C1", "slack:C2", "jira:MIG", "slackish"])]
        tx.outbox.add(channel="console", kind=OutboxKind.RUN_PROGRESS, now=now, run_id="r1", request_id=None,
                      payload={"event": "completed"}, and_latest_on=("slack", "jira", "teams"))
        tx.outbox.add(channel="jira:MIG", kind=OutboxKind.RUN_PROGRESS, now=now, run_id="r2", request_id=7,
                      payload={}, and_latest_on=("slack",))
    with store.read() as tx:
        sent = tx.outbox.list()
    assert sorted((m.run_id, m.channel, m.request_id, m.kind, m.payload) for m in sent) == [
        ("r1", "console", None, "run.progress", {"event": "completed"}),
        ("r1", "jira:MIG", ids[2], "run.progress", {"event": "completed"}),
        ("r1", "slack:C2", ids[1], "run.progress", {"event": "completed"}),
        ("r2", "jira:MIG", 7, "run.progress", {})]
    assert all(m.status == "pending" and m.attempts == 0 and m.next_attempt_at == now for m in sent)
