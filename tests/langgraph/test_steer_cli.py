"""The LangGraph example answered from the CLI exactly as the native demo is: each command that starts or
answers the run its own process (the real ``hazel`` script), nothing waiting in between; the reads between them
(``show``, ``history``) in this process through Typer's runner; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

from hazel.langgraph import HazelSaver
from tests.support.cli import in_process_cli

ROOT = Path(__file__).resolve().parents[2]
HAZEL = str(Path(sys.executable).with_name("hazel"))


def _hazel(env: dict[str, str], *args: str, code: int = 0) -> str:
    done = subprocess.run([HAZEL, *args], env=env, capture_output=True, text=True, timeout=120, cwd=env["CWD"])
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done.stdout


def _reader(env: dict[str, str], monkeypatch) -> Callable[..., str]:  # noqa: ANN001
    """``hazel ARGS`` in this process (Typer's runner) with the settings of ``env``: for the read-only commands."""
    invoke = in_process_cli(monkeypatch, Path(env["CWD"]), db_url=env["HAZEL_DATABASE_URL"],
                            workflows=env["HAZEL_WORKFLOWS"], operator=env["HAZEL_OPERATOR"])
    return lambda *args: invoke(*args).stdout


def _env(db_url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAZEL_")}
    env.update(HAZEL_DATABASE_URL=db_url, HAZEL_WORKFLOWS="examples.langgraph_review", HAZEL_OPERATOR="olga",
               PYTHONPATH=str(ROOT), CWD=str(tmp_path), COLUMNS="200")
    return env


def _graph_values(db_url: str, run_id: str) -> dict:
    from examples.langgraph_review import build

    with HazelSaver.from_conn_string(db_url) as saver:
        return build().compile(checkpointer=saver).get_state({"configurable": {"thread_id": run_id}}).values


def test_run_feedback_approve_rewind_from_the_cli(db_url, tmp_path, monkeypatch):
    env = _env(db_url, tmp_path)
    read = _reader(env, monkeypatch)
    started = json.loads(_hazel(env, "run", "langgraph-review", "--input", '{"topic": "tide pools"}', "--json"))
    run_id = started["run"]["id"] if "run" in started else started["id"]
    shown = read("show", run_id, "--raw")
    assert "Tide pools in three points" in shown and "offline drafter" in shown
    out = _hazel(env, "feedback", run_id, "--at", "review", "more about crabs")
    assert "ran review, revise, review; now waiting" in " ".join(out.split())
    assert "addressed the reviewer's feedback: more about crabs" in read("show", run_id, "--raw")
    assert "now completed" in _hazel(env, "approve", run_id)
    values = _graph_values(db_url, run_id)
    assert values["published"] is True
    assert values["history"] == ["draft", "feedback from olga", "revise", "approved by olga", "publish"]

    # Rewind to the first draft with feedback: the graph forks there, the feedback written to its state.
    _hazel(env, "rewind", run_id, "--to", "draft", "--feedback", "about starfish")
    assert "feedback: about starfish" in read("show", run_id, "--raw")
    _hazel(env, "approve", run_id)
    values = _graph_values(db_url, run_id)
    assert values["history"] == ["draft", "approved by olga", "publish"]  # the new branch's own history
    history = json.loads(read("history", run_id, "--json"))
    branches = {c["branch"] for c in history["checkpoints"]}
    assert branches == {0, 1}
    assert [c["step"] for c in history["checkpoints"] if c["branch"] == 1][:2] == ["__rewind__", "draft"]


def test_hazel_workflows_names_a_graph_s_state_schema_and_does_not_chain_its_nodes(db_url, tmp_path,  # noqa: ANN001
                                                                                  monkeypatch) -> None:
    env = _env(db_url, tmp_path)
    read = _reader(env, monkeypatch)
    printed = read("workflows")
    [line] = [line for line in printed.splitlines() if line.startswith("langgraph-review ")]
    assert "(LangGraph graph over ReviewState)" in line and "GraphRunState" not in line, line
    assert "→" not in line and ", " in line, line  # a graph's nodes, not a chain
    listed = json.loads(read("workflows", "--json"))
    [graph] = [w for w in listed if w["name"] == "langgraph-review"]
    assert graph["state"] == "LangGraph graph over ReviewState" and graph["linear"] is False
