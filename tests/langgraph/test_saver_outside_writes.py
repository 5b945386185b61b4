"""A ``HazelSaver`` used outside a Hazel step (a script's own graph on Hazel's database, no step's lease in its
config) writes nothing into the graph thread of a Hazel run: LangGraph replays the pending writes stored against
the checkpoint a run waits at when the run resumes (a fresh-user finding: a script's ``Command(resume=...)``
stored mallory's rejection there, ``hazel approve`` then recorded olga's approval, and the graph took mallory's
and published nothing). Refused with ``RunStateError`` naming the run, nothing written, as ``copy_thread`` into
a run's thread is; an ended run's thread too (it can be rewound or retried, from what is written there). A
thread that is no Hazel run is written as before. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langgraph.types import Command
from sqlalchemy import select

from bot.engine.errors import RunStateError
from hazel.langgraph import AsyncHazelSaver, HazelSaver
from store import Store
from store.models import RunStatus
from store.schema import lg_checkpoints, lg_writes
from tests.langgraph.graphs import review_graph, workflow
from tests.support.engine import make_hazel, person

ROOT = Path(__file__).resolve().parents[2]
HAZEL = str(Path(sys.executable).with_name("hazel"))


def _thread_rows(store: Store, thread: str) -> tuple[list, list]:
    """Every stored column of the thread's graph checkpoints and pending writes (what a refused write must leave
    as it was)."""
    with store.read() as tx:
        cps = [tuple(r) for r in tx.conn.execute(select(lg_checkpoints).where(lg_checkpoints.c.thread_id == thread)
                                                 .order_by(lg_checkpoints.c.checkpoint_id))]
        ws = [tuple(r) for r in tx.conn.execute(select(lg_writes).where(lg_writes.c.thread_id == thread)
                                                .order_by(lg_writes.c.checkpoint_id, lg_writes.c.task_id,
                                                          lg_writes.c.idx))]
    return cps, ws


def _hazel(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([HAZEL, *args], env=env, capture_output=True, text=True, timeout=120, cwd=env["CWD"])
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_a_resume_sent_through_the_graph_to_a_waiting_run_is_refused_and_hazel_approve_publishes(
        db_url, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The finding, as reported: the example run waits at its review; a script resumes the run's thread with
    its own graph and ``HazelSaver.from_conn_string()``. Refused, nothing written; ``hazel approve`` then
    publishes with olga's approval."""
    from examples.langgraph_review import build

    workflows = "examples.migration_plan,examples.langgraph_review"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAZEL_")}
    env.update(HAZEL_DATABASE_URL=db_url, HAZEL_WORKFLOWS=workflows, HAZEL_OPERATOR="olga",
               PYTHONPATH=str(ROOT), CWD=str(tmp_path), COLUMNS="200")
    started = json.loads(_hazel(env, "run", "langgraph-review", "--input", '{"topic": "tide pools"}', "--json"))
    run_id = started["run"]["id"] if "run" in started else started["id"]
    store = Store(db_url)
    try:
        before = _thread_rows(store, run_id)
        assert before[0] and any(w[5] == "__interrupt__" for w in before[1])  # (channel) it waits at review

        monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
        monkeypatch.setenv("HAZEL_WORKFLOWS", workflows)
        with HazelSaver.from_conn_string() as saver:
            g = build().compile(checkpointer=saver)
            with pytest.raises(RunStateError) as refused:
                g.invoke(Command(resume={"action": "reject", "reason": "no", "by": "mallory"}),
                         {"configurable": {"thread_id": run_id}})
        said = str(refused.value)
        assert f"Hazel run {run_id}" in said and "waiting" in said and "'review'" in said
        assert f"hazel approve {run_id}" in said
        assert _thread_rows(store, run_id) == before

        assert "now completed" in " ".join(_hazel(env, "approve", run_id, "--at", "review").split())
        with HazelSaver.from_conn_string(db_url) as saver:
            values = build().compile(checkpointer=saver).get_state({"configurable": {"thread_id": run_id}}).values
        assert values["published"] is True
        assert values["history"] == ["draft", "approved by olga", "publish"]
    finally:
        store.dispose()


