"""After a crash: ``hazel approve`` SIGKILLed in the middle of the step it executes after recording the decision,
then run again, continues the run (the decision stands; completed steps never run again); while a live process
holds the run's lease, the command names that process, runs nothing and exits 1 (the second of a double submit)."""

from __future__ import annotations

import json
import os
import signal
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

DIR = Path(os.environ["CRASH_DIR"])


class Trail(BaseModel):
    trail: list[str] = Field(default_factory=list)


def _step(name, block=False):
    def fn(state: Trail, ctx: StepContext) -> Trail:
        with open(DIR / "effects.log", "a") as fh:
            fh.write(f"{name}-start {ctx.idempotency_key}\\n")
        if block:
            (DIR / f"{name}.started").touch()
            while (DIR / "block").exists():
                time.sleep(0.02)
        with open(DIR / "effects.log", "a") as fh:
            fh.write(f"{name}-end {ctx.idempotency_key}\\n")
        return state.model_copy(update={"trail": [*state.trail, name]})
    return fn


steered = Workflow("steered", version=1, state=Trail)
steered.step(_step("draft"), name="draft")
steered.steer("review")
steered.step(_step("slow", block=True), name="slow")
steered.step(_step("after"), name="after")
steered.steer("sign_off", actions=["approve", "reject"])
steered.step(_step("publish"), name="publish")

