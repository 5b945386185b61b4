"""Crash safety of a LangGraph run: SIGKILL in the middle of a node, then another worker process continues it;
the nodes that had finished do not run again (those of earlier super-steps, and ``fast``, which finished in the
killed super-step); a step that runs again after its super-step finished records it without running it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.engine.lgraph_run import superstep
from bot.engine.workflow import StepContext
from hazel.langgraph import HazelSaver
from store.models import RunStatus
from tests.langgraph.graphs import review_graph, workflow
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "tests" / "langgraph" / "workflows" / "crashy_graph.py"


def _fast_stored(saver: HazelSaver) -> bool:
    """Whether the newest graph checkpoint of the database's one run holds ``fast``'s write."""
    with saver.store.read() as tx:
        runs = tx.runs.list(limit=1)
    if not runs:
        return False
    newest = saver.get_tuple({"configurable": {"thread_id": runs[0].id, "checkpoint_ns": ""}})
    return newest is not None and any(w[1] == "trail" and w[2] == ["fast"] for w in newest.pending_writes)


def _cli(args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:  # noqa: ANN003
    return subprocess.Popen([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.slow
def test_sigkill_mid_node_then_another_worker_continues(db_url: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(WORKFLOW),
           "CRASHY_DIR": str(tmp_path), "HAZEL_OPERATOR": "tester"}
    # the reads (runs, show) in this process, as a command started here (its start recovers dead owners' runs);
    # the run, the worker and the approve that execute nodes are processes of their own
    monkeypatch.setenv("CRASHY_DIR", str(tmp_path))
    cli = in_process_cli(monkeypatch, ROOT, db_url=db_url, workflows=str(WORKFLOW), operator="tester")

    def _json(args: list[str], env: dict[str, str]):  # noqa: ANN202
        return json.loads(cli(*args, "--json").stdout)

    (tmp_path / "block").touch()
    proc = _cli(["run", "crashy-graph", "--input", '{"total": 1}'], env)
    deadline = time.monotonic() + 60
    saver = HazelSaver(make_hazel(db_url).store)
    while not ((tmp_path / "slow.started").exists() and _fast_stored(saver)):  # fast, beside it, has finished
        assert proc.poll() is None, proc.communicate()  # and its writes are saved
        assert time.monotonic() < deadline, "the slow node never started beside a finished fast"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    (tmp_path / "block").unlink()

    [run] = _json(["runs"], env)
    assert run["status"] == RunStatus.READY.value  # recovered: the dead process's lease handed back
    worker = _cli(["worker", "--until-idle", "--json"], env)
    _, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err
    assert _json(["show", run["id"]], env)["run"]["status"] == "waiting"
    approve = subprocess.run([sys.executable, "-m", "bot.cli", "approve", run["id"]], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert approve.returncode == 0, approve.stderr
    assert _json(["show", run["id"]], env)["run"]["status"] == "completed"

    effects = (tmp_path / "effects.log").read_text().split()
    assert effects.count("first") == 1 and effects.count("fast") == 1 and effects.count("last") == 1
    assert effects.count("slow-start") == 2 and effects.count("slow-end") == 1  # only the killed node again
    assert effects.count("review") == 2  # asked, then run again on resume (LangGraph's interrupt semantics)


def test_a_step_run_again_after_its_super_step_finished_runs_no_node(db_url: str) -> None:
    calls: list[str] = []
    wf = workflow(review_graph(on_node=calls.append))
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
    claim = hz.runner.claim(run.id)  # (the saver writes a run's thread only under its step's lease)
    assert claim is not None
    state = wf.codec.validate({"topic": "tides"})
    ctx = StepContext(run_id=run.id, step="draft", seq=0, attempt=1, idempotency_key="k", started_by="olga",
                      workflow=wf.name, workflow_version=wf.version, _lease=claim.run.lease_token)
    once = superstep(wf, state, ctx)
    ctx_again = StepContext(**{**ctx.__dict__, "attempt": 2, "_goto": None})
    again = superstep(wf, state, ctx_again)
    assert calls == ["draft"]  # the second attempt found the super-step its first attempt finished
    assert again.lg_checkpoint == once.lg_checkpoint and ctx_again._goto == ctx._goto == "review"