def test_update_state_and_raw_writes_on_a_waiting_run_s_thread_are_refused(db_url) -> None:  # noqa: ANN001
    hz = make_hazel(db_url, workflow(review_graph()))
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    assert hz.drive(run_id=run.id).run.status is RunStatus.WAITING
    before = _thread_rows(hz.store, run.id)
    saver = HazelSaver(hz.store)
    outside = review_graph(checkpointer=saver)
    thread = {"configurable": {"thread_id": run.id}}
    latest = saver.get_tuple(thread)
    assert latest is not None
    for write in (lambda: outside.update_state(thread, {"draft": "mallory's draft"}),
                  lambda: outside.update_state(thread, {"log": ["approved by mallory"]}, as_node="review"),
                  lambda: saver.put_writes(latest.config, [("draft", "mallory's draft")], "task-m"),
                  # the same writes again (a write already stored is kept: the row count says 0), and the
                  # checkpoint itself again (a re-put replaces it), both through the saver's slower path
                  lambda: saver.put_writes(latest.config, [(c, v) for t, c, v in latest.pending_writes],
                                           latest.pending_writes[0][0]),
                  lambda: saver.put({"configurable": {"thread_id": run.id, "checkpoint_ns": "",
                                                      "checkpoint_id": latest.parent_config["configurable"][
                                                          "checkpoint_id"]}},
                                    latest.checkpoint, latest.metadata, {}),
                  lambda: run_async(_async_resume(hz.store, run.id))):
        with pytest.raises(RunStateError, match=f"^thread {run.id} is the graph thread of Hazel run {run.id}, "
                                                r"which is waiting .*at 'review'.*hazel approve"):
            write()
    assert _thread_rows(hz.store, run.id) == before

    hz.decide(run_id=run.id, action="approve", actor=person("olga"))
    assert hz.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    assert outside.get_state(thread).values["log"] == ["draft", "approved by olga", "publish"]


async def _async_resume(store: Store, run_id: str) -> None:
    """The finding's script, async: ``ainvoke`` through ``AsyncHazelSaver`` (``aput_writes``, ``aput``)."""
    graph = review_graph(checkpointer=AsyncHazelSaver(store))
    await graph.ainvoke(Command(resume={"action": "approve", "by": "mallory"}), {"configurable": {"thread_id": run_id}})


def run_async(coro):  # noqa: ANN001, ANN201
    with ThreadPoolExecutor(1) as pool:  # (a loop of its own: another test may have left one running here)
        return pool.submit(asyncio.run, coro).result()


def test_writes_into_an_ended_run_s_thread_are_refused_and_a_copy_takes_them(db_url) -> None:  # noqa: ANN001
    """As ``copy_thread`` into it: an ended run can be rewound (and a failed one retried) from its graph
    thread, and LangGraph would take what was written there. Its thread copied into a new id goes on there."""
    hz = make_hazel(db_url, workflow(review_graph()))
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="reject", actor=person("olga"), payload={"reason": "off topic"})
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED  # (the graph ends on a rejection)
    before = _thread_rows(hz.store, run.id)
    saver = HazelSaver(hz.store)
    outside = review_graph(checkpointer=saver)
    thread = {"configurable": {"thread_id": run.id}}
    latest = saver.get_tuple(thread)
    assert latest is not None
    for write in (lambda: outside.update_state(thread, {"draft": "later"}),
                  lambda: outside.invoke({"topic": "again"}, thread),
                  lambda: saver.put_writes(latest.config, [("draft", "later")], "task-later")):
        with pytest.raises(RunStateError, match=f"^thread {run.id} is the graph thread of Hazel run {run.id}, "
                                                r"which has ended \(completed\).*copy_thread"):
            write()
    assert _thread_rows(hz.store, run.id) == before

    saver.copy_thread(run.id, "after-the-run")
    outside.update_state({"configurable": {"thread_id": "after-the-run"}}, {"draft": "later"})
    assert outside.get_state({"configurable": {"thread_id": "after-the-run"}}).values["draft"] == "later"
    assert _thread_rows(hz.store, run.id) == before


def test_a_thread_that_is_no_hazel_run_is_written_as_before(db_url) -> None:  # noqa: ANN001
    """The saver on its own: a graph run, resumed, updated; a checkpoint and writes put again (the slower
    paths: nothing inserted, then what was there kept or replaced)."""
    hz = make_hazel(db_url, workflow(review_graph()))
    waiting = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=waiting.id)  # (a run beside it, waiting: its thread is not these)
    saver = HazelSaver(hz.store)
    graph = review_graph(checkpointer=saver)
    for thread_id in ("standalone", "0123456789ab"):  # (the second shaped as a run id)
        thread = {"configurable": {"thread_id": thread_id}}
        graph.invoke({"topic": "kelp"}, thread)
        assert [i.value for t in graph.get_state(thread).tasks for i in t.interrupts]
        graph.invoke(Command(resume={"action": "approve", "by": "mallory"}), thread)
        graph.update_state(thread, {"draft": "edited after"})
        values = graph.get_state(thread).values
        assert values["log"] == ["draft", "approved by mallory", "publish"] and values["draft"] == "edited after"

        latest = saver.get_tuple(thread)
        saver.put_writes(latest.config, [("draft", "pending")], "task-1")
        saver.put_writes(latest.config, [("draft", "pending")], "task-1")  # kept as it was (0 rows)
        again = saver.put(latest.parent_config, latest.checkpoint, latest.metadata, {})  # re-put: replaced
        assert again["configurable"]["checkpoint_id"] == latest.config["configurable"]["checkpoint_id"]
        assert saver.get_tuple(thread).pending_writes == [("task-1", "draft", "pending")]
        saver.delete_thread(thread_id)
    assert hz.get(run_id=waiting.id).status is RunStatus.WAITING
