"""A worker SIGKILLed in the middle of a super-step of two parallel nodes (``fast`` finished, its writes stored;
``slow`` still running), then another process (the test's) recovering the run, on SQLite and PostgreSQL: the retried
super-step yields exactly the checkpoints (Hazel's and the graph's) a crash-free run yields, ``fast`` does not
run again (LangGraph hands its stored writes back), and a rewind to each checkpoint runs what it runs on the
crash-free run, so no checkpoint re-runs a node that had completed in its super-step.

The super-step is the graph's first one, a later one, or the one after a rewind: to the run's start (the input
again), with values to a checkpoint one node wrote (``update_state``), or without values to a checkpoint two
nodes wrote (LangGraph's copy of it). The graphs: ``tests/langgraph/workflows/crash_parallel.py``. A node that
raises in the super-step after a rewind is the same case without a crash: the node beside it keeps its writes."""

from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from hazel.langgraph import HazelSaver
from store.models import RunStatus
from tests.langgraph.graphs import workflow
from tests.langgraph.workflows import crash_parallel
from tests.support.engine import make_hazel, person

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.langgraph.workflows.crash_parallel"

SCENARIOS = {  # name: (workflow, the rewind the crashed super-step follows: (to, edits), or None)
    "first-super-step": ("crash-first", None),
    "later-super-step": ("crash-one", None),
    "after-rewind-to-start": ("crash-first", (0, {"total": 5})),
    "after-rewind-with-values": ("crash-one", (1, {"total": 5})),
    "after-rewind-copying-two-writers": ("crash-two", (1, None)),
}


def _effects(directory: Path) -> list[str]:
    log = directory / "effects.log"
    return log.read_text().split() if log.exists() else []


def _history(hz: Any, run_id: str) -> list[tuple[int, str, str | None]]:
    return [(c.seq, c.step, c.next_step) for c in hz.checkpoints(run_id=run_id)]


def _graph_history(saver: HazelSaver, run_id: str) -> list[tuple[str, int, int]]:
    """The thread's graph checkpoints, oldest first: (source, step, how many pending writes)."""
    tuples = saver.list({"configurable": {"thread_id": run_id}})
    return [(t.metadata["source"], t.metadata["step"], len(t.pending_writes)) for t in tuples][::-1]


def _assert_same_graph_history(crashed: list[tuple[str, int, int]], clean: list[tuple[str, int, int]]) -> None:
    """The graph checkpoints of the crashed run are the clean run's, and so are their pending writes, but for a
    checkpoint older than the killed super-step's, whose writes may be missing whole: LangGraph saves a task's
    writes in the background (``pregel/_loop.py``: ``put_writes`` is ``submit``-ted) and does not wait for them
    before it runs the next super-step, so a process killed there may have stored a finished super-step's
    checkpoint after it (and the killed one's) but not its tasks' writes: with any checkpointer. Nothing reads
    them: the checkpoint after it holds what they wrote, and a rewind forks after the checkpoint (its old writes
    stay on the old branch)."""
    assert [(source, step) for source, step, _ in crashed] == [(source, step) for source, step, _ in clean]
    killed = len(clean) - 2  # the killed super-step's checkpoint (fast + slow), then review's that waits
    for i, (mine, theirs) in enumerate(zip(crashed, clean)):
        assert mine[2] == theirs[2] or (i < killed and mine[2] == 0), f"graph checkpoint {i}: {mine} != {theirs}"


def _fast_stored(saver: HazelSaver, run_id: str) -> bool:
    newest = saver.get_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}})
    return newest is not None and any(w[1] == "trail" and w[2] == ["fast"] for w in newest.pending_writes)


