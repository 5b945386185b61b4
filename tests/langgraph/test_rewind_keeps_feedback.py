"""What a LangGraph run's rewind after a feedback gives the graph (the native counterpart, where the feedback
step gets ``ctx.feedback`` again, is ``tests/bot/test_rewind_keeps_feedback``): the SME's words reach a graph
through its node's ``interrupt()``/``steer()``, which returns them, and the node writes them into the state.
A rewind to the checkpoint after that node ran (``review → revise``) forks with them in the state, so
``revise`` redrafts with them again; a rewind to the checkpoint the decision itself wrote (``review → review``)
resumes nothing: ``review`` asks again, so no node runs without the words. On SQLite and PostgreSQL."""

from __future__ import annotations

from store.models import RunStatus
from tests.langgraph.graphs import review_graph, revised_once, workflow
from tests.support.engine import make_hazel, person


def test_a_rewind_after_a_graphs_feedback_keeps_it_or_asks_again(db_url: str) -> None:
    hz = make_hazel(db_url, workflow(review_graph()))
    run = hz.get(run_id=revised_once(hz))
    revised = "Draft about tides [revised: shorter]"
    assert hz.shown(request_id=hz.pending_request(run_id=run.id).id).value == revised
    history = hz.checkpoints(run_id=run.id)
    decided = next(c for c in history if c.decision_id is not None)
    assert (decided.step, decided.next_step) == ("review", "review")
    after = next(c for c in history if c.parent_seq == decided.seq)
    assert after.next_step == "revise"

    hz.rewind(run_id=run.id, actor=person("olga"), to=after.seq)  # `--to revise` picks the same one
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.WAITING
    assert hz.shown(request_id=hz.pending_request(run_id=run.id).id).value == revised  # revise had the words

    hz.rewind(run_id=run.id, actor=person("olga"), to=decided.seq)
    hz.drive(run_id=run.id)
    request = hz.pending_request(run_id=run.id)  # review asks again about the first draft, nothing revised
    assert request.point == "review" and hz.shown(request_id=request.id).value == "Draft about tides"
