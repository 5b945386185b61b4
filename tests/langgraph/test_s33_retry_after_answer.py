"""Retries of a super-step whose node had taken the person's answer (s33 F2), on SQLite and PostgreSQL.

After an answered ``interrupt()``, the node's conditional-edge router (or LangGraph's validation of the state
after the node) raised: the task errored after it had consumed its resume value, so LangGraph no longer lists
the interrupt as waiting (its task has an error and the node's writes). The retry took that for "the node that
asked is gone" (``_refuse_unheard``) and failed the run with a ``StepContractError``, attempt 2 and ``hazel
retry`` alike; LangGraph itself continues the thread (``invoke(None)``) with the answer kept. Resending the
answer would not do either: LangGraph appends it to the task's answers again, so a node's second
``interrupt()`` would take the first answer as its own.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from store.models import RunStatus
from tests.langgraph.graphs import workflow
from tests.support.engine import make_hazel, person


class S(TypedDict, total=False):
    topic: str
    answer: str
    log: Annotated[list[str], operator.add]


def _router_graph(calls: dict[str, int], fails: dict[str, int]):
    """``START -> review -(router)-> END``: review asks once; the router raises while ``fails["router"]`` is
    above 0 (a count; -1: always)."""

    def review(state: S) -> dict:
        calls["review"] = calls.get("review", 0) + 1
        a = interrupt("ok?")
        return {"answer": a["action"], "log": [f"answer={a['action']} by {a['by']}"]}

    def router(state: S) -> str:
        calls["router"] = calls.get("router", 0) + 1
        if fails["router"] != 0:
            fails["router"] = max(fails["router"] - 1, -1)
            raise RuntimeError("router: transient failure")
        return END

    g = StateGraph(S)
    g.add_node("review", review)
    g.add_edge(START, "review")
    g.add_conditional_edges("review", router, [END])
    return g.compile()


def _values(wf: Any, run_id: str) -> dict[str, Any]:
    return wf.graph.get_state({"configurable": {"thread_id": run_id}}).values


def _asked(db_url: str, wf: Any) -> tuple[Any, str]:
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow=wf.name, input={"topic": "t"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.pending_request(run_id=run.id) is not None
    return hz, run.id


def test_a_router_that_raises_once_after_an_answer_is_retried_with_the_answer_kept(db_url: str) -> None:
    calls: dict[str, int] = {}
    wf = workflow(_router_graph(calls, {"router": 1}), name="lg-router", max_attempts=3, backoff_sec=0.01)
    hz, run_id = _asked(db_url, wf)
    hz.decide(run_id=run_id, action="approve", actor=person("olga"))
    hz.drive(run_id=run_id)

    done = hz.get(run_id=run_id)
    assert done.status is RunStatus.COMPLETED, done.error
    assert _values(wf, run_id)["answer"] == "approve"
    assert _values(wf, run_id)["log"] == ["answer=approve by olga"]  # the answer taken once, not asked again
    assert hz.pending_request(run_id=run_id) is None
    assert [e.detail["attempt"] for e in hz.audit(run_id=run_id) if e.action == "step.retry_scheduled"] == [1]
    # as LangGraph's invoke(None) goes on: the failed task's writes are its result, the node does not run again
    assert calls == {"review": 2, "router": 1}


def test_hazel_retry_of_a_run_whose_router_failed_after_an_answer_keeps_the_answer(db_url: str) -> None:
    calls: dict[str, int] = {}
    fails = {"router": -1}
    wf = workflow(_router_graph(calls, fails), name="lg-router", max_attempts=1, backoff_sec=0.01)
    hz, run_id = _asked(db_url, wf)
    hz.decide(run_id=run_id, action="approve", actor=person("olga"))
    hz.drive(run_id=run_id)
    failed = hz.get(run_id=run_id)
    assert failed.status is RunStatus.FAILED
    assert "router: transient failure" in (failed.error or ""), failed.error  # the router's error, not a contract's
    assert calls == {"review": 2, "router": 1}

    fails["router"] = 0  # fixed: `hazel retry` goes on from the checkpoint where the answer was given
    hz.retry(run_id=run_id, actor=person("olga"))
    hz.drive(run_id=run_id)
    done = hz.get(run_id=run_id)
    assert done.status is RunStatus.COMPLETED, done.error
    assert _values(wf, run_id)["answer"] == "approve"
    assert hz.pending_request(run_id=run_id) is None


class P(TypedDict, total=False):
    topic: str
    first: str
    second: str


def test_a_node_that_raises_after_its_first_answer_gets_its_second_question_asked_not_answered(
        db_url: str) -> None:
    """The node raises once after ``interrupt()`` returned the first answer: the retry must not hand that answer
    to its second ``interrupt()`` (the resume value sent again is appended to the task's answers)."""
    fails = {"n": 1}

    def two(state: P) -> dict:
        a1 = interrupt("question 1")
        if fails["n"]:
            fails["n"] -= 1
            raise RuntimeError("after answer 1: transient")
        a2 = interrupt("question 2")
        return {"first": a1["action"], "second": a2["action"]}

    g = StateGraph(P)
    g.add_node("two", two)
    g.add_edge(START, "two")
    g.add_edge("two", END)
    wf = workflow(g.compile(), name="lg-two", max_attempts=3, backoff_sec=0.01)
    hz, run_id = _asked(db_url, wf)
    hz.decide(run_id=run_id, action="approve", actor=person("olga"))
    hz.drive(run_id=run_id)

    waiting = hz.get(run_id=run_id)
    assert waiting.status is RunStatus.WAITING, waiting.error  # question 2 is asked, not answered with answer 1
    assert hz.pending_request(run_id=run_id) is not None
    hz.decide(run_id=run_id, action="reject", actor=person("olga"), payload={"reason": "no"})
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.COMPLETED
    assert _values(wf, run_id) == {"topic": "t", "first": "approve", "second": "reject"}