def _worker(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bot.cli", "worker", "--until-idle", "--json"], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _to_the_super_step(hz: Any, workflow: str, rewind: tuple[int, dict | None] | None) -> str:
    """A run of ``workflow`` left ready to execute the super-step ``fast + slow`` (from its start, or after it
    completed once, the rewind ``rewind``); returns its id."""
    run = hz.start(workflow=workflow, input={"total": 1}, actor=person("tester"))
    if rewind is not None:
        hz.drive(run_id=run.id)
        hz.decide(run_id=run.id, action="approve", actor=person("tester"))
        hz.drive(run_id=run.id)
        assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
        to, edits = rewind
        hz.rewind(run_id=run.id, actor=person("tester"), to=to, edits=edits)
    return run.id


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_super_step_killed_after_fast_finished_yields_the_checkpoints_of_a_crash_free_run(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str) -> None:
    workflow, rewind = SCENARIOS[scenario]
    hz = make_hazel(db_url, crash_parallel.FIRST, crash_parallel.ONE, crash_parallel.TWO)
    saver = HazelSaver(hz.store)
    clean, crashed = tmp_path / "clean", tmp_path / "crashed"
    clean.mkdir()
    crashed.mkdir()

    monkeypatch.setenv("CRASHY_DIR", str(clean))  # the crash-free run, in this process
    reference = _to_the_super_step(hz, workflow, rewind)
    hz.drive(run_id=reference)
    assert hz.get(run_id=reference).status is RunStatus.WAITING

    monkeypatch.setenv("CRASHY_DIR", str(crashed))
    run_id = _to_the_super_step(hz, workflow, rewind)
    (crashed / "slow.started").unlink(missing_ok=True)  # (slow ran in the completed run before the rewind)
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": MODULE, "CRASHY_DIR": str(crashed),
           "HAZEL_OPERATOR": "tester"}
    (crashed / "block").touch()
    first = _worker(env)  # executes the run's steps up to fast + slow, where slow blocks
    deadline = time.monotonic() + 60
    while not ((crashed / "slow.started").exists() and _fast_stored(saver, run_id)):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "slow never started beside a finished fast"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    (crashed / "block").unlink()
    assert hz.recover() == [run_id]  # this process takes the dead worker's run over, as any worker's start does
    hz.drive(run_id=run_id)
    assert hz.get(run_id=run_id).status is RunStatus.WAITING

    assert _history(hz, run_id) == _history(hz, reference)
    _assert_same_graph_history(_graph_history(saver, run_id), _graph_history(saver, reference))
    ran = Counter(_effects(crashed))
    assert ran == Counter(_effects(clean)) + Counter({"slow-start": 1})  # only the killed node again
    assert ran["fast"] == (1 if rewind is None else 2)  # once in the killed super-step (and once before)

    for seq, _, _ in _history(hz, reference):  # a rewind to each checkpoint runs the same nodes on both
        runs = {}
        for directory, rid in ((clean, reference), (crashed, run_id)):
            monkeypatch.setenv("CRASHY_DIR", str(directory))
            done = len(_effects(directory))
            hz.rewind(run_id=rid, actor=person("tester"), to=seq)
            hz.drive(run_id=rid)
            runs[rid] = (sorted(_effects(directory)[done:]), hz.get(run_id=rid).status)
        assert runs[run_id] == runs[reference], f"rewind to #{seq}"


class _Log(TypedDict, total=False):
    total: int
    log: Annotated[list[str], operator.add]


def _raising_graph(calls: list[str], fails: dict[str, int]):  # noqa: ANN202
    """``first -> boom + side -> after``: ``boom`` raises while ``fails["boom"]`` is above 0, once ``side``
    (beside it) has finished, so that LangGraph does not cancel ``side``."""
    side_done = threading.Event()

    def node(name: str):  # noqa: ANN202
        def run(state: _Log) -> dict:
            calls.append(name)
            if name == "side":
                side_done.set()
            if name == "boom" and fails["boom"] > 0:
                side_done.wait(10)
                fails["boom"] -= 1
                raise RuntimeError("boom failed")
            return {"log": [name]}
        return run

    g = StateGraph(_Log)
    for name in ("first", "boom", "side", "after"):
        g.add_node(name, node(name))
    g.add_edge(START, "first")
    g.add_edge("first", "boom")
    g.add_edge("first", "side")
    g.add_edge(["boom", "side"], "after")
    g.add_edge("after", END)
    return g.compile()


@pytest.mark.parametrize("edits", [None, {"total": 5}], ids=["plain", "with-values"])
def test_a_node_that_raises_after_a_rewind_leaves_the_node_beside_it_its_writes(db_url: str,
                                                                              edits: dict | None) -> None:
    """The step that runs again continues from the rewind's fork its first attempt made, as LangGraph resumes a
    thread: ``side`` is not run again (a config naming the fork replayed it, running ``side`` twice)."""
    calls: list[str] = []
    fails = {"boom": 0}
    wf = workflow(_raising_graph(calls, fails), name="lg-raise-beside", max_attempts=2, backoff_sec=0.01)
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-raise-beside", input={"total": 1}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED

    fails["boom"] = 1
    calls.clear()
    hz.rewind(run_id=run.id, actor=person("olga"), to=1, edits=edits)
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert sorted(calls) == ["after", "boom", "boom", "side"]
    branch = [(c.step, c.next_step) for c in hz.checkpoints(run_id=run.id) if c.seq > 4]  # after the fork (#4)
    assert branch == [("boom + side", "after"), ("after", None)]
