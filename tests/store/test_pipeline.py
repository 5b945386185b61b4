"""``Tx.pipeline()``: statements sent together on PostgreSQL (nothing changes on SQLite); what they answer is
read after the block, a unique key broken by a decision inside is a ``DuplicateDecisionError``, and a lost
lease found after the block rolls everything back."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from store import DuplicateDecisionError, Fence, LeaseLostError, NewCheckpoint, Store
from store.models import Action, Actor, RunStatus

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
PRIYA = Actor(id="priya", name="Priya", channel="console")


def _run(store: Store, run_id: str = "r1", status: RunStatus = RunStatus.WAITING) -> None:
    with store.transaction() as tx:
        tx.runs.insert(run_id=run_id, workflow="w", workflow_version=1, started_by="me", started_via="console",
                       now=NOW, status=status)
        tx.checkpoints.write(NewCheckpoint(run_id=run_id, seq=0, parent_seq=None, branch=0, step="start",
                                           next_step="s", workflow_version=1, created_at=NOW), {"n": 0}, None)


def _decide(tx, request_id: int, decision_id: int | None = None, delivery_id: str | None = None) -> int:  # noqa: ANN001
    return tx.decisions.insert(run_id="r1", request_id=request_id, action=Action.APPROVE, actor=PRIYA,
                               payload={}, now=NOW, delivery_id=delivery_id, decision_id=decision_id)


def test_reads_sent_together_answer_after_the_block(store: Store) -> None:
    _run(store)
    with store.transaction() as tx:
        with tx.pipeline():
            run = tx.runs.get_later("r1", for_update=True)
            missing = tx.runs.get_later("nope")
            head = tx.checkpoints.load_later("r1", 0)
            next_id = tx.decisions.next_id()
            moved = tx.runs.transition_later("r1", from_statuses=[RunStatus.WAITING], now=NOW,
                                             status=RunStatus.READY)
            not_moved = tx.runs.transition_later("r1", from_statuses=[RunStatus.WAITING], now=NOW,
                                                 status=RunStatus.FAILED)
        assert run.get().status is RunStatus.WAITING  # read before the transition, in statement order
        assert missing.get() is None
        assert head.get().tree == {"n": 0}
        assert (next_id.get() is None) == (store.dialect == "sqlite")
        assert moved.get() is True and not_moved.get() is False
    with store.read() as tx:
        assert tx.runs.get("r1").status is RunStatus.READY


def test_a_second_vote_inside_a_pipeline_is_a_duplicate_and_nothing_stays(store: Store) -> None:
    _run(store)
    with store.transaction() as tx:
        request_id = tx.requests.insert(run_id="r1", checkpoint_seq=0, point="p", title="t", channel="console",
                                        approvals_required=2, now=NOW, due_at=None)
        _decide(tx, request_id, delivery_id="d1")
    for delivery_id, by_delivery in (("d2", False), ("d1", True)):
        with pytest.raises(DuplicateDecisionError) as caught:
            with store.transaction() as tx:
                with tx.pipeline():
                    tx.events.add(action="decision.approve", actor=PRIYA, now=NOW, run_id="r1",
                                  request_id=request_id)
                    other = Actor(id="alice", name="Alice", channel="console") if by_delivery else PRIYA
                    tx.decisions.insert(run_id="r1", request_id=request_id, action=Action.APPROVE, actor=other,
                                        payload={}, now=NOW, delivery_id=delivery_id,
                                        decision_id=tx.decisions.next_id().get())
        assert caught.value.by_delivery is by_delivery
    with store.read() as tx:
        assert len(tx.decisions.for_request(request_id, "r1")) == 1
        assert tx.events.for_run("r1") == []


def test_a_lease_lost_is_found_after_the_block_and_rolls_back(store: Store) -> None:
    _run(store, status=RunStatus.READY)
    with store.transaction() as tx:
        claimed = tx.runs.claim(owner="w1", token="t1", now=NOW, lease_until=NOW + timedelta(seconds=30))
    assert claimed is not None
    fence = Fence("r1", "stolen", NOW, dict(head_seq=1, last_seq=1, status=RunStatus.COMPLETED))
    new = NewCheckpoint(run_id="r1", seq=1, parent_seq=0, branch=0, step="s", next_step=None, workflow_version=1,
                        created_at=NOW)
    with pytest.raises(LeaseLostError):
        with store.transaction() as tx:
            with tx.pipeline():
                written = tx.checkpoints.write_later(new, {"n": 1}, None, fence=fence)
                tx.events.add(action="run.completed", actor=PRIYA, now=NOW, run_id="r1")
            written.get()
    with store.read() as tx:
        assert [i.seq for i in tx.checkpoints.list("r1")] == [0]
        assert tx.events.for_run("r1") == []
        assert tx.runs.get("r1").status is RunStatus.RUNNING


def test_a_read_after_a_failed_statement_inside_the_block_reports_that_failure_quietly(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """The first error is the one reported, as the store's own error, and the driver logs nothing (a CLI prints
    its warnings on stderr)."""
    _run(store)
    with store.transaction() as tx:
        request_id = tx.requests.insert(run_id="r1", checkpoint_seq=0, point="p", title="t", channel="console",
                                        approvals_required=2, now=NOW, due_at=None)
        _decide(tx, request_id)
    with caplog.at_level("WARNING"):
        with pytest.raises(DuplicateDecisionError):
            with store.transaction() as tx:
                with tx.pipeline():
                    _decide(tx, request_id)
                    tx.runs.get_later("r1").get()  # a read inside, after the failed insert
        # a statement that fails unread, then the caller's own error: the caller's is reported on PostgreSQL
        # (SQLite answers each statement at once: the insert fails first)
        expected = DuplicateDecisionError if store.dialect == "sqlite" else ValueError
        with pytest.raises(expected):
            with store.transaction() as tx:
                with tx.pipeline():
                    _decide(tx, request_id, decision_id=tx.decisions.next_id().get())
                    raise ValueError("the caller's own error")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []
    with store.read() as tx:
        assert len(tx.decisions.for_request(request_id, "r1")) == 1