reviewed = Workflow("reviewed", version=1, state=Trail)  # rewound at its review to the slow step before it
reviewed.step(_step("draft"), name="draft")
reviewed.step(_step("slow", block=True), name="slow")
reviewed.steer("review")
reviewed.step(_step("after"), name="after")
'''


def environment(db_url: str, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "steered.py").write_text(WORKFLOW)
    return {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(tmp_path / "steered.py"),
            "CRASH_DIR": str(tmp_path), "HAZEL_OPERATOR": "tester", "COLUMNS": "200"}


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT back to its default in the child before it starts, as a command a person runs in a terminal has it:
    a suite started as a background job (``make test &``, or from a tool that does so) has SIGINT ignored, as
    POSIX shells ignore it for background jobs, and a child inherits that: Python then raises no
    ``KeyboardInterrupt`` and the Ctrl-C test waited for a process that never saw its SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """``python -X faulthandler ARGS``: a process that hangs is asked for its threads' stacks (``finish``)."""
    return subprocess.Popen([sys.executable, "-X", "faulthandler", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_as_in_a_terminal)


def finish(proc: subprocess.Popen, timeout_sec: float) -> tuple[str, str]:
    """``proc``'s stdout and stderr once it exits; when it has not within ``timeout_sec``, the test fails with
    the stacks of its threads (SIGABRT: ``faulthandler`` prints them) and what it wrote."""
    try:
        return proc.communicate(timeout=timeout_sec)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"the process did not exit within {timeout_sec} s; its threads and output:\n{err}\n{out}")


def waiting_run(read) -> str:  # noqa: ANN001
    """A ``steered`` run waiting at its review, started in this process (``hazel run`` through ``reader``: the
    setup; the processes under test are the ones that decide and get killed)."""
    run = json.loads(read("run", "steered", "--input", "{}", "--json").stdout)["run"]
    assert run["status"] == "waiting"
    return run["id"]


def wait_for(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def effects(tmp_path: Path) -> list[str]:
    return [line.split()[0] for line in (tmp_path / "effects.log").read_text().splitlines()]


@pytest.fixture
def reader(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """``hazel ARGS`` in this process (Typer's runner) with the settings of ``environment``: the reads between
    the processes and the start of the run; the commands that decide and execute the steps under test stay
    processes of their own."""
    monkeypatch.setenv("CRASH_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    return in_process_cli(monkeypatch, ROOT, db_url=db_url, workflows=str(tmp_path / "steered.py"),
                          operator="tester")


def shown(run_id: str, read) -> dict:  # noqa: ANN001
    return json.loads(read("show", run_id, "--json").stdout)


@pytest.mark.slow
def test_approve_killed_mid_step_then_approve_again_continues_the_run(db_url: str, tmp_path: Path,
                                                                     reader) -> None:  # noqa: ANN001
    env = environment(db_url, tmp_path)
    run_id = waiting_run(reader)
    (tmp_path / "block").touch()
    first = popen(["-m", "bot.cli", "approve", run_id], env)
    wait_for(tmp_path / "slow.started", first)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    (tmp_path / "block").unlink()

    detached = cli(["approve", run_id, "--detach"], env)  # only records: it prints what continues the run
    assert detached.returncode == 0, detached.stdout + detached.stderr
    assert f"no process is continuing it: `hazel retry {run_id}` continues it here" in detached.stdout
    assert effects(tmp_path).count("slow-start") == 1

    again = cli(["approve", run_id], env)
    assert again.returncode == 0, again.stdout + again.stderr  # the approval stands: it was recorded before
    assert "already approved by tester at " in again.stdout
    assert f"run {run_id} is ready and no process is continuing it: continuing it here" in again.stdout
    assert "ran slow, after; now waiting" in again.stdout
    after = shown(run_id, reader)
    assert after["run"]["status"] == "waiting" and after["pending_request"]["point"] == "sign_off"
    assert after["state"] == {"trail": ["draft", "slow", "after"]}
    assert effects(tmp_path) == ["draft-start", "draft-end", "slow-start", "slow-start", "slow-end", "after-start",
                                 "after-end"]  # only the killed step ran again

    done = cli(["approve", run_id, "--at", "sign_off"], env)
    assert done.returncode == 0, done.stderr
    final = shown(run_id, reader)
    assert final["run"]["status"] == "completed"
    assert final["state"] == {"trail": ["draft", "slow", "after", "publish"]}
    assert effects(tmp_path).count("publish-start") == 1 and effects(tmp_path).count("draft-start") == 1


@pytest.mark.slow
def test_rewind_killed_mid_step_then_rewind_again_continues_the_run(db_url: str, tmp_path: Path,
                                                                   reader) -> None:  # noqa: ANN001
    """A fresh-user finding: ``hazel rewind`` killed in the step after its fork left the run ``ready``, and run
    again it only said ``already rewound by …`` (exit 1), naming no way forward. It now continues the run as a
    decision command does: the rewind stands (the same person's, the same words)."""
    env = environment(db_url, tmp_path)
    started = reader("run", "reviewed", "--input", "{}", "--json")  # slow ran once, then review asks
    run_id = json.loads(started.stdout)["run"]["id"]
    request = shown(run_id, reader)["pending_request"]["id"]
    (tmp_path / "slow.started").unlink()
    (tmp_path / "block").touch()
    args = ["rewind", run_id, "--to", "slow", "--request", str(request), "--feedback", "faster"]
    first = popen(["-m", "bot.cli", *args], env)
    wait_for(tmp_path / "slow.started", first)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    (tmp_path / "block").unlink()

    again = cli(args, env)
    assert again.returncode == 0, again.stdout + again.stderr  # the rewind stands: it was recorded before
    assert "already rewound by tester at " in again.stdout
    assert f"run {run_id} is ready and no process is continuing it: continuing it here" in again.stdout
    after = shown(run_id, reader)
    assert after["run"]["status"] == "waiting" and after["pending_request"]["point"] == "review"
    assert effects(tmp_path) == ["draft-start", "draft-end", "slow-start", "slow-end", "slow-start", "slow-start",
                                 "slow-end"]  # the rewind's step: killed, then run again; nothing else twice

    other = cli(["rewind", run_id, "--to", "slow", "--request", str(request), "--feedback", "other words"], env)
    assert other.returncode == 1 and "already rewound by tester" in other.stderr, other.stdout + other.stderr
    assert effects(tmp_path).count("slow-start") == 3  # (the run was not stranded: nothing ran)

    # killed again, then sent with other words: refused (exit 1), the run continued all the same, and the
    # command it names for the request asked now is one that runs (it said `--at`, which rewind has not)
    request = shown(run_id, reader)["pending_request"]["id"]
    (tmp_path / "slow.started").unlink()
    (tmp_path / "block").touch()
    second = popen(["-m", "bot.cli", "rewind", run_id, "--to", "slow", "--request", str(request), "--feedback",
                    "first words"], env)
    wait_for(tmp_path / "slow.started", second)
    second.send_signal(signal.SIGKILL)
    second.wait(timeout=10)
    (tmp_path / "block").unlink()
    other = cli(["rewind", run_id, "--to", "slow", "--request", str(request), "--feedback", "other words"], env)
    assert other.returncode == 1 and "continuing it here" in other.stdout + other.stderr, other.stdout + other.stderr
    pending = shown(run_id, reader)["pending_request"]["id"]
    assert f"`hazel rewind {run_id} --to STEP --request {pending} …`" in other.stderr, other.stderr


@pytest.mark.slow
def test_killed_between_the_decision_and_its_first_step_then_reject_continues_it(db_url: str, tmp_path: Path,
                                                                                 reader) -> None:  # noqa: ANN001
    """The other decision's refusal (already approved, to a reject) still continues the run, and exits 1."""
    env = environment(db_url, tmp_path)
    run_id = waiting_run(reader)
    hang = popen(["-m", "tests.support.decide_and_hang", run_id], env)
    assert hang.stdout is not None and hang.stdout.readline().startswith("decided")
    hang.send_signal(signal.SIGKILL)
    hang.wait(timeout=10)

    rejected = cli(["reject", run_id, "--at", "review", "--reason", "too late", "--json"], env)
    assert rejected.returncode == 1, rejected.stdout + rejected.stderr  # the reject was not taken
    assert "already approved by sme" in rejected.stderr and "continuing it here" in rejected.stderr
    body = json.loads(rejected.stdout)
    assert body["refused"]["type"] == "AlreadyDecidedError" and body["continued"] is True
    assert body["error"] == body["refused"]  # (exit 1: the refusal is the document's error, as every error's)
    assert body["steps"] == ["slow", "after"] and body["run"]["status"] == "waiting"
    assert effects(tmp_path).count("slow-start") == 1  # the hung process never started it


@pytest.mark.slow
def test_a_live_lease_is_named_and_nothing_runs_twice(db_url: str, tmp_path: Path, reader) -> None:  # noqa: ANN001
    env = environment(db_url, tmp_path)
    run_id = waiting_run(reader)
    (tmp_path / "block").touch()
    first = popen(["-m", "bot.cli", "approve", run_id], env)
    try:
        wait_for(tmp_path / "slow.started", first)
        for args in (["approve", run_id], ["approve", run_id, "--at", "review"], ["edit", run_id, "--set", "x=1"]):
            again = cli(args, env)  # the same person's approve again (a double submit), or an edit: refused, as
            # once it ended, naming the process that holds the run
            assert again.returncode == 1, again.stdout + again.stderr
            assert "error: already approved by tester at " in again.stderr, again.stderr
            assert f"; run {run_id} is being continued by " in again.stderr
            assert len(again.stderr.strip().splitlines()) == 1, again.stderr  # one error line
            assert f":{first.pid}:" in again.stderr and "(lease until " in again.stderr
        for args in (["rewind", run_id, "--to", "draft"], ["rewind", run_id, "--to", "0", "--json"]):
            rewound = cli(args, env)  # said only "run R is running": it names the holder as approve does
            assert rewound.returncode == 1, rewound.stdout + rewound.stderr
            assert rewound.stderr.startswith(f"error: run {run_id} is running (executing a step): rewind when it "
                                             f"stops; run {run_id} is being continued by "), rewound.stderr
            assert len(rewound.stderr.strip().splitlines()) == 1, rewound.stderr
            assert f":{first.pid}:" in rewound.stderr and "(lease until " in rewound.stderr
        refused = json.loads(rewound.stdout)
        assert refused["refused"]["type"] == "RunStateError" and refused["error"] == refused["refused"]
        assert shown(run_id, reader)["run"]["status"] == "running"
    finally:
        (tmp_path / "block").unlink()
    out, err = finish(first, 60)
    assert first.returncode == 0, err
    assert shown(run_id, reader)["pending_request"]["point"] == "sign_off"
    assert effects(tmp_path).count("slow-start") == 1 and effects(tmp_path).count("after-start") == 1


def test_ctrl_c_mid_step_says_which_run_it_left_and_how_it_continues(db_url: str, tmp_path: Path,
                                                                     reader) -> None:  # noqa: ANN001
    """A fresh-user finding: Ctrl-C on ``hazel approve`` (or ``run``) mid-step exited 130 saying nothing. It now
    names the run and what continues it; ``hazel retry RUN`` then runs the cut step again, once."""
    env = environment(db_url, tmp_path)
    run_id = waiting_run(reader)
    (tmp_path / "block").touch()
    first = popen(["-m", "bot.cli", "approve", run_id], env)
    wait_for(tmp_path / "slow.started", first)
    first.send_signal(signal.SIGINT)
    out, err = finish(first, 30)
    (tmp_path / "block").unlink()
    assert first.returncode == 130, out + err
    assert err.endswith(f"interrupted: run {run_id} was executing; a step cut short runs again from its last "
                        f"checkpoint: `hazel retry {run_id}` continues it here, or `hazel serve` / `hazel "
                        "worker`\n"), err
    again = cli(["retry", run_id], env)
    assert again.returncode == 0, again.stdout + again.stderr
    after = shown(run_id, reader)
    assert after["run"]["status"] == "waiting" and after["pending_request"]["point"] == "sign_off"
    assert effects(tmp_path).count("slow-start") == 2 and effects(tmp_path).count("slow-end") == 1


def test_ctrl_c_mid_step_with_json_prints_the_decision_with_the_interruption_as_its_error(
        db_url: str, tmp_path: Path, reader) -> None:  # noqa: ANN001
    """s25 F12: with ``--json`` Ctrl-C printed only ``{"error": …}``, where the human output says the approve was
    recorded: a script could not tell whether to approve again. Now the command's document carries the decision
    (and the run as it is then), with the interruption as its ``"error"`` member: one document."""
    env = environment(db_url, tmp_path)
    run_id = waiting_run(reader)
    (tmp_path / "block").touch()
    first = popen(["-m", "bot.cli", "approve", run_id, "--json"], env)
    wait_for(tmp_path / "slow.started", first)
    first.send_signal(signal.SIGINT)
    out, err = finish(first, 30)
    (tmp_path / "block").unlink()
    assert first.returncode == 130, out + err
    body = json.loads(out)  # one document
    message = (f"interrupted: run {run_id} was executing; a step cut short runs again from its last checkpoint: "
               f"`hazel retry {run_id}` continues it here, or `hazel serve` / `hazel worker`")
    assert body["error"] == {"type": "KeyboardInterrupt", "message": message}, body
    assert body["decision"]["action"] == "approve" and body["decision"]["actor_id"] == "tester", body
    assert body["settled"] is True and body["request"]["point"] == "review", body
    assert body["run"]["id"] == run_id and body["run"]["status"] == "running" and body["pending_request"] is None
    assert err.endswith(message + "\n"), err
