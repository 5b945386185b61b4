"""Retries of a LangGraph run whose FIRST node raises, on SQLite and PostgreSQL: the node runs ``max_attempts``
times in all, as any other node does, and no checkpoint is written for it until it succeeds.

Before the first nodes run, LangGraph writes two checkpoints of the input (the input's, and the one after its
hidden ``__start__`` node); the step that ran again after the node raised took the second one for its finished
super-step: it recorded ``#1 boom → boom`` (the node never succeeded), and the head's move started the node's
attempts over (``max_attempts`` + 1 runs, two ``step.retry_scheduled attempt=1``)."""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from store.models import RunStatus
from tests.langgraph.graphs import workflow
from tests.support.engine import make_hazel, person


class Topic(TypedDict, total=False):
    topic: str
    log: Annotated[list[str], operator.add]


def _graph(calls: list[str], *, fails: dict[str, int], before: bool = False, beside: bool = False,
           is_async: bool = False):
    """``START -> [before ->] boom -> after -> END`` (``beside``: ``side`` runs in boom's super-step, then
    joins it at ``after``). Each node appends its name to ``calls``; ``boom`` raises while
    ``fails["boom"]`` is above 0 (a count; -1: always), after ``side`` has finished when it runs beside (else
    LangGraph may cancel ``side`` when ``boom`` raises first: then ``side`` has no writes to keep, a race that
    failed this test under load)."""
    side_done = threading.Event()

    def boom_sync(state: Topic) -> dict:
        calls.append("boom")
        if fails["boom"] != 0:
            if beside:
                side_done.wait(10)
            fails["boom"] = max(fails["boom"] - 1, -1)
            raise RuntimeError("boom failed")
        return {"log": ["boom"]}

    async def boom_async(state: Topic) -> dict:
        return boom_sync(state)

    def plain(name: str):  # noqa: ANN202
        def node(state: Topic) -> dict:
            calls.append(name)
            if name == "side":
                side_done.set()
            return {"log": [name]}
        return node

    g = StateGraph(Topic)
    g.add_node("boom", boom_async if is_async else boom_sync)
    g.add_node("after", plain("after"))
    if before:
        g.add_node("before", plain("before"))
        g.add_edge(START, "before")
        g.add_edge("before", "boom")
    else:
        g.add_edge(START, "boom")
    if beside:
        g.add_node("side", plain("side"))
        g.add_edge(START, "side")
        g.add_edge(["boom", "side"], "after")
    else:
        g.add_edge("boom", "after")
    g.add_edge("after", END)
    return g.compile()


def _history(hz: Any, run_id: str) -> list[tuple[int, str, str | None]]:
    return [(c.seq, c.step, c.next_step) for c in hz.checkpoints(run_id=run_id)]


def _values(wf: Any, run_id: str) -> dict[str, Any]:
    return wf.graph.get_state({"configurable": {"thread_id": run_id}}).values


