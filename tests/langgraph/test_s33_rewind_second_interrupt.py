"""A rewind to the checkpoint where a node's second ``interrupt()`` was asked (s33 F7), on SQLite and PostgreSQL.

The node asks question 1, is answered, runs again from its start (LangGraph keeps the answer in the task's
``RESUME`` pending write) and asks question 2: both questions are asked at one graph checkpoint, so Hazel's
checkpoints #1 (question 1) and #3 (question 2) point at the same one. A rewind to #3 forked there with nothing
kept: question 1 was asked again and its answer lost. It now asks question 2 again, with answer 1 kept, as the
checkpoint it rewinds to stood; a rewind to #1 still asks question 1.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from store.models import RunStatus
from tests.langgraph.graphs import workflow
from tests.support.engine import make_hazel, person


class S(TypedDict, total=False):
    topic: str
    feedback: str
    log: Annotated[list[str], operator.add]


def _graph(asked: list[str], *, is_async: bool = False):
    def two_sync(state: S) -> dict:
        asked.append("q1")
        a1 = interrupt("question 1: budget ok?")
        asked.append("q2")
        a2 = interrupt("question 2: legal ok?")
        return {"log": [f"q1={a1['action']} by {a1['by']} q2={a2['action']} by {a2['by']}"]}

    async def two_async(state: S) -> dict:
        return two_sync(state)

    g = StateGraph(S)
    g.add_node("two", two_async if is_async else two_sync)
    g.add_edge(START, "two")
    g.add_edge("two", END)
    return g.compile()


def _shown(hz: Any, run_id: str) -> str:
    request = hz.pending_request(run_id=run_id)
    assert request is not None
    with hz.store.transaction() as tx:
        tree = tx.checkpoints.load(run_id, request.checkpoint_seq).tree
    return tree[request.point]


def _log(wf: Any, run_id: str) -> list[str]:
    return wf.graph.get_state({"configurable": {"thread_id": run_id}}).values.get("log", [])


def _at_question_2(db_url: str, is_async: bool = False) -> tuple[Any, Any, str, list[str]]:
    asked: list[str] = []
    wf = workflow(_graph(asked, is_async=is_async), name="lg-two")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-two", input={"topic": "t"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert _shown(hz, run.id) == "question 1: budget ok?"
    hz.decide(run_id=run.id, action="approve", actor=person("olga"))
    hz.drive(run_id=run.id)
    assert _shown(hz, run.id) == "question 2: legal ok?"
    assert [(c.seq, c.step, c.next_step) for c in hz.checkpoints(run_id=run.id)] == [
        (0, "__start__", "two"), (1, "two", "two"), (2, "two", "two"), (3, "two", "two")]
    return hz, wf, run.id, asked


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_rewind_to_where_question_2_was_asked_asks_question_2_with_answer_1_kept(
        db_url: str, is_async: bool) -> None:
    hz, wf, run_id, asked = _at_question_2(db_url, is_async)
    hz.rewind(run_id=run_id, actor=person("olga"), to=3)
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.WAITING
    assert _shown(hz, run_id) == "question 2: legal ok?"  # not question 1 again

    hz.decide(run_id=run_id, action="reject", actor=person("olga"), payload={"reason": "no"})
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.COMPLETED
    assert _log(wf, run_id) == ["q1=approve by olga q2=reject by olga"]  # answer 1 as it was given
    assert asked.count("q1") == 4  # the node runs from its start every time, as LangGraph runs it


def test_a_rewind_to_where_question_1_was_asked_still_asks_question_1(db_url: str) -> None:
    hz, wf, run_id, _ = _at_question_2(db_url)
    hz.rewind(run_id=run_id, actor=person("olga"), to=1)
    hz.drive(run_id=run_id)
    assert _shown(hz, run_id) == "question 1: budget ok?"


def test_a_rewind_with_feedback_to_question_2_keeps_answer_1_and_a_rewind_to_that_fork_too(db_url: str) -> None:
    hz, wf, run_id, _ = _at_question_2(db_url)
    hz.rewind(run_id=run_id, actor=person("olga"), to=3, feedback="look again")
    hz.drive(run_id=run_id)
    assert _shown(hz, run_id) == "question 2: legal ok?"
    assert [(c.seq, c.step) for c in hz.checkpoints(run_id=run_id) if c.seq > 3] == [(4, "__rewind__"), (5, "two")]
    hz.rewind(run_id=run_id, actor=person("olga"), to=4)  # the ↩ checkpoint: it asks question 2 again too
    hz.drive(run_id=run_id)
    assert _shown(hz, run_id) == "question 2: legal ok?"
    hz.decide(run_id=run_id, action="approve", actor=person("olga"))
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.COMPLETED
    assert _log(wf, run_id) == ["q1=approve by olga q2=approve by olga"]
    assert wf.graph.get_state({"configurable": {"thread_id": run_id}}).values["feedback"] == "look again"
