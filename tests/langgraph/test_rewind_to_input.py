"""A rewind to a LangGraph run's start (checkpoint #0) hands the graph its input again, and LangGraph keeps of
an input only the keys of the graph's ``input_schema``. A fresh-user finding (s22, HIGH): feedback and edits of
channels the input schema does not declare were accepted, shown on the rewind's checkpoint, and reached no node.
They are refused now, saying why; an input channel's edit still reaches the first node. SQLite and PostgreSQL."""

from __future__ import annotations

from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from bot.engine.errors import InvalidDecisionError
from hazel.langgraph import steer
from tests.langgraph.graphs import workflow
from tests.support.engine import make_hazel, person


class In(TypedDict):
    topic: str


class St(In, total=False):
    draft: str
    feedback: str
    n: int


def input_schema_graph():  # noqa: ANN201
    def draft(s: St) -> dict:
        return {"draft": f"draft of {s['topic']} fb={s.get('feedback', '')} n={s.get('n')}"}

    def review(s: St) -> dict:
        steer(show=s["draft"])
        return {}

    g = StateGraph(St, input_schema=In)
    g.add_node("draft", draft)
    g.add_node("review", review)
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_edge("review", END)
    return g.compile()


@pytest.mark.parametrize(("payload", "says"), [
    ({"feedback": "add a rollback check"}, "the feedback (channel 'feedback') would reach no node; rewind to a "
                                           "later checkpoint to give it, or declare it in the graph's input schema"),
    ({"edits": {"n": 7}}, "channel 'n' would reach no node"),
    ({"feedback": "x", "edits": {"n": 7, "topic": "tides"}}, "channel 'n', the feedback (channel 'feedback') would "
                                                               "reach no node; rewind to a later checkpoint to give "
                                                               "them"),
])
def test_a_rewind_to_the_start_refuses_what_the_input_schema_drops(db_url: str, payload: dict, says: str) -> None:
    hz = make_hazel(db_url, workflow(input_schema_graph(), name="lg-input-schema"))
    run = hz.start(workflow="lg-input-schema", input={"topic": "t"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    before = (hz.get(run_id=run.id), hz.checkpoints(run_id=run.id))
    with pytest.raises(InvalidDecisionError) as refused:
        hz.decide(run_id=run.id, action="rewind", actor=person("ana"), payload={"to": 0, **payload})
    assert str(refused.value).startswith("at the run's start the graph of lg-input-schema v1 takes its input only "
                                         "(topic), and LangGraph drops any other channel of an input: ")
    assert says in str(refused.value)
    assert (hz.get(run_id=run.id), hz.checkpoints(run_id=run.id)) == before
    assert hz.decisions(run_id=run.id) == []


def test_a_rewind_to_the_start_with_an_input_edit_reaches_the_first_node(db_url: str) -> None:
    wf = workflow(input_schema_graph(), name="lg-input-schema")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-input-schema", input={"topic": "t"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="rewind", actor=person("ana"), payload={"to": 0, "edits": {"topic": "tides"}})
    hz.drive(run_id=run.id)
    shown = wf.state_view(hz.state_at(run_id=run.id).model_dump(), run_id=run.id)
    assert shown["draft"] == "draft of tides fb= n=None"


def test_a_rewind_to_the_start_adds_an_edit_of_a_reducer_channel_to_the_input(db_url: str) -> None:
    """s22 F4: at #0 an edit of ``log`` (``Annotated[list, operator.add]``) replaced the input's ``["seed"]``;
    at every other checkpoint it goes through the reducer (``update_state``), and so it does at the start."""
    from tests.langgraph.graphs import pair_graph

    wf = workflow(pair_graph(), name="lg-pair-seed")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-pair-seed", input={"topic": "t", "log": ["seed"]}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="rewind", actor=person("ana"), payload={"to": 0, "edits": {"log": ["added"]}})
    rewound = hz.checkpoints(run_id=run.id)[-1]
    assert wf.state_view(hz.state_at(run_id=run.id, seq=rewound.seq).model_dump(),
                         run_id=run.id)["log"] == ["seed", "added"]  # the rewind's checkpoint shows it so
    hz.drive(run_id=run.id)
    assert wf.state_view(hz.state_at(run_id=run.id).model_dump(), run_id=run.id)["log"] == ["seed", "added"]


def test_a_rewind_to_a_rewinds_own_checkpoint_starts_from_what_it_shows(db_url: str) -> None:
    """s22 F5: a rewind to a ``↩ rewind`` checkpoint forked from the graph checkpoint before that rewind: the
    edits (and feedback) the ``↩`` checkpoint shows were dropped. Native workflows give them again; so do graphs."""
    from tests.langgraph.graphs import review_graph

    wf = workflow(review_graph(), name="lg-review-again")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-review-again", input={"topic": "orig"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="rewind", actor=person("ana"),
              payload={"to": "review", "edits": {"draft": "MY DRAFT", "log": ["mine"]}})
    fork = hz.checkpoints(run_id=run.id)[-1].seq
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="approve", actor=person("ana"))
    hz.drive(run_id=run.id)

    def shown(seq: int | None = None) -> dict:
        return wf.state_view(hz.state_at(run_id=run.id, seq=seq).model_dump(), run_id=run.id)

    at_fork = shown(fork)
    assert at_fork["draft"] == "MY DRAFT" and at_fork["log"] == ["draft", "mine"]
    hz.decide(run_id=run.id, action="rewind", actor=person("ana"), payload={"to": fork})
    hz.drive(run_id=run.id)
    assert shown()["draft"] == "MY DRAFT" and shown()["log"] == ["draft", "mine"]  # review asks about it again
    hz.decide(run_id=run.id, action="rewind", actor=person("ana"),
              payload={"to": fork, "edits": {"log": ["again"]}})  # more on top: the reducer adds to what it shows
    assert shown(hz.checkpoints(run_id=run.id)[-1].seq)["log"] == ["draft", "mine", "again"]
    hz.drive(run_id=run.id)
    assert shown()["draft"] == "MY DRAFT" and shown()["log"] == ["draft", "mine", "again"]
