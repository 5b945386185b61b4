"""A LangGraph run's rewind with edits needs what an edit needs, as a native run's does
(``bot.engine.steering.rewind_edits``): at the point that asks next (a node that interrupted at the target, or
that runs next and asked before), and past the nearest approval. A LangGraph point shows a value the graph
computes from its state, so any edited channel counts as shown; its edit settles whatever its quorum. On SQLite
and PostgreSQL."""

from __future__ import annotations

import pytest

from bot.engine.errors import NotAllowedError
from hazel import Approvers
from store.models import RunStatus
from tests.langgraph.graphs import review_graph, workflow
from tests.support.engine import make_hazel, person


def _values(wf, run_id):  # noqa: ANN001, ANN202
    return wf.graph.get_state({"configurable": {"thread_id": run_id}}).values


def test_a_graph_rewinds_edits_need_the_edit_permission(db_url: str) -> None:
    wf = workflow(review_graph(approvers=Approvers(users=["priya"])))
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("dan"))
    hz.drive(run_id=run.id)
    asked = hz.pending_request(run_id=run.id).checkpoint_seq  # review interrupted there
    for to in (asked, "review"):  # the checkpoint that asks, and the one before review ran (it asked before)
        with pytest.raises(NotAllowedError, match=r"'Approve the draft' asks about them next, .*: dan may not "
                                                  r"edit at 'Approve the draft': only priya may$"):
            hz.rewind(run_id=run.id, actor=person("dan"), to=to, edits={"draft": "dan's draft"})
    assert hz.get(run_id=run.id).status is RunStatus.WAITING and _values(wf, run.id)["draft"] == "Draft about tides"
    hz.rewind(run_id=run.id, actor=person("dan"), to=0, edits={"topic": "crabs"})  # the input: no one asked yet
    hz.drive(run_id=run.id)
    assert hz.shown(request_id=hz.pending_request(run_id=run.id).id).value == "Draft about crabs"

    hz.decide(run_id=run.id, action="approve", actor=person("priya"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    # the decision's own checkpoint resumes review, which a rewind there asks again (the point ahead); the one
    # after it (review returned: publish next) is past the approval
    history = hz.checkpoints(run_id=run.id)
    decided = next(c.seq for c in reversed(history) if c.decision_id is not None)
    past = next(c.seq for c in history if c.parent_seq == decided)
    assert next(c for c in history if c.seq == past).next_step == "publish"
    with pytest.raises(NotAllowedError, match=r"'Approve the draft' asks about them next"):
        hz.rewind(run_id=run.id, actor=person("dan"), to=decided, edits={"draft": "unseen"})
    with pytest.raises(NotAllowedError, match=rf"#{past} comes after the approval at 'Approve the draft' "
                                              r"\(approved by priya at .*: the run would go on with them from "
                                              r"publish with nobody approving them, .*: dan may not edit at "
                                              r"'Approve the draft': only priya may"):
        hz.rewind(run_id=run.id, actor=person("dan"), to=past, edits={"draft": "unseen"})
    assert [e.actor_id for e in hz.audit(run_id=run.id) if e.action == "decision.refused"] == ["dan"] * 4
    assert _values(wf, run.id)["draft"] == "Draft about crabs"
    hz.rewind(run_id=run.id, actor=person("priya"), to=past, edits={"draft": "priya's final"})
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert _values(wf, run.id)["draft"] == "priya's final" and _values(wf, run.id)["published"] is True
