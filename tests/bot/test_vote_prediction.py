"""An approval's vote is sent without waiting for its answer, with the request's outcome predicted from the row
read under the run's lock (``RequestRepo.vote_later``). Were the request changed behind that lock, the vote's
answer disagrees: the decision is refused as already decided and nothing it queued is committed (PostgreSQL;
on SQLite nothing else can write during the decision's transaction, and the answer is read at once)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import pytest
from sqlalchemy import create_engine, text

from bot.engine.errors import AlreadyDecidedError
from store.models import RequestStatus, RunStatus
from store.steering import RequestRepo
from tests.bot.test_decisions import planner, start_waiting
from tests.support.engine import make_hazel, person


def _counts(url: str) -> tuple[int, int, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return tuple(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()  # type: ignore[return-value]
                         for t in ("hazel_decisions", "hazel_checkpoints", "hazel_outbox"))
    finally:
        engine.dispose()


@pytest.mark.parametrize("kept", [False, True], ids=["read", "kept"])
@pytest.mark.parametrize("quorum", [1, 2])
def test_a_vote_the_request_no_longer_takes_writes_nothing(db_url: str, quorum: int, kept: bool,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``read``: decided by a process that reads the run and its request; ``kept``: by the process that paused
    the run, which sends its writes on what it kept (``store.heads``): its vote fails, and the decision taken
    again from the database finds the request settled."""
    paused = make_hazel(db_url, planner(quorum=quorum))
    hazel = paused if kept else make_hazel(db_url, planner(quorum=quorum))
    if not db_url.startswith("postgresql"):  # no other writer can change the request during the decision's
        seen: list[bool] = []  # transaction; its answer is read at once (an unread RETURNING slowed SQLite)
        real_vote = RequestRepo.vote_later

        def noting(self, request, **kwargs):  # noqa: ANN001, ANN003, ANN202
            after, answer = real_vote(self, request, **kwargs)
            seen.append(answer._done)
            return after, answer

        monkeypatch.setattr(RequestRepo, "vote_later", noting)
        hazel.decide(run_id=start_waiting(paused), action="approve", actor=person("ana"))
        assert seen == [True]
        return
    run_id = start_waiting(paused)
    taken = hazel.store.heads.taken
    before = _counts(db_url)
    with _behind_the_lock(db_url, monkeypatch, "status = 'decided', decided_by = 'rogue', "
                          "decided_action = 'reject', decided_at = now()"):
        with pytest.raises(AlreadyDecidedError, match="already rejected by rogue"):
            hazel.decide(run_id=run_id, action="approve", actor=person("ana"))
    assert _counts(db_url) == before  # no decision, no checkpoint, no message
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING
    assert hazel.store.heads.taken == taken + kept


@contextmanager
def _behind_the_lock(db_url: str, monkeypatch: pytest.MonkeyPatch, changes: str, *,
                     once: bool = False) -> Iterator[None]:
    """Inside the block, a decision's vote is preceded by an UPDATE of its request (SET ``changes``) from a
    writer that does not lock the run first (none of Hazel's), committed at once (``once``: the first vote's
    only)."""
    rogue = create_engine(db_url, isolation_level="AUTOCOMMIT")
    real = RequestRepo.vote_later
    done: list[int] = []

    def behind(self, request, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if not (once and done):
            with rogue.connect() as conn:
                conn.execute(text(f"UPDATE hazel_steering_requests SET {changes} WHERE id = :id"),
                             {"id": request.id})
            done.append(request.id)
        return real(self, request, **kwargs)

    monkeypatch.setattr(RequestRepo, "vote_later", behind)
    try:
        yield
    finally:
        rogue.dispose()


def test_votes_reach_the_quorum_as_predicted(db_url: str) -> None:
    hazel = make_hazel(db_url, planner(quorum=2))
    run_id = start_waiting(hazel)
    first = hazel.decide(run_id=run_id, action="approve", actor=person("ana"))
    assert (first.request.status, first.request.approvals, first.settled) == (RequestStatus.PENDING, 1, False)
    second = hazel.decide(run_id=run_id, action="approve", actor=person("bo"))
    assert (second.request.status, second.request.approvals, second.settled) == (RequestStatus.DECIDED, 2, True)
    assert second.request.decided_by == "bo" and second.request.decided_action == "approve"
    stored = [r for r in hazel.requests(run_id=run_id)][0]
    assert (stored.status, stored.approvals, stored.decided_by) == (RequestStatus.DECIDED, 2, "bo")


def test_a_vote_counted_behind_the_lock_is_refused_as_changed(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL: another vote counted behind the run's lock leaves the request pending with one approval
    more than read; the decision's vote, guarded by the approvals it read, fails the transaction: refused as
    changed meanwhile, nothing written (a process that read the run and its request)."""
    if not db_url.startswith("postgresql"):
        pytest.skip("on SQLite no other writer can change the request during the decision's transaction")
    from bot.engine.errors import RunStateError

    run_id = start_waiting(make_hazel(db_url, planner(quorum=3)))
    hazel = make_hazel(db_url, planner(quorum=3))  # another process: it keeps nothing of the run
    before = _counts(db_url)
    with _behind_the_lock(db_url, monkeypatch, "approvals = approvals + 1"):
        with pytest.raises(RunStateError, match="changed meanwhile"):
            hazel.decide(run_id=run_id, action="approve", actor=person("ana"))
    assert _counts(db_url) == before
    assert [r.approvals for r in hazel.requests(run_id=run_id)] == [1]  # the rogue's vote alone


def test_a_vote_on_what_was_kept_is_taken_again_when_the_request_moved(db_url: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL: the process that paused the run votes on the request as it kept it (``store.heads``); a vote
    counted meanwhile fails its guarded vote, nothing of it is written, and the decision is taken again from the
    database: counted after the other one."""
    if not db_url.startswith("postgresql"):
        pytest.skip("on SQLite no decision is taken on what was kept")
    hazel = make_hazel(db_url, planner(quorum=3))
    run_id = start_waiting(hazel)
    taken = hazel.store.heads.taken
    with _behind_the_lock(db_url, monkeypatch, "approvals = approvals + 1", once=True):
        outcome = hazel.decide(run_id=run_id, action="approve", actor=person("ana"))
    assert hazel.store.heads.taken == taken + 1
    assert (outcome.settled, outcome.request.approvals) == (False, 2)
    assert [r.approvals for r in hazel.requests(run_id=run_id)] == [2]  # the rogue's, then ana's
    assert [d.actor_id for d in hazel.decisions(run_id=run_id)] == ["ana"]
