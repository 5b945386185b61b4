"""A steer() request follows the same rules as a native steering point: who may decide, quorum, one vote per
person, reminders, timeouts, the audit log; a rewind forks the graph; a run pins its graph's version. SQLite
and PostgreSQL."""

from __future__ import annotations

import pytest

from bot.engine.errors import NotAllowedError, VersionUnavailableError, WorkflowDefinitionError
from bot.ops.scheduler import Scheduler
from hazel import AlreadyDecidedError, Approvers
from store.models import Actor, RequestStatus, RunStatus
from tests.langgraph.graphs import review_graph, workflow
from tests.support.clock import FakeClock
from tests.support.engine import make_hazel, person

HOUR = 3600.0


def _waiting(db_url, *, clock=None, **settings):
    wf = workflow(review_graph(**settings))
    hz = make_hazel(db_url, wf, **({"clock": clock} if clock else {}))
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    assert hz.drive(run_id=run.id).run.status is RunStatus.WAITING
    return hz, wf, run.id


def _log(wf, run_id):
    return wf.graph.get_state({"configurable": {"thread_id": run_id}}).values["log"]


def test_approvers_quorum_and_one_vote_per_person(db_url):
    hz, wf, run_id = _waiting(db_url, approvers=Approvers(users=["ana", "bob"]), approvals_required=2)
    with pytest.raises(NotAllowedError, match="carl"):
        hz.decide(run_id=run_id, action="approve", actor=person("carl"))
    [refused] = [e for e in hz.audit(run_id=run_id) if e.action == "decision.refused"]
    assert refused.actor_id == "carl"
    first = hz.decide(run_id=run_id, action="approve", actor=person("ana"))
    assert not first.settled and hz.get(run_id=run_id).status is RunStatus.WAITING
    with pytest.raises(AlreadyDecidedError, match="one person has one vote"):
        hz.decide(run_id=run_id, action="approve", actor=person("ana"))
    assert hz.decide(run_id=run_id, action="approve", actor=person("bob")).resumes
    hz.drive(run_id=run_id)
    assert _log(wf, run_id)[-2:] == ["approved by bob", "publish"]
    actions = [e.action for e in hz.audit(run_id=run_id)]
    assert actions.count("decision.approve") == 2 and "request.opened" in actions


def test_a_settled_steer_request_refuses_who_may_not_before_saying_who_decided(db_url):
    """The point's approvers come with the interrupt (the checkpoint it was asked at): once its request is
    settled, who may not is refused as while it waited, and only who may is told who decided."""
    hz, wf, run_id = _waiting(db_url, approvers=Approvers(users=["ana", "bob"]))
    request = hz.requests(run_id=run_id)[-1]
    with pytest.raises(NotAllowedError) as pending:
        hz.decide(run_id=run_id, action="approve", actor=person("carl"), request_id=request.id)
    hz.decide(run_id=run_id, action="approve", actor=person("ana"), delivery_id="ana-1")
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.COMPLETED
    with pytest.raises(NotAllowedError) as settled:
        hz.decide(run_id=run_id, action="approve", actor=person("carl"), request_id=request.id)
    assert settled.value.message == pending.value.message and "may not approve" in settled.value.message
    with pytest.raises(NotAllowedError, match="carl may not reject"):
        hz.decide(run_id=run_id, action="reject", actor=person("carl"), payload={"reason": "no"})
    with pytest.raises(AlreadyDecidedError, match="^already approved by ana at "):
        hz.decide(run_id=run_id, action="reject", actor=person("bob"), payload={"reason": "no"},
                  request_id=request.id)
    again = hz.decide(run_id=run_id, action="approve", actor=person("ana"), delivery_id="ana-1")
    assert again.duplicate and len(hz.decisions(run_id=run_id)) == 1
    refused = [e for e in hz.audit(run_id=run_id) if e.action == "decision.refused"]
    assert [(e.actor_id, e.detail.get("rule")) for e in refused] == [
        ("carl", None), ("carl", None), ("carl", None), ("bob", "already decided")]


def test_a_duplicate_delivery_decides_once(db_url):
    hz, wf, run_id = _waiting(db_url)
    one = hz.decide(run_id=run_id, action="feedback", actor=person("ana"), payload={"text": "x"}, delivery_id="d1")
    two = hz.decide(run_id=run_id, action="feedback", actor=person("ana"), payload={"text": "x"}, delivery_id="d1")
    assert not one.duplicate and two.duplicate
    assert len(hz.decisions(run_id=run_id)) == 1


def test_reminders_and_a_timeout_resume_the_graph_with_the_timeouts_reason(db_url):
    clock = FakeClock()
    hz, wf, run_id = _waiting(db_url, clock=clock, remind_after_sec=HOUR, timeout_sec=3 * HOUR,
                              on_timeout="reject")
    scheduler = Scheduler(hz)
    request = hz.requests(run_id=run_id)[-1]
    assert request.due_at == clock.now.replace() + (request.due_at - request.created_at)
    clock.advance(HOUR)
    assert len(scheduler.tick().reminders) == 1
    clock.advance(2 * HOUR)
    assert scheduler.tick().timeouts == [(request.id, "reject")]
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.COMPLETED
    assert _log(wf, run_id)[-1] == "rejected: timed out after 10800 s"


def test_invalid_steer_settings_fail_the_step_with_the_reason(db_url):
    wf = workflow(review_graph(channel="slack:not a channel"), max_attempts=1)
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    failed = hz.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED and "invalid channel 'slack:not a channel'" in failed.error
    with pytest.raises(WorkflowDefinitionError, match="on_timeout without timeout_sec"):
        workflow(review_graph(), on_timeout="approve")


