"""A worker that lost its lease in the middle of a LangGraph super-step (paused, then taken over) writes no graph
checkpoint or pending write when it wakes: the saver fences a Hazel run's writes by the step's lease token, so the
graph's newest checkpoint stays the one its successor wrote and Hazel points at."""

from __future__ import annotations

import threading

from hazel.langgraph import HazelSaver
from store import LeaseLostError
from store.models import LEASE_KEY, RunStatus
from tests.langgraph.graphs import review_graph, workflow
from tests.support.engine import make_hazel, person


def test_a_worker_that_lost_its_lease_mid_step_writes_nothing_to_the_graph(db_url: str) -> None:
    paused, wake = threading.Event(), threading.Event()
    calls: list[str] = []

    def on_node(name: str) -> None:
        calls.append(name)
        if calls.count("draft") == 1 and name == "draft":  # the first worker stops inside its first node
            paused.set()
            assert wake.wait(30)

    first = make_hazel(db_url, workflow(review_graph(on_node=on_node)))
    run = first.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    outcome: dict = {}
    stale = threading.Thread(target=lambda: outcome.setdefault("result", first.drive(run_id=run.id)))
    stale.start()
    assert paused.wait(30)

    with first.store.transaction() as tx:  # its lease runs out and recovery hands the run back
        assert tx.runs.release_to_ready(run.id, now=first.clock())
    second = make_hazel(db_url, workflow(review_graph(on_node=on_node)))
    assert second.drive(run_id=run.id).run.status is RunStatus.WAITING
    saver = HazelSaver(second.store)
    before = [c.config for c in saver.list({"configurable": {"thread_id": run.id}})]

    wake.set()
    stale.join(30)
    assert outcome["result"].lease_lost
    assert [c.config for c in saver.list({"configurable": {"thread_id": run.id}})] == before
    latest = saver.get_tuple({"configurable": {"thread_id": run.id}})  # what LangGraph's get_state reads
    assert latest is not None and latest.config == before[0]
    assert any(channel == "__interrupt__" for _, channel, _ in latest.pending_writes)
    assert calls == ["draft", "draft", "review"]
    second.decide(run_id=run.id, action="approve", actor=person("olga"), claim=True)
    assert second.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    assert calls == ["draft", "draft", "review", "review", "publish"]


def test_the_saver_refuses_a_step_s_writes_under_a_lease_the_run_no_longer_has(db_url: str) -> None:
    hazel = make_hazel(db_url, workflow(review_graph()))
    run = hazel.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hazel.drive(run_id=run.id)
    saver = HazelSaver(hazel.store)
    latest = saver.get_tuple({"configurable": {"thread_id": run.id}})
    assert latest is not None
    stale = {"configurable": {**latest.config["configurable"], LEASE_KEY: "a-token-no-one-holds"}}
    checkpoint = {**latest.checkpoint, "id": "1f0000000-stale"}
    for write in (lambda: saver.put(stale, checkpoint, {"source": "loop", "step": 9}, {}),
                  lambda: saver.put_writes(stale, [("draft", "stale text")], "task-stale")):
        try:
            write()
        except LeaseLostError as exc:
            assert run.id in str(exc)
        else:
            raise AssertionError("a write under a lost lease was accepted")
    after = saver.get_tuple({"configurable": {"thread_id": run.id}})
    assert after is not None and after.config == latest.config
    assert [w for w in after.pending_writes if w[0] == "task-stale"] == []


def test_a_copy_of_a_checkpoint_under_a_lease_the_run_no_longer_has_is_refused(db_url: str) -> None:
    """``update_state(..., as_node="__copy__")`` (a rewind's fork of a checkpoint several nodes wrote) writes its
    copy under the ``parent_config`` the saver read: the saver keeps the step's lease on it, so it is fenced too
    (it was written whatever the lease)."""
    wf = workflow(review_graph())
    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hazel.drive(run_id=run.id)
    saver = HazelSaver(hazel.store)
    before = [c.config for c in saver.list({"configurable": {"thread_id": run.id}})]
    stale = {"configurable": {**before[0]["configurable"], LEASE_KEY: "a-token-no-one-holds"}}
    try:
        wf.graph.update_state(stale, None, as_node="__copy__")
    except LeaseLostError as exc:
        assert run.id in str(exc)
    else:
        raise AssertionError("a copy under a lost lease was written")
    assert [c.config for c in saver.list({"configurable": {"thread_id": run.id}})] == before
