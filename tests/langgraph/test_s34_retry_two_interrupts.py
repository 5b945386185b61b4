"""Retries of a super-step whose node asked twice and took both answers before its router raised (s34 F6), on
SQLite and PostgreSQL.

The node calls ``interrupt()`` twice; after the second answer its conditional-edge router raises. The task then
holds both answers (its ``RESUME`` write) and an error, and no interrupt waits. The retry (attempt 2, or ``hazel
retry``) took the second answer for one no node waits on ("renamed or removed?") and failed the run, the answer
lost; LangGraph itself goes on (``invoke(None)``) with both answers kept.

As in LangGraph, the retry runs neither the node nor its router again, so ``after`` (where the router would have
gone) never runs and the run completes (s34 F7): the retry logs a warning saying so.
"""

from __future__ import annotations

import logging
import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from store.models import RunStatus
from tests.langgraph.graphs import workflow
from tests.langgraph.test_s33_retry_after_answer import _asked, _values
from tests.support.engine import person


class S(TypedDict, total=False):
    topic: str
    first: str
    second: str
    log: Annotated[list[str], operator.add]


def _two_asks_graph(calls: dict[str, int], fails: dict[str, int]):
    """``START -> two -(router)-> after -> END``: two asks twice; the router raises while ``fails["router"]``
    is above 0 (a count; -1: always)."""

    def two(state: S) -> dict:
        calls["two"] = calls.get("two", 0) + 1
        a1 = interrupt("question 1")
        a2 = interrupt({"q": "question 2", "a1": a1["action"]})
        return {"first": a1["action"], "second": a2["action"], "log": ["two"]}

    def router(state: S) -> str:
        calls["router"] = calls.get("router", 0) + 1
        if fails["router"] != 0:
            fails["router"] = max(fails["router"] - 1, -1)
            raise RuntimeError("router: transient failure")
        return "after"

    def after(state: S) -> dict:
        calls["after"] = calls.get("after", 0) + 1
        return {"log": ["after"]}

    g = StateGraph(S)
    g.add_node("two", two)
    g.add_node("after", after)
    g.add_edge(START, "two")
    g.add_conditional_edges("two", router, ["after"])
    g.add_edge("after", END)
    return g.compile()


def _both_answered(db_url: str, wf: Any) -> tuple[Any, str]:
    hz, run_id = _asked(db_url, wf)
    run = hz.get(run_id=run_id)
    hz.decide(run_id=run.id, action="approve", actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.WAITING  # question 2
    assert hz.pending_request(run_id=run.id) is not None
    hz.decide(run_id=run.id, action="reject", actor=person("olga"), payload={"reason": "no"})
    hz.drive(run_id=run.id)
    return hz, run.id


def test_a_router_that_raises_once_after_the_second_answer_is_retried_with_both_answers_kept(
        db_url: str, caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="hazel.langgraph")
    calls: dict[str, int] = {}
    wf = workflow(_two_asks_graph(calls, {"router": 1}), name="lg-two-router", max_attempts=3, backoff_sec=0.01)
    hz, run_id = _both_answered(db_url, wf)

    done = hz.get(run_id=run_id)
    assert done.status is RunStatus.COMPLETED, done.error
    values = _values(wf, run_id)
    assert (values["first"], values["second"]) == ("approve", "reject")
    assert values["log"] == ["two"]  # as LangGraph's invoke(None): the route the router failed is not taken again
    assert hz.pending_request(run_id=run_id) is None
    assert [e.detail["attempt"] for e in hz.audit(run_id=run_id) if e.action == "step.retry_scheduled"] == [1]
    assert calls == {"two": 3, "router": 1}  # the node is not run again on the retry
    lost = [r.getMessage() for r in caplog.records if r.name == "hazel.langgraph" and "routers run again" in
            r.getMessage()]
    assert len(lost) == 1 and "after two finished and then raised" in lost[0], lost  # the retry only


def test_hazel_retry_after_the_router_failed_after_the_second_answer_keeps_both_answers(db_url: str) -> None:
    calls: dict[str, int] = {}
    fails = {"router": -1}
    wf = workflow(_two_asks_graph(calls, fails), name="lg-two-router", max_attempts=1, backoff_sec=0.01)
    hz, run_id = _both_answered(db_url, wf)
    failed = hz.get(run_id=run_id)
    assert failed.status is RunStatus.FAILED
    assert "router: transient failure" in (failed.error or ""), failed.error

    fails["router"] = 0  # fixed: `hazel retry` goes on with both answers kept, not "reaches no node"
    hz.retry(run_id=run_id, actor=person("olga"))
    hz.drive(run_id=run_id)
    done = hz.get(run_id=run_id)
    assert done.status is RunStatus.COMPLETED, done.error
    values = _values(wf, run_id)
    assert (values["first"], values["second"]) == ("approve", "reject")
    assert hz.pending_request(run_id=run_id) is None
    assert calls == {"two": 3, "router": 1}
