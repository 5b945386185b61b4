"""A LangGraph run whose nodes run in parallel, in the engine, on SQLite and PostgreSQL: a rewind with feedback or
edits to a graph checkpoint several nodes wrote at once is refused before anything is written (LangGraph cannot
tell which node the values would come from), a rewind there without them forks; every request pending in one
super-step is offered at once."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from bot.engine.errors import InvalidDecisionError
from store.models import RequestStatus, RunStatus
from tests.langgraph.graphs import fan_graph, workflow
from tests.support.engine import make_hazel, person

REFUSED = r"checkpoint #1 of run \w+ is at a graph checkpoint facts, notes wrote at once: .* rewind there without feedback or " \
          r"edits, or to checkpoint #0"


def _log(wf, run_id):
    return wf.graph.get_state({"configurable": {"thread_id": run_id}}).values["log"]


def _as_it_is(hz, run_id):
    run = hz.get(run_id=run_id)
    return (run.status, run.head_seq, run.last_seq, run.branch, len(hz.decisions(run_id=run_id)),
            [(r.id, r.status) for r in hz.requests(run_id=run_id)], len(hz.audit(run_id=run_id)))


def test_a_rewind_with_feedback_or_edits_to_parallel_nodes_checkpoint_is_refused_and_the_run_stays(db_url):
    wf = workflow(fan_graph(), name="lg-fan")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-fan", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert [(c.seq, c.next_step) for c in hz.checkpoints(run_id=run.id)][:3] == [
        (0, "facts + notes"), (1, "join"), (2, "review")]  # #1: written by facts and notes in one super-step
    before = _as_it_is(hz, run.id)
    assert before[0] is RunStatus.WAITING
    for kwargs in ({"feedback": "more"}, {"edits": {"topic": "reefs"}}):
        for to in ("join", 1):
            with pytest.raises(InvalidDecisionError, match=REFUSED):
                hz.rewind(run_id=run.id, actor=person("ana"), to=to, **kwargs)
            assert _as_it_is(hz, run.id) == before
    hz.drive(run_id=run.id)
    assert _as_it_is(hz, run.id) == before

    # A cancelled run rewound like that stays cancelled (it failed at every retry before).
    hz.cancel(run_id=run.id, actor=person("olga"))
    cancelled = _as_it_is(hz, run.id)
    with pytest.raises(InvalidDecisionError, match=REFUSED):
        hz.rewind(run_id=run.id, actor=person("olga"), to="join", feedback="more")
    hz.drive(run_id=run.id)
    assert _as_it_is(hz, run.id) == cancelled and cancelled[0] is RunStatus.CANCELLED

    # Without feedback or edits the fork is a copy of that checkpoint: join runs again, review asks again.
    hz.rewind(run_id=run.id, actor=person("olga"), to="join")
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.WAITING
    assert hz.requests(run_id=run.id)[-1].status is RequestStatus.PENDING
    hz.decide(run_id=run.id, action="approve", actor=person("ana"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert sorted(_log(wf, run.id)[:2]) == ["facts", "notes"]
    assert _log(wf, run.id)[2:] == ["join (no feedback)", "review: approve"]

    # With feedback, the checkpoint before the parallel nodes (the message names it) forks with it.
    hz.rewind(run_id=run.id, actor=person("olga"), to=0, feedback="more")
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="approve", actor=person("ana"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert _log(wf, run.id)[2:] == ["join (more)", "review: approve"]


def _two_fans():
    """``a + b`` in one super-step, then ``c + d`` in the next, then ``end``: two checkpoints in a row that
    several nodes wrote."""
    class S(TypedDict, total=False):
        topic: str
        feedback: str
        log: Annotated[list[str], operator.add]

    g = StateGraph(S)
    for name in ("a", "b", "c", "d", "last"):
        g.add_node(name, lambda state, name=name: {"log": [name]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], "c")
    g.add_edge(["a", "b"], "d")
    g.add_edge(["c", "d"], "last")
    g.add_edge("last", END)
    return g.compile()


def test_a_refused_rewind_names_the_nearest_checkpoint_that_takes_feedback(db_url):
    """A fresh-user finding: the refusal named the checkpoint before, which several nodes had written too, so
    the rewind it suggested was refused in turn. It names the nearest one before that takes the values."""
    wf = workflow(_two_fans(), name="lg-two-fans")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-two-fans", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert [(c.seq, c.next_step) for c in hz.checkpoints(run_id=run.id)][:3] == [
        (0, "a + b"), (1, "c + d"), (2, "last")]  # #1 and #2: each written by two nodes at once
    with pytest.raises(InvalidDecisionError, match=r"checkpoint #2 .* at once: .* or to checkpoint #0\b"):
        hz.rewind(run_id=run.id, actor=person("olga"), to=2, feedback="more")
    hz.rewind(run_id=run.id, actor=person("olga"), to=0, feedback="more")  # the one named: taken
