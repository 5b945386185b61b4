"""``hazel approve RUN`` (and the other commands that continue a run in their own process) while someone else
cancels the run (``hazel cancel RUN`` from another shell) during the step it executes: the command used to say
``run R: now cancelled`` and exit 0, so a script checking ``$?`` believed the run went on. It now exits 1 with
one error line naming who cancelled it (the engine's ``lease lost`` warning is left out: it said the same, a
second line), and with ``--json`` its document carries that error as its ``"error"`` member; the decision it
recorded stays recorded. ``hazel worker`` still logs ``lease lost``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import in_process_cli

ROOT = Path(__file__).resolve().parents[2]

WORKFLOW = '''
import os, time
from pathlib import Path
from pydantic import BaseModel, Field
from hazel import StepContext, Workflow

DIR = Path(os.environ["GATE_DIR"])


class Trail(BaseModel):
    trail: list[str] = Field(default_factory=list)


def _step(name, block=False):
    def fn(state: Trail, ctx: StepContext) -> Trail:
        if block:
            (DIR / f"{name}.started").touch()
            while (DIR / "block").exists():  # until the test has cancelled the run
                time.sleep(0.02)
        return state.model_copy(update={"trail": [*state.trail, name]})
    return fn


gated = Workflow("gated", version=1, state=Trail)
gated.step(_step("draft"), name="draft")
gated.steer("review", title="Review the draft", on_feedback="draft")
gated.step(_step("slow", block=True), name="slow")
gated.step(_step("after"), name="after")
'''


@pytest.fixture
def env(db_url: str, tmp_path: Path) -> dict[str, str]:
    """The environment of the ``hazel`` processes: ``db_url``, the ``gated`` workflow, operator ``tester``."""
    (tmp_path / "gated.py").write_text(WORKFLOW)
    return {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(tmp_path / "gated.py"),
            "GATE_DIR": str(tmp_path), "HAZEL_OPERATOR": "tester", "COLUMNS": "200"}


@pytest.fixture
def reader(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]):  # noqa: ANN201
    """``hazel ARGS`` in this process: the setup and the reads; the command under test is a process."""
    monkeypatch.setenv("GATE_DIR", str(tmp_path))
    return in_process_cli(monkeypatch, ROOT, db_url=db_url, workflows=str(tmp_path / "gated.py"), operator="tester")


def hazel(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``hazel ARGS`` as a process of its own (another shell), to its end."""
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def cancelled_mid_step(args: list[str], run_id: str, env: dict[str, str], tmp_path: Path,
                       then: list[str] | None = None, then_code: int = 0,
                       then_says: str = "") -> subprocess.CompletedProcess:
    """Run ``hazel ARGS`` as a process; once its ``slow`` step has started, ``hazel cancel`` the run from another
    process (as sam), and ``hazel THEN`` after it when given (exiting ``then_code``, ``then_says`` in its
    output), then let the step return. Returns the command's completed process."""
    (tmp_path / "block").touch()
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "slow.started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the slow step never started"
            time.sleep(0.02)
        cancel = hazel(["cancel", run_id, "--reason", "wrong topic", "--as", "sam"], env)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        if then is not None:
            after = hazel(then, env)
            assert after.returncode == then_code, after.stdout + after.stderr
            assert then_says in " ".join((after.stdout + after.stderr).split()), after.stdout + after.stderr
    finally:
        (tmp_path / "block").unlink()
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def waiting_run(reader) -> str:  # noqa: ANN001
    """A ``gated`` run waiting at its review (started in this process)."""
    run = json.loads(reader("run", "gated", "--input", "{}", "--json").stdout)["run"]
    assert run["status"] == "waiting"
    return run["id"]


