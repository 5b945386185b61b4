"""A LangGraph graph steered through Hazel: interrupt() / steer() become steering requests, decisions resume
the graph with Command(resume=...), on SQLite and PostgreSQL. The graphs are compiled without a checkpointer:
Hazel gives them a HazelSaver on its own database."""

from __future__ import annotations

import asyncio
import operator
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from bot.engine.errors import NotAllowedError
from hazel import Approvers
from hazel.langgraph import HazelSaver, steer
from store.models import Actor, RequestStatus, RunStatus
from tests.langgraph.graphs import pair_graph, review_graph, revised_once, workflow
from tests.support.engine import make_hazel, person


class AskState(TypedDict, total=False):
    topic: str
    log: Annotated[list[str], operator.add]


def _values(wf, run_id):
    return wf.graph.get_state({"configurable": {"thread_id": run_id}}).values


def test_interrupt_waits_at_a_steering_request_and_approve_completes_the_graph(db_url):
    wf = workflow(review_graph())
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    run = hz.get(run_id=run.id)
    assert run.status is RunStatus.WAITING
    [request] = hz.requests(run_id=run.id)
    assert (request.point, request.title, request.channel) == ("review", "Approve the draft", "console")
    assert hz.shown(request_id=request.id).value == "Draft about tides"
    outcome = hz.decide(run_id=run.id, action="approve", actor=person("ana"))
    assert outcome.settled and outcome.resumes
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    values = _values(wf, run.id)
    assert values["published"] is True
    assert values["log"] == ["draft", "approved by ana", "publish"]
    assert isinstance(wf.graph.checkpointer, HazelSaver)  # the graph's checkpoints are in Hazel's database
    history = hz.checkpoints(run_id=run.id)  # one Hazel checkpoint per super-step of the graph
    assert [(c.step, c.next_step) for c in history] == [
        ("__start__", "draft"), ("draft", "review"), ("review", "review"), ("review", "review"),
        ("review", "publish"), ("publish", None)]


def test_edit_feedback_and_reject_resume_with_their_documented_values(db_url):
    wf = workflow(review_graph())
    hz = make_hazel(db_url, wf)
    run = hz.get(run_id=revised_once(hz))
    assert run.status is RunStatus.WAITING
    second = hz.requests(run_id=run.id)[-1]
    assert hz.shown(request_id=second.id).value == "Draft about tides [revised: shorter]"
    hz.decide(run_id=run.id, action="edit", actor=person("ana"), payload={"value": "Tides, by Ana"})
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    values = _values(wf, run.id)
    assert values["draft"] == "Tides, by Ana"
    assert values["log"] == ["draft", "feedback: shorter", "revise", "edited by ana", "publish"]

    other = hz.start(workflow="lg-review", input={"topic": "x"}, actor=person("olga"))
    hz.drive(run_id=other.id)
    hz.decide(run_id=other.id, action="reject", actor=person("ana"), payload={"reason": "off topic"})
    hz.drive(run_id=other.id)
    assert hz.get(run_id=other.id).status is RunStatus.COMPLETED
    assert _values(wf, other.id)["log"][-1] == "rejected: off topic"


def test_two_interrupts_in_one_super_step_are_two_requests_and_resume_together(db_url):
    wf = workflow(pair_graph(), name="lg-pair")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    requests = hz.requests(run_id=run.id)
    assert sorted(r.point for r in requests) == ["legal", "security"]
    assert all(r.status is RequestStatus.PENDING for r in requests)
    by_point = {r.point: r for r in requests}
    assert hz.shown(request_id=by_point["legal"].id).value == {"ask": "legal", "topic": "launch"}
    first = hz.decide(run_id=run.id, action="approve", actor=person("ana"), request_id=by_point["legal"].id)
    assert first.settled and not first.resumes
    assert hz.get(run_id=run.id).status is RunStatus.WAITING
    hz.decide(run_id=run.id, action="edit", actor=person("ana"), request_id=by_point["security"].id,
              payload={"value": {"ask": "security", "ok": True}})
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    log = _values(wf, run.id)["log"]
    assert sorted(log[:2]) == ["legal: approve", "security: edit {'ask': 'security', 'ok': True}"]
    assert log[2] == "join"


