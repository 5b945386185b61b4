"""A rewind of a LangGraph run keeps what it changes: to the graph's final checkpoint, its edits and feedback
are written on the fork (``update_state``: a graph checkpoint after it) and the run completes with them; at a
mid-run fork, the fork checkpoint's own state view shows them (README: LangGraph > Rewind, ``--set`` forks the
graph there with the field changed). From the CLI (``examples.langgraph_review``) and the engine; SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated, Any, Callable, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from hazel.langgraph import HazelSaver, steer
from store.models import RunStatus
from tests.langgraph.graphs import workflow
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Any]:
    return in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows="examples.langgraph_review")


def _saved(db_url: str, run_id: str) -> Any:
    """The thread's newest graph checkpoint, as the example graph's HazelSaver reads it."""
    with HazelSaver.from_conn_string(db_url) as saver:
        return saver.get_tuple({"configurable": {"thread_id": run_id, "checkpoint_ns": ""}})


def _completed(cli: Callable[..., Any], topic: str) -> tuple[str, int]:
    started = json.loads(cli("run", "langgraph-review", "--input", json.dumps({"topic": topic}), "--json").stdout)
    run_id = started["run"]["id"] if "run" in started else started["id"]
    cli("approve", run_id)
    shown = json.loads(cli("show", run_id, "--json").stdout)
    assert shown["run"]["status"] == "completed"
    return run_id, shown["run"]["head_seq"]


@pytest.mark.parametrize("how", ["set", "feedback"])
def test_a_rewind_to_the_final_checkpoint_writes_its_edits_and_feedback(cli: Callable[..., Any], db_url: str,
                                                                        how: str) -> None:
    run_id, final = _completed(cli, "fb lost")
    before = json.loads(cli("show", run_id, "--json").stdout)["state"]
    graph_seq = _saved(db_url, run_id).metadata["hazel_seq"]
    args = ["--set", "draft=REPLACED"] if how == "set" else ["--feedback", "kept this time"]
    cli("rewind", run_id, "--to", str(final), *args)
    shown = json.loads(cli("show", run_id, "--json").stdout)
    assert shown["run"]["status"] == "completed"
    changed = {"draft": "REPLACED"} if how == "set" else {"feedback": "kept this time"}
    assert shown["state"] == {**before, **changed}  # the graph's values at the head: the rewind's written
    saved = _saved(db_url, run_id)  # a graph checkpoint on the fork, after the final one
    assert saved.metadata["hazel_seq"] > graph_seq and saved.metadata["source"] == "update"
    assert {k: saved.checkpoint["channel_values"][k] for k in changed} == changed
    fork = json.loads(cli("show", run_id, "--seq", str(final + 1), "--json").stdout)
    assert fork["state"] == {**before, **changed}  # the fork checkpoint's own view shows it too
    history = cli("history", run_id).stdout
    assert f"rewind to #{final}" in history
    assert "✎ update" in history and "__update__" not in history  # Hazel's own step, named for people
    own = cli("rewind", run_id, "--to", "__update__", code=1)  # Hazel's own step is no node to rewind to
    assert "'__update__' is a step of Hazel's own" in own.stderr, own.stderr
    unknown = cli("rewind", run_id, "--to", "nonode", code=1)
    assert "never reached 'nonode'" in unknown.stderr and "__update__" not in unknown.stderr, unknown.stderr


class Par(TypedDict, total=False):
    topic: str
    draft: str
    feedback: str
    log: Annotated[list[str], operator.add]


def par_graph() -> Any:
    """draft -> legal + security (each ``steer()``) -> publish: lgwf.py's ``lg-par``, without the sleeps."""

    def draft(s: Par) -> dict:
        return {"draft": f"draft of {s['topic']} fb={s.get('feedback', '')}", "log": ["draft"]}

    def legal(s: Par) -> dict:
        return {"log": [f"legal:{steer(title='Legal', show=s['draft'])['action']}"]}

    def security(s: Par) -> dict:
        return {"log": [f"security:{steer(title='Security', show=s['draft'])['action']}"]}

    def publish(s: Par) -> dict:
        return {"log": ["publish"]}

    g = StateGraph(Par)
    for fn in (draft, legal, security, publish):
        g.add_node(fn.__name__, fn)
    g.add_edge(START, "draft")
    g.add_edge("draft", "legal")
    g.add_edge("draft", "security")
    g.add_edge(["legal", "security"], "publish")
    g.add_edge("publish", END)
    return g.compile()


def test_a_mid_run_fork_shows_the_rewinds_values_at_its_own_checkpoint(db_url: str) -> None:
    hz = make_hazel(db_url, workflow(par_graph(), name="lg-par"))
    run = hz.start(workflow="lg-par", input={"topic": "t"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    assert [c.step for c in hz.checkpoints(run_id=run.id)] == ["__start__", "draft", "legal + security"]
    shown_at_1 = hz.state_tree_at(run_id=run.id, seq=1)
    outcome = hz.rewind(run_id=run.id, to=1, feedback="x", edits={"log": ["edited"]}, actor=person("olga"))
    fork = hz.checkpoints(run_id=run.id)[-1]
    assert fork.step == "__rewind__" and outcome.next_node == "legal + security"
    # the fork's view: the values at #1 with the feedback, a reducer channel combined as update_state does
    assert hz.state_tree_at(run_id=run.id, seq=fork.seq) == {**shown_at_1, "feedback": "x",
                                                              "log": ["draft", "edited"]}
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.WAITING
    head = hz.state_tree_at(run_id=run.id)
    assert head["feedback"] == "x" and head["log"] == ["draft", "edited"]  # what the graph then holds


def test_a_rewind_to_the_final_checkpoint_without_values_completes_again_as_before(db_url: str) -> None:
    hz = make_hazel(db_url, workflow(par_graph(), name="lg-par"))
    run = hz.start(workflow="lg-par", input={"topic": "t"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    for request in hz.requests(run_id=run.id):
        hz.decide(run_id=run.id, action="approve", actor=person("olga"), request_id=request.id)
    hz.drive(run_id=run.id)
    final = hz.get(run_id=run.id)
    assert final.status is RunStatus.COMPLETED
    outcome = hz.rewind(run_id=run.id, to=final.head_seq, actor=person("olga"))
    assert outcome.next_node is None
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    assert [c.step for c in hz.checkpoints(run_id=run.id)][-1] == "__rewind__"