@pytest.mark.slow
def test_approve_whose_run_is_cancelled_mid_step_exits_1(env: dict[str, str], tmp_path: Path,
                                                         reader) -> None:  # noqa: ANN001
    run_id = waiting_run(reader)
    done = cancelled_mid_step(["approve", run_id], run_id, env, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "✓ approve recorded for 'Review the draft'" in done.stdout
    line = (f"error: run {run_id} was cancelled by sam while this command was executing it (reason: wrong topic); "
            "the approve stays recorded, the run goes no further")
    assert done.stderr.splitlines() == [line], done.stderr  # one line (not the engine's "lease lost" above it)
    shown = json.loads(reader("show", run_id, "--json").stdout)
    assert shown["run"]["status"] == "cancelled" and shown["state"] == {"trail": ["draft"]}
    history = json.loads(reader("history", run_id, "--json").stdout)
    assert [(d["action"], d["actor_id"]) for d in history["decisions"]] == [("approve", "tester")]  # kept


@pytest.mark.slow
def test_json_output_of_an_approve_whose_run_is_cancelled_mid_step(env: dict[str, str], tmp_path: Path,
                                                                    reader) -> None:  # noqa: ANN001
    """With ``--json`` the body is printed as after any drive (the run ``cancelled``, the decision in it), one
    document with the error as its ``"error"`` member, as every error that exits 1 is printed; the error line
    goes to stderr, and the status is 1, as for a run the command drove into ``failed``."""
    run_id = waiting_run(reader)
    done = cancelled_mid_step(["approve", run_id, "--at", "review", "--json"], run_id, env, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    body = json.loads(done.stdout)  # one document
    assert body["run"]["status"] == "cancelled" and body["decision"]["action"] == "approve"
    message = (f"run {run_id} was cancelled by sam while this command was executing it (reason: wrong topic); "
               "the approve stays recorded, the run goes no further")
    assert body["error"] == {"type": "RunCancelledError", "message": message}, body.get("error")
    assert done.stderr.splitlines() == [f"error: {message}"], done.stderr


@pytest.mark.slow
def test_a_run_cancelled_then_rewound_by_others_mid_step_still_exits_1(env: dict[str, str], tmp_path: Path,
                                                                       reader) -> None:  # noqa: ANN001
    """Cancelled, then rewound to its review by someone else: while the cancelled step still runs the rewind is
    refused (its own run of the step would execute beside it: a fresh-user finding), and this command says the
    run was cancelled (it once said "queued for a worker" and exited 0); once the step has ended, the rewind
    goes ahead, and the run goes on on its branch."""
    run_id = waiting_run(reader)
    rewind = ["rewind", run_id, "--to", "review", "--detach", "--as", "sam"]
    done = cancelled_mid_step(["approve", run_id], run_id, env, tmp_path, then=rewind, then_code=1,
                              then_says="was cancelled while a step was executing in")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"error: run {run_id} was cancelled by sam while this command was executing it (reason: wrong topic); "
        "the approve stays recorded, the run goes no further"], done.stderr
    assert hazel(rewind, env).returncode == 0  # the step has ended: its lease let go
    shown = json.loads(reader("show", run_id, "--json").stdout)
    assert shown["run"]["status"] == "ready"  # the rewind's branch, queued for a worker (--detach): not this one's


@pytest.mark.slow
def test_a_run_that_ends_normally_still_exits_0(env: dict[str, str], tmp_path: Path, reader) -> None:  # noqa: ANN001
    run_id = waiting_run(reader)
    done = hazel(["approve", run_id], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error:" not in done.stderr and "now completed" in done.stdout


@pytest.mark.slow
def test_a_worker_whose_run_is_cancelled_mid_step_still_logs_lease_lost(env: dict[str, str], tmp_path: Path,
                                                                        reader) -> None:  # noqa: ANN001
    """The command leaves the engine's warning out of its stderr; ``hazel worker`` keeps it in its log, where it
    says why the worker stopped executing the run."""
    run_id = waiting_run(reader)
    reader("approve", run_id, "--detach")  # queued for a worker
    done = cancelled_mid_step(["worker", "--until-idle"], run_id, env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"run {run_id}: lease lost (cancelled or taken over); stopping here" in done.stderr, done.stderr


def test_the_lease_lost_warning_is_left_out_only_for_a_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bot.cli.runs.drive`` holds the engine's ``lease lost`` warning back: dropped when the run was cancelled
    (the command's error line says so), printed when another worker took the run over (nothing else says it)."""
    import io
    import logging
    from types import SimpleNamespace

    from bot.cli import common, runs
    from bot.engine import LEASE_LOST, DriveResult
    from store.models import RunStatus

    stderr = io.StringIO()
    handler = logging.StreamHandler(stderr)
    monkeypatch.setattr(common, "_handlers", [handler])
    monkeypatch.setattr(common, "_driving", [])
    runner_log = logging.getLogger("hazel.runner")
    runner_log.addHandler(handler)
    try:
        for cancels, printed in (([SimpleNamespace(action="run.cancelled")], ""),
                                 ([], "run r1: lease lost (cancelled or taken over); stopping here\n")):
            def drive(*, run_id: str, on_retry: object) -> DriveResult:
                runner_log.warning(LEASE_LOST, run_id)
                return DriveResult(run_id=run_id, lease_lost=True,
                                   _run=SimpleNamespace(id=run_id, status=RunStatus.RUNNING))

            hazel = SimpleNamespace(drive=drive, audit=lambda run_id, events=cancels: events)
            assert runs.drive(hazel, "r1").lease_lost
            assert stderr.getvalue() == printed, (cancels, stderr.getvalue())
            assert handler.filters == []  # (held only while the run is driven)
    finally:
        runner_log.removeHandler(handler)


def test_a_cancel_before_the_drive_began_is_not_reported_as_this_commands(db_url: str) -> None:
    """A run cancelled earlier and rewound since (so live again) whose drive then loses its lease to a takeover
    is not reported as cancelled: ``Hazel.drive``'s result says when it began (``started_at``), and only a
    cancel after it counts (it said None, and any earlier cancel of the run matched)."""
    from pydantic import BaseModel

    from bot.cli.ended import cancelled_during
    from hazel import StepContext, Workflow
    from tests.support.engine import make_hazel, person

    class Notes(BaseModel):
        text: str = ""

    wf = Workflow("twice", version=1, state=Notes)

    @wf.step
    def draft(state: Notes, ctx: StepContext) -> Notes:
        return Notes(text=state.text + "d")

    wf.steer("review")

    @wf.step
    def ship(state: Notes, ctx: StepContext) -> Notes:
        return Notes(text=state.text + "s")

    hazel = make_hazel(db_url, wf)
    sam = person("sam")
    run = hazel.start(workflow="twice", input={}, actor=sam, claim=True)
    hazel.drive(run_id=run.id)
    hazel.cancel(run_id=run.id, actor=sam, reason="wrong topic")
    hazel.rewind(run_id=run.id, actor=sam, to=1, feedback="again", claim=True)
    began = hazel.clock()
    result = hazel.drive(run_id=run.id)
    assert result.started_at is not None and result.started_at >= began
    result.lease_lost = True  # (as when another worker took the run over while this drive executed it)
    assert not cancelled_during(hazel, hazel.get(run_id=run.id), result)
