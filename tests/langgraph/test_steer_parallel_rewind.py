"""A rewind of a run that waits on two interrupts of one super-step, where only one point allows rewinding: it
is judged by the point of the request it names (``--request`` / ``request_id``), and without one by a point
that lets the person rewind; refused only when none does. SQLite and PostgreSQL."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from bot.engine import AlreadyDecidedError, InvalidDecisionError
from hazel.langgraph.steer import steer
from store.models import RequestStatus
from tests.langgraph.graphs import workflow
from tests.support.engine import make_hazel, person


def parallel_graph():  # noqa: ANN201
    class S(TypedDict, total=False):
        topic: str
        log: Annotated[list[str], operator.add]

    def intake(state: S) -> dict:
        return {"log": ["intake"]}

    def legal(state: S) -> dict:  # the default actions, rewind among them
        return {"log": [f"legal: {steer(title='Legal review', show=state['topic'])['action']}"]}

    def security(state: S) -> dict:
        answer = steer(title="Security review", show=state["topic"], actions=["approve", "reject", "edit"])
        return {"log": [f"security: {answer['action']}"]}

    g = StateGraph(S)
    for fn in (intake, legal, security):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "intake")
    g.add_edge("intake", "legal")
    g.add_edge("intake", "security")
    g.add_edge("legal", END)
    g.add_edge("security", END)
    return g.compile()


def _waiting(db_url: str):  # noqa: ANN202
    hz = make_hazel(db_url, workflow(parallel_graph(), name="lg-par"))
    run = hz.start(workflow="lg-par", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    asked = {r.point: r for r in hz.requests(run_id=run.id) if r.status is RequestStatus.PENDING}
    assert sorted(asked) == ["legal", "security"], asked
    return hz, run.id, asked


@pytest.mark.parametrize("named", [True, False])
def test_a_rewind_is_judged_by_a_point_that_allows_it(db_url: str, named: bool) -> None:
    hz, run_id, asked = _waiting(db_url)
    where = {"request_id": asked["legal"].id} if named else {}
    outcome = hz.rewind(run_id=run_id, actor=person("ana"), to=1, **where)
    assert outcome.decision.request_id == asked["legal"].id
    closed = {r.id: r.status for r in hz.requests(run_id=run_id)}
    assert closed[asked["legal"].id] is closed[asked["security"].id] is RequestStatus.DECIDED  # both closed
    hz.drive(run_id=run_id)
    again = sorted(r.point for r in hz.requests(run_id=run_id) if r.status is RequestStatus.PENDING)
    assert again == ["legal", "security"]  # asked again on the fork


def test_a_rewind_naming_the_point_that_forbids_it_is_refused(db_url: str) -> None:
    hz, run_id, asked = _waiting(db_url)
    before = [c.seq for c in hz.checkpoints(run_id=run_id)]
    with pytest.raises(InvalidDecisionError, match="'rewind' is not allowed at 'Security review'"):
        hz.rewind(run_id=run_id, actor=person("ana"), to=1, request_id=asked["security"].id)
    assert [c.seq for c in hz.checkpoints(run_id=run_id)] == before
    assert all(r.status is RequestStatus.PENDING for r in hz.requests(run_id=run_id) if r.id in
               {asked["legal"].id, asked["security"].id})


def test_a_decision_not_allowed_at_the_newest_point_says_where_it_is(db_url: str) -> None:
    hz, run_id, asked = _waiting(db_url)
    with pytest.raises(InvalidDecisionError) as refused:
        hz.decide(run_id=run_id, action="feedback", actor=person("ana"),
                  payload={"text": "more"})
    assert "'feedback' is not allowed at 'Security review'" in str(refused.value)
    assert f"; run {run_id} also waits at 'legal', where it is allowed: --at legal" in str(refused.value)
    hz.decide(run_id=run_id, action="feedback", actor=person("ana"), payload={"text": "more"}, point="legal")


def test_a_rewind_after_the_point_that_allows_it_was_answered_says_what_to_do(db_url: str) -> None:
    """Legal (rewind allowed) answered, security (no rewind) still pending: a rewind is refused at security,
    saying the run waits there and to answer it first; naming the answered legal request says where the run
    waits now. Nothing changes; once security is answered the run can be rewound."""
    hz, run_id, asked = _waiting(db_url)
    hz.decide(run_id=run_id, action="approve", actor=person("ana"), point="legal")
    before = [c.seq for c in hz.checkpoints(run_id=run_id)]
    with pytest.raises(InvalidDecisionError) as refused:
        hz.rewind(run_id=run_id, actor=person("ana"), to=1)
    assert str(refused.value) == (f"'rewind' is not allowed at 'Security review' (allowed: approve, reject, edit), "
                                  f"where run {run_id} waits: answer it first, then rewind (allowed at "
                                  "'Legal review')")
    with pytest.raises(AlreadyDecidedError) as settled:
        hz.rewind(run_id=run_id, actor=person("ana"), to=1, request_id=asked["legal"].id)
    assert str(settled.value).startswith("already approved by ana at ")
    assert str(settled.value).endswith(
        f"; run {run_id} now waits at 'security' (request {asked['security'].id})")
    assert [c.seq for c in hz.checkpoints(run_id=run_id)] == before
    hz.decide(run_id=run_id, action="approve", actor=person("ana"), point="security")
    hz.drive(run_id=run_id)
    hz.rewind(run_id=run_id, actor=person("ana"), to=1)  # nothing pending: a point allowing it decides