def _retries(hz: Any, run_id: str) -> list[int]:
    return [e.detail["attempt"] for e in hz.audit(run_id=run_id) if e.action == "step.retry_scheduled"]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_first_node_that_always_raises_runs_max_attempts_times_and_retry_runs_it_again(
        db_url: str, is_async: bool) -> None:
    calls: list[str] = []
    fails = {"boom": -1}
    wf = workflow(_graph(calls, fails=fails, is_async=is_async), name="lg-raise", max_attempts=2,
                  backoff_sec=0.01)
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-raise", input={"topic": "x"}, actor=person("olga"))
    hz.drive(run_id=run.id)

    failed = hz.get(run_id=run.id)
    assert failed.status is RunStatus.FAILED and "boom failed" in (failed.error or "")
    assert calls == ["boom", "boom"]  # max_attempts in all, not one more
    assert _retries(hz, run.id) == [1]  # one per failed attempt but the last
    [gave_up] = [e for e in hz.audit(run_id=run.id) if e.action == "step.failed"]
    assert gave_up.detail["attempts"] == 2
    assert _history(hz, run.id) == [(0, "__start__", "boom")]  # nothing written for a node that never succeeded

    fails["boom"] = 0  # fixed: `hazel retry` runs the node again from the last good checkpoint (#0)
    hz.retry(run_id=run.id, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert calls == ["boom", "boom", "boom", "after"]
    assert _history(hz, run.id) == [(0, "__start__", "boom"), (1, "boom", "after"), (2, "after", None)]
    assert _values(wf, run.id)["log"] == ["boom", "after"]


def test_a_first_node_that_raises_once_runs_twice_and_has_one_checkpoint(db_url: str) -> None:
    calls: list[str] = []
    wf = workflow(_graph(calls, fails={"boom": 1}), name="lg-raise", max_attempts=2, backoff_sec=0.01)
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-raise", input={"topic": "x"}, actor=person("olga"))
    hz.drive(run_id=run.id)

    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert calls == ["boom", "boom", "after"]
    assert _retries(hz, run.id) == [1]
    assert _history(hz, run.id) == [(0, "__start__", "boom"), (1, "boom", "after"), (2, "after", None)]


def test_a_node_beside_the_first_one_that_raised_keeps_its_writes(db_url: str) -> None:
    """``side`` finished in the super-step where ``boom`` raised: the step that runs again continues from the
    input LangGraph took (its writes kept), rather than sending the input again (which would run it again)."""
    calls: list[str] = []
    wf = workflow(_graph(calls, fails={"boom": 1}, beside=True), name="lg-raise", max_attempts=2,
                  backoff_sec=0.01)
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-raise", input={"topic": "x"}, actor=person("olga"))
    hz.drive(run_id=run.id)

    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert sorted(calls) == ["after", "boom", "boom", "side"]
    assert _history(hz, run.id) == [(0, "__start__", "boom + side"), (1, "boom + side", "after"),
                                    (2, "after", None)]
    assert sorted(_values(wf, run.id)["log"]) == ["after", "boom", "side"]


def test_a_later_node_that_raises_is_counted_as_before(db_url: str) -> None:
    calls: list[str] = []
    wf = workflow(_graph(calls, fails={"boom": -1}, before=True), name="lg-raise", max_attempts=3,
                  backoff_sec=0.01)
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-raise", input={"topic": "x"}, actor=person("olga"))
    hz.drive(run_id=run.id)

    assert hz.get(run_id=run.id).status is RunStatus.FAILED
    assert calls == ["before", "boom", "boom", "boom"]
    assert _retries(hz, run.id) == [1, 2]
    assert _history(hz, run.id) == [(0, "__start__", "before"), (1, "before", "boom")]


def test_a_first_node_that_raises_after_a_rewind_to_the_start_runs_twice(db_url: str) -> None:
    """A rewind to the run's start sends the input again (a fork of the graph's thread): the same two input
    checkpoints, the same count."""
    calls: list[str] = []
    fails = {"boom": 0}
    wf = workflow(_graph(calls, fails=fails), name="lg-raise", max_attempts=2, backoff_sec=0.01)
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-raise", input={"topic": "x"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED and calls == ["boom", "after"]

    fails["boom"] = 1
    hz.rewind(run_id=run.id, actor=person("olga"), to=0)
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert calls == ["boom", "after", "boom", "boom", "after"]
    branch = [(c.step, c.next_step) for c in hz.checkpoints(run_id=run.id) if c.seq > 3]
    assert branch == [("boom", "after"), ("after", None)]  # after the fork (#3): boom once, when it succeeded


def test_a_first_step_cut_short_after_the_input_checkpoint_takes_the_input_once(db_url: str) -> None:
    """The step's first attempt ended between LangGraph's two input checkpoints (its checkpoint after
    ``__start__`` could not be written: as a process killed there): the step that runs again continues from
    the input checkpoint, with no second one."""
    from hazel.langgraph import HazelSaver

    class CutShort(HazelSaver):
        cut = True

        def put(self, config, checkpoint, metadata, new_versions):  # noqa: ANN001, ANN201
            if self.cut and metadata.get("source") == "loop":
                self.cut = False
                raise ConnectionResetError("cut short after the input checkpoint")
            return super().put(config, checkpoint, metadata, new_versions)

    calls: list[str] = []
    wf = workflow(_graph(calls, fails={"boom": 0}), name="lg-raise", max_attempts=2, backoff_sec=0.01)
    hz = make_hazel(db_url, wf)
    wf.graph = wf.graph.copy(update={"checkpointer": CutShort(hz.store)})
    run = hz.start(workflow="lg-raise", input={"topic": "x"}, actor=person("olga"))
    hz.drive(run_id=run.id)

    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert calls == ["boom", "after"] and _retries(hz, run.id) == [1]
    assert _history(hz, run.id) == [(0, "__start__", "boom"), (1, "boom", "after"), (2, "after", None)]
    sources = [s.metadata["source"] for s in wf.graph.get_state_history({"configurable": {"thread_id": run.id}})]
    assert sources == ["loop", "loop", "loop", "input"]  # the input taken once
    assert _values(wf, run.id)["log"] == ["boom", "after"]
