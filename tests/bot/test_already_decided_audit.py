"""A decision refused because the request was settled first (by someone else, a rewind, a cancel) is in the
audit log as ``decision.refused`` with the rule "already decided", as permission and one-vote refusals are;
a decision that is taken writes no refusal."""

from __future__ import annotations

import pytest

from bot.engine.errors import AlreadyDecidedError
from store.models import RunStatus
from tests.support.engine import make_hazel, person
from tests.workflows.reviewed import reviewed


def waiting(hazel) -> tuple[str, int]:  # noqa: ANN001
    run = hazel.start(workflow="reviewed", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    return run.id, hazel.pending_request(run_id=run.id).id


def refused(hazel, run_id: str) -> list:  # noqa: ANN001
    return [e for e in hazel.audit(run_id=run_id) if e.action == "decision.refused"]


@pytest.mark.parametrize("bound", ["request_id", "point"])
def test_a_decision_on_a_request_someone_else_decided_is_audited(db_url: str, bound: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    run_id, request_id = waiting(hazel)
    hazel.decide(run_id=run_id, action="approve", actor=person("ann"))
    assert refused(hazel, run_id) == []  # the decision taken wrote no refusal
    where = {"request_id": request_id} if bound == "request_id" else {"point": "review"}
    with pytest.raises(AlreadyDecidedError, match="already approved by ann"):
        hazel.decide(run_id=run_id, action="reject", actor=person("bob"), payload={"reason": "no"}, **where)
    [event] = refused(hazel, run_id)
    assert (event.actor_id, event.request_id, event.detail["attempted"]) == ("bob", request_id, "reject")
    assert event.detail["rule"] == "already decided" and event.detail["decided_by"] == "ann"
    assert event.detail["reason"].startswith("already approved by ann at ")
    assert hazel.get(run_id=run_id).status is RunStatus.COMPLETED  # nothing else changed


def test_a_decision_on_a_cancelled_request_is_audited(db_url: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    run_id, request_id = waiting(hazel)
    hazel.cancel(run_id=run_id, actor=person("author"))
    with pytest.raises(AlreadyDecidedError, match="cancelled"):
        hazel.decide(run_id=run_id, action="approve", actor=person("bob"), request_id=request_id)
    [event] = refused(hazel, run_id)
    assert (event.actor_id, event.request_id, event.detail["rule"]) == ("bob", request_id, "already decided")


def test_a_rewind_of_a_request_someone_else_decided_is_audited(db_url: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    run_id, request_id = waiting(hazel)
    hazel.decide(run_id=run_id, action="feedback", actor=person("ann"), payload={"text": "again"})
    assert hazel.drive(run_id=run_id).run.status is RunStatus.WAITING  # asked again: a new request
    with pytest.raises(AlreadyDecidedError, match="answered with feedback by ann"):
        hazel.rewind(run_id=run_id, actor=person("bob"), to=0, request_id=request_id)
    [event] = refused(hazel, run_id)
    assert (event.actor_id, event.request_id, event.detail["attempted"]) == ("bob", request_id, "rewind")
    assert event.detail["rule"] == "already decided"


def test_already_decided_names_the_person_beside_the_identity(db_url: str) -> None:
    """priya approved through her CI token (the identity ``priya-ci`` on the API): the answer to the next one
    names priya, not the token (the audit log keeps the identity)."""
    from store.models import Actor

    hazel = make_hazel(db_url, reviewed())
    run_id, request_id = waiting(hazel)
    hazel.decide(run_id=run_id, action="approve", actor=Actor(id="priya-ci", channel="api", name="priya-ci",
                                                              person="priya"))
    with pytest.raises(AlreadyDecidedError, match=r"already approved by priya at "):
        hazel.decide(run_id=run_id, action="approve", actor=person("bob"), request_id=request_id)


def test_a_slack_identity_no_person_claims_is_named_by_its_slack_name_alone(db_url: str) -> None:
    from store.models import Actor

    hazel = make_hazel(db_url, reviewed())
    run_id, _ = waiting(hazel)
    sam = Actor(id="U0SLACK1", channel="slack", name="sam", person="slack:U0SLACK1")  # in no people file
    hazel.decide(run_id=run_id, action="approve", actor=sam)
    with pytest.raises(AlreadyDecidedError) as refusal:
        hazel.decide(run_id=run_id, action="reject", actor=person("bob"), payload={"reason": "no"})
    assert refusal.value.message.startswith("already approved by sam at "), refusal.value.message
    [event] = refused(hazel, run_id)
    assert event.detail["reason"].startswith("already approved by sam at ")
