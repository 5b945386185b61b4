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


# -- pipeline(commit=True): the COMMIT sent with the statements, the checks made by the database ---------------


def _claimed(store: Store) -> None:
    _run(store, status=RunStatus.READY)
    with store.transaction() as tx:
        assert tx.runs.claim(owner="w1", token="t1", now=NOW, lease_until=NOW + timedelta(seconds=30)) is not None


def _state(store: Store) -> tuple[list[int], list[str], str]:
    with store.read() as tx:
        return ([i.seq for i in tx.checkpoints.list("r1")], [e.action for e in tx.events.for_run("r1")],
                tx.runs.get("r1").status.value)


@pytest.fixture
def driver_commits(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each ``commit()`` asked of the driver's connection (PostgreSQL): a transaction committed in its
    pipeline asks none."""
    calls: list[int] = []
    if store.dialect == "postgresql":
        import psycopg

        commit = psycopg.Connection.commit

        def counted(self):  # noqa: ANN001, ANN202
            calls.append(1)
            return commit(self)

        monkeypatch.setattr(psycopg.Connection, "commit", counted)
    return calls


def test_the_commit_goes_with_the_statements(store: Store, driver_commits: list[int]) -> None:
    _claimed(store)
    fence = Fence("r1", "t1", NOW, dict(head_seq=1, last_seq=1, status=RunStatus.COMPLETED))
    new = NewCheckpoint(run_id="r1", seq=1, parent_seq=0, branch=0, step="s", next_step=None, workflow_version=1,
                        created_at=NOW)
    del driver_commits[:]
    with store.transaction() as tx:
        with tx.pipeline(commit=True):
            written = tx.checkpoints.write_later(new, {"n": 1}, None, fence=fence)
            tx.events.add(action="run.completed", actor=PRIYA, now=NOW, run_id="r1")
        assert written.get().seq == 1
        if store.dialect == "postgresql":  # over: nothing more may be sent in it
            with pytest.raises(RuntimeError, match="after its transaction committed"):
                tx.runs.get("r1")
    assert driver_commits == []  # (SQLite commits on sqlite3's connection, as every transaction there)
    assert _state(store) == ([0, 1], ["run.completed"], "completed")


def test_a_lease_lost_fails_the_fenced_write_and_the_commit(store: Store) -> None:
    _claimed(store)
    fence = Fence("r1", "stolen", NOW, dict(head_seq=1, last_seq=1, status=RunStatus.COMPLETED))
    new = NewCheckpoint(run_id="r1", seq=1, parent_seq=0, branch=0, step="s", next_step=None, workflow_version=1,
                        created_at=NOW)
    with pytest.raises(LeaseLostError, match="run r1 is no longer leased"):
        with store.transaction() as tx:
            with tx.pipeline(commit=True):
                tx.events.add(action="before", actor=PRIYA, now=NOW, run_id="r1")
                written = tx.checkpoints.write_later(new, {"n": 1}, None, fence=fence)
                tx.events.add(action="after", actor=PRIYA, now=NOW, run_id="r1")
            written.get()  # (SQLite: found here, as without commit=True)
    assert _state(store) == ([0], [], "running")


def test_a_run_that_moved_fails_the_transition_and_the_commit(store: Store) -> None:
    from store import ChangedMeanwhileError

    _run(store, status=RunStatus.READY)
    with pytest.raises((ChangedMeanwhileError, AssertionError)) as caught:
        with store.transaction() as tx:
            with tx.pipeline(commit=True):
                tx.events.add(action="before", actor=PRIYA, now=NOW, run_id="r1")
                moved = tx.runs.transition_later("r1", from_statuses=[RunStatus.WAITING], now=NOW,
                                                 status=RunStatus.RUNNING)
            assert moved.get(), "not moved"  # SQLite: the caller's check, before its commit
    assert isinstance(caught.value, ChangedMeanwhileError if store.dialect == "postgresql" else AssertionError)
    assert _state(store) == ([0], [], "ready")
    with store.transaction() as tx:  # the run as read: moved, committed
        with tx.pipeline(commit=True):
            moved = tx.runs.transition_later("r1", from_statuses=[RunStatus.READY], now=NOW,
                                             status=RunStatus.WAITING)
        assert moved.get() is True
    assert _state(store)[2] == "waiting"


def test_a_vote_on_a_request_no_longer_as_read_fails_the_commit(store: Store) -> None:
    from store import ChangedMeanwhileError

    _run(store)
    with store.transaction() as tx:
        request_id = tx.requests.insert(run_id="r1", checkpoint_seq=0, point="p", title="t", channel="console",
                                        approvals_required=2, now=NOW, due_at=None)
    with store.read() as tx:
        as_read = tx.requests.get(request_id)
    with store.transaction() as tx:  # another vote, counted after the request was read
        tx.requests.vote_later(as_read, now=NOW, actor="alice")[1].get()
    with pytest.raises((ChangedMeanwhileError, AssertionError)) as caught:
        with store.transaction() as tx:
            with tx.pipeline(commit=True):
                after, answer = tx.requests.vote_later(as_read, now=NOW, actor="priya")
                tx.events.add(action="decision.approve", actor=PRIYA, now=NOW, run_id="r1", request_id=request_id)
            counted = answer.get()  # SQLite: the caller compares the vote with the request as read
            assert counted is not None and counted.approvals == after.approvals, "counted on another state"
    assert isinstance(caught.value, ChangedMeanwhileError if store.dialect == "postgresql" else AssertionError)
    with store.read() as tx:
        assert tx.requests.get(request_id).approvals == 1 and tx.events.for_run("r1") == []


def test_the_run_for_a_decision_comes_with_an_id_for_it(store: Store) -> None:
    """``RunRepo.get_for_decision_later``: the run, locked, and on PostgreSQL the id the decision takes, in one
    statement (one statement fewer a decision); each call a new id; no run, no id."""
    _run(store)
    with store.transaction() as tx:
        with tx.pipeline():
            first, second = tx.runs.get_for_decision_later("r1"), tx.runs.get_for_decision_later("r1")
            missing = tx.runs.get_for_decision_later("nope")
        (run, one), (_, two) = first.get(), second.get()
        assert run is not None and run.id == "r1" and run.status is RunStatus.WAITING
        assert missing.get() == (None, None)
        if store.dialect == "postgresql":
            assert two == one + 1
            decision = tx.decisions.insert(run_id="r1", request_id=None, action=Action.APPROVE, actor=PRIYA,
                                           payload={}, now=NOW, decision_id=two)
            assert decision == two
        else:
            assert one is None and two is None