def test_a_rewind_or_a_cancel_closes_every_request_of_the_super_step(db_url):
    wf = workflow(pair_graph(), name="lg-pair")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    asked = hz.requests(run_id=run.id)

    hz.rewind(run_id=run.id, actor=person("ana"), to=asked[0].checkpoint_seq)  # both pending: both closed
    closed = {r.id: r for r in hz.requests(run_id=run.id)}
    assert [(closed[r.id].status, closed[r.id].decided_action) for r in asked] == [
        (RequestStatus.DECIDED, "rewind")] * 2
    hz.drive(run_id=run.id)
    pending = [r for r in hz.requests(run_id=run.id) if r.status is RequestStatus.PENDING]
    assert sorted(r.point for r in pending) == ["legal", "security"]  # asked again on the fork

    hz.cancel(run_id=run.id, actor=person("olga"))
    assert all(r.status is not RequestStatus.PENDING for r in hz.requests(run_id=run.id))
    assert hz.get(run_id=run.id).status is RunStatus.CANCELLED


def test_an_async_graph_is_steered_the_same_way(db_url):
    async def ask(state: AskState) -> dict:
        answer = steer(title="Go?", show=state["topic"])
        return {"log": [answer["action"]]}

    g = StateGraph(AskState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    wf = workflow(g.compile(), name="lg-async")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-async", input={"topic": "go"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.shown(request_id=hz.requests(run_id=run.id)[0].id).value == "go"
    hz.decide(run_id=run.id, action="approve", actor=person("ana"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert _values(wf, run.id)["log"] == ["approve"]


def test_an_async_graph_is_driven_from_a_thread_that_runs_an_event_loop(db_url):
    """``hazel.drive`` called where an event loop already runs (an async application calling the engine, a test
    harness such as Playwright's): the graph's calls get a loop of their own (``asyncio.run`` refused before)."""
    async def ask(state: AskState) -> dict:
        return {"log": [steer(title="Go?", show=state["topic"])["action"]]}

    g = StateGraph(AskState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    wf = workflow(g.compile(), name="lg-in-loop")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-in-loop", input={"topic": "go"}, actor=person("olga"))

    async def inside_a_loop() -> None:
        hz.drive(run_id=run.id)
        hz.decide(run_id=run.id, action="approve", actor=person("ana"))
        hz.drive(run_id=run.id)

    with ThreadPoolExecutor(max_workers=1) as pool:  # a thread of its own: this one may run a loop already
        pool.submit(asyncio.run, inside_a_loop()).result()
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert _values(wf, run.id)["log"] == ["approve"]


def test_a_node_name_hazel_does_not_allow_becomes_a_valid_steering_point_name(db_url):
    async def ask(state: AskState) -> dict:
        return {"log": [interrupt(state["topic"])["action"]]}

    g = StateGraph(AskState)
    g.add_node("ask me now!", ask)
    g.add_edge(START, "ask me now!")
    g.add_edge("ask me now!", END)
    wf = workflow(g.compile(), name="lg-names")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-names", input={"topic": "go"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    [request] = hz.requests(run_id=run.id)
    assert request.point == "ask_me_now_" and request.title == "Ask me now!"
    hz.decide(run_id=run.id, action="approve", actor=person("ana"))
    hz.drive(run_id=run.id)
    assert _values(wf, run.id)["log"] == ["approve"]


def test_two_interrupts_in_one_node_are_asked_one_after_the_other(db_url):
    def ask(state: AskState) -> dict:
        first = interrupt(f"title for {state['topic']}?")
        second = interrupt("and the summary?")
        return {"log": [first["value"], second["action"]]}

    g = StateGraph(AskState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    wf = workflow(g.compile(), name="lg-twice")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-twice", input={"topic": "kelp"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.shown(request_id=hz.requests(run_id=run.id)[-1].id).value == "title for kelp?"
    hz.decide(run_id=run.id, action="edit", actor=person("ana"), payload={"value": "Kelp forests"})
    hz.drive(run_id=run.id)
    second = hz.requests(run_id=run.id)[-1]
    assert second.status is RequestStatus.PENDING and hz.shown(request_id=second.id).value == "and the summary?"
    hz.decide(run_id=run.id, action="approve", actor=person("ana"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert _values(wf, run.id)["log"] == ["Kelp forests", "approve"]


class ItemState(TypedDict, total=False):
    items: list[str]
    item: str
    log: Annotated[list[str], operator.add]


def test_a_node_sent_twice_in_one_super_step_asks_twice(db_url):
    from langgraph.types import Send

    def check(state: ItemState) -> dict:
        return {"log": [f"{state['item']}: {interrupt(state['item'])['action']}"]}

    g = StateGraph(ItemState)
    g.add_node("check", check)
    g.add_conditional_edges(START, lambda s: [Send("check", {"item": i}) for i in s["items"]], ["check"])
    g.add_edge("check", END)
    wf = workflow(g.compile(), name="lg-send")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-send", input={"items": ["a", "b"]}, actor=person("olga"))
    hz.drive(run_id=run.id)
    requests = hz.requests(run_id=run.id)
    assert sorted(r.point for r in requests) == ["check", "check.2"]
    by_value = {hz.shown(request_id=r.id).value: r for r in requests}
    hz.decide(run_id=run.id, action="approve", actor=person("ana"), request_id=by_value["a"].id)
    hz.decide(run_id=run.id, action="reject", actor=person("ana"), request_id=by_value["b"].id,
              payload={"reason": "no"})
    hz.drive(run_id=run.id)
    assert sorted(_values(wf, run.id)["log"]) == ["a: approve", "b: reject"]


def test_an_interrupt_inside_a_subgraph_is_asked_and_resumed(db_url):
    def inner_ask(state: AskState) -> dict:
        return {"log": [f"inner: {steer(title='Inner?', show=state['topic'])['action']}"]}

    inner = StateGraph(AskState)
    inner.add_node("inner_ask", inner_ask)
    inner.add_edge(START, "inner_ask")
    inner.add_edge("inner_ask", END)
    g = StateGraph(AskState)
    g.add_node("sub", inner.compile())
    g.add_node("after", lambda state: {"log": ["after"]})
    g.add_edge(START, "sub")
    g.add_edge("sub", "after")
    g.add_edge("after", END)
    wf = workflow(g.compile(), name="lg-sub")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-sub", input={"topic": "deep"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    [request] = hz.requests(run_id=run.id)
    assert (request.point, request.title, hz.shown(request_id=request.id).value) == ("sub", "Inner?", "deep")
    hz.decide(run_id=run.id, action="approve", actor=person("ana"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert _values(wf, run.id)["log"] == ["inner: approve", "after"]


def test_a_cancel_while_the_runs_version_is_not_deployed_closes_every_request_and_approvers_may_cancel(db_url):
    def on_api(name: str) -> Actor:  # a REST caller: not the console operator, who may always cancel
        return Actor(id=name, channel="api", name=name, person=name)

    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair", approvers=Approvers(users=("priya",))))
    run = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=on_api("olga"))
    hz.drive(run_id=run.id)
    assert len([r for r in hz.requests(run_id=run.id) if r.status is RequestStatus.PENDING]) == 2

    only_v2 = make_hazel(db_url, workflow(pair_graph(), name="lg-pair", version=2,
                                          approvers=Approvers(users=("priya",))))
    with pytest.raises(NotAllowedError):  # neither its starter nor an approver
        only_v2.cancel(run_id=run.id, actor=on_api("mallory"))
    only_v2.cancel(run_id=run.id, actor=on_api("priya"), reason="gone")  # an approver of its points (v2's)
    assert [r.status for r in only_v2.requests(run_id=run.id)] == [RequestStatus.CANCELLED] * 2
    assert only_v2.get(run_id=run.id).status is RunStatus.CANCELLED
    assert only_v2.pending_request(run_id=run.id) is None
