"""A decision taken by the process that paused the run (PostgreSQL): it reads nothing, sends its writes on what
that process kept of the run (``store.heads``), and whatever they find changed, it is taken again from the
database, with the answer a decision from any other process gets. On SQLite nothing is kept: the same tests
check that the answers are the same there."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from bot.engine.errors import AlreadyDecidedError
from hazel import Approvers
from store import fast
from store.models import RequestStatus, RunStatus
from tests.bot.test_decisions import planner, start_waiting
from tests.support.engine import make_hazel, person


def _sql(url: str, statement: str, **params: Any) -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(statement), params)
    finally:
        engine.dispose()


def _count(url: str, table: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    finally:
        engine.dispose()


def test_the_pausing_process_decides_without_reading(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hazel = make_hazel(db_url, planner())
    if hazel.store.dialect != "postgresql":
        pytest.skip("on SQLite a read costs no round trip: nothing is kept")
    run_id = start_waiting(hazel)
    sent: list[str] = []
    real = fast.execute

    def noting(conn, stmt, params, **kwargs):  # noqa: ANN001, ANN003, ANN202
        sent.append(fast.prepared(conn, stmt, params)[0].sql.lstrip())
        return real(conn, stmt, params, **kwargs)

    monkeypatch.setattr(fast, "execute", noting)
    outcome = hazel.decide(run_id=run_id, action="approve", actor=person("sme"), claim=True)
    monkeypatch.setattr(fast, "execute", real)
    assert outcome.settled and outcome.run_status is RunStatus.RUNNING and hazel.store.heads.taken == 1
    assert sent[0].startswith("WITH locked AS"), sent[0]  # the run locked first, as every decider does
    assert [s.split("\n")[0][:60] for s in sent if s.startswith("SELECT")] == []  # nothing read
    assert hazel.drive(run_id=run_id).status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=run_id).done
    (decision,) = hazel.decisions(run_id=run_id)
    assert hazel.checkpoints(run_id=run_id)[2].decision_id == decision.id  # the id kept, on both rows


def test_a_decision_here_after_one_elsewhere_is_refused_as_decided(db_url: str) -> None:
    here = make_hazel(db_url, planner())
    run_id = start_waiting(here)
    there = make_hazel(db_url, planner())  # another process
    there.decide(run_id=run_id, action="approve", actor=person("ann"))
    checkpoints, outbox = _count(db_url, "hazel_checkpoints"), _count(db_url, "hazel_outbox")
    with pytest.raises(AlreadyDecidedError, match="already approved by ann"):
        here.decide(run_id=run_id, action="reject", actor=person("bo"), payload={"reason": "no"})
    assert [d.actor_id for d in here.decisions(run_id=run_id)] == ["ann"]
    assert _count(db_url, "hazel_checkpoints") == checkpoints
    assert here.get(run_id=run_id).status is RunStatus.READY
    assert _count(db_url, "hazel_outbox") == outbox  # (the refusal is audited, no message is queued)


def test_a_run_cancelled_elsewhere_is_not_decided_here(db_url: str) -> None:
    here = make_hazel(db_url, planner())
    run_id = start_waiting(here)
    make_hazel(db_url, planner()).cancel(run_id=run_id, actor=person("ann"), reason="not needed")
    with pytest.raises(AlreadyDecidedError, match="this request was cancelled .* by ann"):
        here.decide(run_id=run_id, action="approve", actor=person("bo"))
    assert here.get(run_id=run_id).status is RunStatus.CANCELLED and here.decisions(run_id=run_id) == []


def test_a_run_rewound_elsewhere_is_decided_where_it_waits_now(db_url: str) -> None:
    """This process paused the run; another rewound it with feedback and paused it again on the new branch: an
    approval here (no request named) decides the request the run waits on now, on the fork's state."""
    here = make_hazel(db_url, planner())
    run_id = start_waiting(here)
    there = make_hazel(db_url, planner())
    there.decide(run_id=run_id, action="rewind", actor=person("ann"), payload={"to": 1, "feedback": "again"})
    assert there.drive(run_id=run_id).status is RunStatus.WAITING
    now_pending = there.pending_request(run_id=run_id)
    outcome = here.decide(run_id=run_id, action="approve", actor=person("bo"))
    assert outcome.settled and outcome.request.id == now_pending.id
    assert here.drive(run_id=run_id).status is RunStatus.COMPLETED
    state = there.state_at(run_id=run_id)
    assert state.done and state.seen_feedback == ["ann:again"]