def test_rewind_to_the_interrupt_asks_again_and_rewind_with_edits_updates_the_fork(db_url):
    hz, wf, run_id = _waiting(db_url)
    hz.decide(run_id=run_id, action="approve", actor=person("ana"))
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.COMPLETED
    asked_at = hz.requests(run_id=run_id)[0].checkpoint_seq

    hz.rewind(run_id=run_id, actor=person("ana"), to=asked_at)  # the interrupt's checkpoint: asked again
    hz.drive(run_id=run_id)
    again = hz.requests(run_id=run_id)[-1]
    assert again.status is RequestStatus.PENDING and again.point == "review"
    assert hz.shown(request_id=again.id).value == "Draft about tides"
    hz.decide(run_id=run_id, action="reject", actor=person("ana"), payload={"reason": "no"})
    hz.drive(run_id=run_id)
    assert _log(wf, run_id) == ["draft", "rejected: no"]  # the fork's own history, not the first branch's

    hz.rewind(run_id=run_id, actor=person("ana"), to="review", edits={"draft": "Tides, rewritten"})
    hz.drive(run_id=run_id)
    assert hz.shown(request_id=hz.requests(run_id=run_id)[-1].id).value == "Tides, rewritten"
    hz.decide(run_id=run_id, action="approve", actor=person("ana"))
    hz.drive(run_id=run_id)
    values = wf.graph.get_state({"configurable": {"thread_id": run_id}}).values
    assert values["draft"] == "Tides, rewritten" and values["published"] is True
    assert len({c.branch for c in hz.checkpoints(run_id=run_id)}) == 3


def test_a_waiting_run_keeps_its_version_and_is_refused_when_it_is_gone(db_url):
    v1 = workflow(review_graph(), version=1)
    hz = make_hazel(db_url, v1)
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)

    # v2 of the graph deployed beside v1: the waiting run resumes on v1's code.
    calls: list[str] = []
    v2 = workflow(review_graph(on_node=calls.append), version=2)
    hz2 = make_hazel(db_url, v1, v2)
    hz2.decide(run_id=run.id, action="approve", actor=person("ana"))
    hz2.drive(run_id=run.id)
    assert hz2.get(run_id=run.id).status is RunStatus.COMPLETED and calls == []

    # Only v2 deployed: a v1 run waiting is refused, naming the versions, and stays as it is.
    other = hz.start(workflow="lg-review", input={"topic": "x"}, actor=person("olga"), version=1)
    hz.drive(run_id=other.id)
    hz3 = make_hazel(db_url, workflow(review_graph(), version=2))
    with pytest.raises(VersionUnavailableError) as refused:
        hz3.decide(run_id=other.id, action="approve", actor=person("ana"))
    # (a graph declares no migrations: the refusal does not ask for one, a fresh-user finding)
    assert str(refused.value) == (
        f"run {other.id} is on graph 'lg-review' version 1, which is not deployed (deployed: v2); a graph's run "
        "continues only on its own version: register v1 beside the new one, or cancel the run; the run stays "
        "as it is")
    assert hz3.get(run_id=other.id).status is RunStatus.WAITING
    assert hz3.requests(run_id=other.id)[-1].status is RequestStatus.PENDING


def test_rewind_and_cancel_of_a_run_waiting_on_nothing_follow_its_own_points(db_url):
    hz, wf, run_id = _waiting(db_url, approvers=Approvers(users=["ana"]))
    hz.decide(run_id=run_id, action="approve", actor=person("ana"))
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.COMPLETED
    with pytest.raises(NotAllowedError, match="carl may not rewind"):
        hz.rewind(run_id=run_id, actor=person("carl"), to="review")
    hz.rewind(run_id=run_id, actor=person("ana"), to="review")
    hz.drive(run_id=run_id)
    hz.decide(run_id=run_id, action="approve", actor=person("ana"))
    hz.drive(run_id=run_id)
    carl = Actor(id="carl", channel="api", name="carl", person="carl")  # (the console operator may, always)
    with pytest.raises(NotAllowedError, match="carl may not rewind"):
        hz.rewind(run_id=run_id, actor=carl, to="review")
    hz.rewind(run_id=run_id, actor=Actor(id="ana", channel="api", name="ana", person="ana"), to="review")
    hz.drive(run_id=run_id)
    with pytest.raises(NotAllowedError, match="carl may not cancel"):
        hz.cancel(run_id=run_id, actor=carl)
    assert hz.cancel(run_id=run_id, actor=Actor(id="ana", channel="api", name="ana", person="ana")).status is \
        RunStatus.CANCELLED


def test_escalation_lets_the_backup_approvers_decide(db_url):
    clock = FakeClock()
    hz, wf, run_id = _waiting(db_url, clock=clock, approvers=Approvers(users=["ana"]), escalate_after_sec=HOUR,
                              escalate_to=Approvers(users=["lead"]))
    with pytest.raises(NotAllowedError):
        hz.decide(run_id=run_id, action="approve", actor=person("lead"))
    clock.advance(HOUR)
    assert len(Scheduler(hz).tick().escalations) == 1
    assert hz.requests(run_id=run_id)[-1].escalated_at is not None
    assert hz.decide(run_id=run_id, action="approve", actor=person("lead")).resumes
    hz.drive(run_id=run_id)
    assert _log(wf, run_id)[-2:] == ["approved by lead", "publish"]