def test_an_escalated_request_is_decided_by_its_backup_approver(db_url: str) -> None:
    """Kept before the escalation, the request names its first approvers only; the backup approver's approval
    is not refused on that: it is taken again from the database, where the request is escalated."""
    wf = planner(approvers=Approvers(users=["ann"]))
    wf.nodes["review"] = wf.nodes["review"].model_copy(update={"escalate_to": Approvers(users=["lead"]),
                                                               "escalate_after_sec": 3600.0})
    hazel = make_hazel(db_url, wf)
    run_id = start_waiting(hazel)
    request = hazel.pending_request(run_id=run_id)
    _sql(db_url, "UPDATE hazel_steering_requests SET escalated_at = created_at WHERE id = :id", id=request.id)
    outcome = hazel.decide(run_id=run_id, action="approve", actor=person("lead"))
    assert outcome.settled and outcome.request.status is RequestStatus.DECIDED
    assert hazel.store.heads.taken == (hazel.store.dialect == "postgresql")  # (kept, then read)
    assert [e.action for e in hazel.audit(run_id=run_id) if e.action.startswith("decision.")] == ["decision.approve"]


def test_two_deciders_in_the_pausing_process_settle_it_once(db_url: str) -> None:
    """Two threads of the process that paused the run approve it at once: one takes what was kept, the other
    reads; the database lets one settle the request, the other is told who did."""
    hazel = make_hazel(db_url, planner())
    for _ in range(3):
        run_id = start_waiting(hazel)
        barrier = threading.Barrier(2)
        results: dict[str, Any] = {}

        def decide(who: str) -> None:
            barrier.wait()
            try:
                results[who] = hazel.decide(run_id=run_id, action="approve", actor=person(who))
            except AlreadyDecidedError as exc:
                results[who] = exc

        threads = [threading.Thread(target=decide, args=(who,)) for who in ("ann", "bo")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        won = [who for who, r in results.items() if not isinstance(r, Exception)]
        assert len(won) == 1, results
        lost = "bo" if won == ["ann"] else "ann"
        assert isinstance(results[lost], AlreadyDecidedError) and f"by {won[0]}" in str(results[lost])
        assert [d.actor_id for d in hazel.decisions(run_id=run_id)] == won
        assert [c.step for c in hazel.checkpoints(run_id=run_id)] == ["__start__", "draft", "review"]


def test_a_settlement_after_a_vote_elsewhere_comes_after_it(db_url: str) -> None:
    """A quorum of two: another process counted one approval; a rejection here then settles the request. It is
    recorded after that vote, by id and by time (the id kept from the pause is for the request's first
    decision only: a settlement too is refused when a vote was counted since it was kept)."""
    here = make_hazel(db_url, planner(quorum=2))
    run_id = start_waiting(here)
    there = make_hazel(db_url, planner(quorum=2))
    assert not there.decide(run_id=run_id, action="approve", actor=person("ann")).settled
    outcome = here.decide(run_id=run_id, action="reject", actor=person("bo"), payload={"reason": "no"})
    assert outcome.settled and outcome.run_status is RunStatus.REJECTED
    vote, rejection = here.decisions(run_id=run_id)
    assert (vote.actor_id, rejection.actor_id) == ("ann", "bo")
    assert vote.id < rejection.id and vote.created_at <= rejection.created_at
    assert here.requests(run_id=run_id)[0].decided_at == rejection.created_at


def test_a_decision_that_waited_for_the_run_takes_its_id_after_the_wait(db_url: str) -> None:
    """PostgreSQL: a decision reads its run under lock with an id for itself. The id is taken once the lock is
    held: one that waited for the lock holds a newer id than anything taken meanwhile, so that decisions on a
    run are numbered in the order they commit (a refusal names the latest one that settled a request). It
    was taken before the wait: a vote that waited held an older id than the vote it waited for."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite: a decision takes its id as its row is inserted, under the write lock")
    hazel = make_hazel(db_url, planner(quorum=3))
    run_id = start_waiting(make_hazel(db_url, planner(quorum=3)))  # another process paused it: nothing kept here
    holder = create_engine(db_url)
    try:
        with holder.connect() as conn:
            conn.execute(text("SELECT id FROM hazel_runs WHERE id = :id FOR UPDATE"), {"id": run_id})
            voted: list[Any] = []
            waiting = threading.Thread(target=lambda: voted.append(
                hazel.decide(run_id=run_id, action="approve", actor=person("ann"))))
            waiting.start()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not _waits_for_a_lock(db_url):
                time.sleep(0.02)
            meanwhile = conn.execute(text("SELECT nextval(pg_get_serial_sequence('hazel_decisions', 'id'))")).scalar()
            conn.commit()  # the lock goes: the vote continues
        waiting.join(30)
    finally:
        holder.dispose()
    (decision,) = hazel.decisions(run_id=run_id)
    assert voted and decision.actor_id == "ann" and decision.id > meanwhile


def _waits_for_a_lock(url: str) -> bool:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return bool(conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                          "AND datname = current_database()")).scalar())
    finally:
        engine.dispose()
