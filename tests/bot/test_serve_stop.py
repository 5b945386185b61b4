"""Stopping ``hazel serve`` with SIGTERM (as a deploy does): the step in flight finishes and is checkpointed,
the run is handed back, the process exits 0; the next process continues the run without repeating the step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.live import free_port
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "tests" / "workflows" / "crashy.py"


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.slow
def test_sigterm_lets_the_step_in_flight_checkpoint(db_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(WORKFLOW), "CRASHY_DIR": str(tmp_path),
           "HAZEL_PORT": str(free_port()), "HAZEL_OPERATOR": "tester"}
    (tmp_path / "block").touch()
    run_id = json.loads(cli(["run", "crashy", "--input", '{"total": 1}', "--detach", "--json"], env).stdout)["run"]["id"]
    serve = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], env=env, cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(serve.stderr.readline, "")), daemon=True)
    try:
        reader.start()
        wait_until(lambda: (tmp_path / "slow.started").exists(), 30, "the slow step to start in serve")
        serve.send_signal(signal.SIGTERM)
        # the step in flight may finish once the workers are told to stop (not after a fixed sleep: on a busy
        # machine uvicorn's shutdown outlasted it, the step finished first and the run went on to its end)
        wait_until(lambda: any("stopping: letting steps" in line for line in lines) or serve.poll() is not None,
                   30, "serve to say it is stopping")
        (tmp_path / "block").unlink()
        serve.wait(timeout=30)
        reader.join(timeout=10)
    finally:
        if serve.poll() is None:
            serve.kill()
    err = "".join(lines)
    assert serve.returncode == 0, err[-2000:]
    assert "handed back at checkpoint #3" in err, err[-3000:]
    shown = json.loads(cli(["show", run_id, "--json"], env).stdout)
    assert shown["run"]["status"] == "ready" and shown["run"]["head_seq"] == 3
    assert cli(["worker", "--until-idle"], env).returncode == 0
    shown = json.loads(cli(["show", run_id, "--json"], env).stdout)
    assert shown["run"]["status"] == "completed" and shown["state"]["total"] == 54
    effects = [line.split()[0] for line in (tmp_path / "effects.log").read_text().splitlines()]
    assert effects == ["first", "second", "slow-start", "slow-end", "last"]


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_step_that_ends_while_the_process_stops_is_handed_back(command: str, db_url: str,
                                                                 tmp_path: Path) -> None:
    """The workers were told to hand runs back only after the scheduler (and Socket Mode) had stopped: a step
    that ended meanwhile was followed by the next step (a deploy waited for it; seen as a flaky run of the test
    above). Now the workers are told first. The step in flight is made to end inside the scheduler's stop."""
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(WORKFLOW), "CRASHY_DIR": str(tmp_path),
           "HAZEL_PORT": str(free_port()), "HAZEL_OPERATOR": "tester"}
    (tmp_path / "block").touch()
    run_id = json.loads(cli(["run", "crashy", "--input", '{"total": 1}', "--detach", "--json"], env).stdout)["run"]["id"]
    script = (  # the scheduler's stop lets the step in flight end, and waits until it has been checkpointed
        "import pathlib, sys, time\n"
        "from bot.ops.scheduler import Scheduler\n"
        "real = Scheduler.stop\n"
        "def slow_stop(self, *args, **kwargs):\n"
        f"    d = pathlib.Path({str(tmp_path)!r})\n"
        "    (d / 'block').unlink(missing_ok=True)\n"
        "    deadline = time.monotonic() + 20\n"
        "    while 'slow-end' not in (d / 'effects.log').read_text() and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "    time.sleep(1.0)\n"
        "    return real(self, *args, **kwargs)\n"
        "Scheduler.stop = slow_stop\n"
        "from bot.cli import main\n"
        f"sys.argv = ['hazel', {command!r}]\n"
        "main()\n")
    process = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (tmp_path / "slow.started").exists() or process.poll() is not None, 30,
                   "the slow step to start")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err[-2000:]
    assert "handed back at checkpoint #3" in err, err[-3000:]
    effects = [line.split()[0] for line in (tmp_path / "effects.log").read_text().splitlines()]
    assert effects == ["first", "second", "slow-start", "slow-end"]
    shown = json.loads(cli(["show", run_id, "--json"], env).stdout)
    assert shown["run"]["status"] == "ready" and shown["run"]["head_seq"] == 3


def test_a_worker_logs_its_start_and_its_stop(db_url: str, tmp_path: Path) -> None:
    """``hazel worker`` says when it has started (threads, database, workflows) and when SIGTERM stopped it, as
    ``serve`` does (a fresh-user finding: it logged nothing of either)."""
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(WORKFLOW), "HAZEL_WORKERS": "2",
           "CRASHY_DIR": str(tmp_path), "HAZEL_OPERATOR": "tester"}
    worker = subprocess.Popen([sys.executable, "-m", "bot.cli", "worker"], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(worker.stderr.readline, "")), daemon=True)
    try:
        reader.start()
        wait_until(lambda: any("worker started" in line for line in lines) or worker.poll() is not None, 30,
                   "the worker to say it has started")
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        reader.join(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
    said = "".join(lines)
    assert worker.returncode == 0, said
    started = next(line for line in lines if "worker started" in line)
    dialect = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    assert f"2 thread(s), {dialect}, workflows: crashy v1" in started, started
    assert "stopping: letting steps in flight finish and checkpoint" in said and said.rstrip().endswith("stopped")


def signalled_from_inside(imports: str, function: str, command: str, db_url: str,
                          tmp_path: Path) -> subprocess.CompletedProcess:
    """``hazel COMMAND`` in a process of its own whose ``function`` (reached after ``imports``) sends the
    process a SIGTERM before doing its work: a signal from inside the window it opens, whatever the timing."""
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(WORKFLOW), "CRASHY_DIR": str(tmp_path),
           "HAZEL_PORT": str(free_port()), "HAZEL_OPERATOR": "tester"}
    script = (
        "import os, signal, sys\n"
        f"{imports}\n"
        f"real = {function}\n"
        "def early(*args):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return real(*args)\n"
        f"{function} = early\n"
        "from bot.cli import main\n"
        f"sys.argv = ['hazel', {command!r}]\n"
        "main()\n")
    return subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_a_sigterm_while_serve_starts_stops_it_as_one_after_it_started(db_url: str, tmp_path: Path) -> None:
    """SIGTERM after the workers started (a step may be in flight) and before uvicorn took the signals over
    killed ``serve`` outright (status -15, the step cut short): seen as a flaky run of the test above. It is
    kept and handed to the server, which stops at once: steps finish, exit 0. The signal is sent from inside
    that window (the scheduler is made then), so the test does not depend on timing."""
    done = signalled_from_inside("from bot.server import processes", "processes.Scheduler.from_settings", "serve",
                                 db_url, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopping: letting steps in flight finish and checkpoint" in done.stderr
    assert done.stderr.rstrip().endswith("stopped"), done.stderr[-2000:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_signal_while_the_database_is_unreachable_stops_the_process_cleanly(command: str, sig: int) -> None:
    """``serve`` / ``worker`` started while the database is unreachable wait for it, logging each try; SIGTERM
    (a deploy) or SIGINT (Ctrl-C) then killed them (status -15 or 130, nothing logged after the last "retrying"
    line: a fresh-user finding). Now the wait ends at once, the process logs "stopped" and exits 0. (No Hazel
    database is needed: nothing listens on port 1; a SQLite file is never "unreachable".)"""
    env = {**os.environ, "HAZEL_DATABASE_URL": "postgresql+psycopg://hazel:pw-never-shown@127.0.0.1:1/hazel",
           "HAZEL_WORKFLOWS": str(WORKFLOW), "HAZEL_PORT": str(free_port()), "HAZEL_OPERATOR": "tester"}
    process = subprocess.Popen([sys.executable, "-m", "bot.cli", command], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stderr.readline, "")), daemon=True)
    try:
        reader.start()
        wait_until(lambda: any("unreachable" in line for line in lines) or process.poll() is not None, 30,
                   f"{command} to say the database is unreachable")
        started = time.monotonic()
        process.send_signal(sig)
        process.wait(timeout=30)
        waited = time.monotonic() - started
        reader.join(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    said = "".join(lines)
    assert process.returncode == 0, said[-2000:]
    assert "stopping: asked to stop before the database answered (nothing was started)" in said
    assert said.rstrip().endswith("stopped"), said[-2000:]
    assert "Traceback" not in said and "pw-never-shown" not in said
    assert waited < 5, f"{command} took {waited:.1f} s to stop"  # not after the next try's pause


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_signal_while_the_command_starts_stops_it_cleanly(command: str, db_url: str, tmp_path: Path) -> None:
    """A SIGTERM while ``serve`` / ``worker`` import the server and read their settings (about 2 s on a loaded
    machine) killed them (status -15, nothing logged). The commands now keep the signal from their first line:
    nothing is started, "stopped" is logged, exit 0. Sent from inside that window (as settings are read)."""
    done = signalled_from_inside("from bot.cli import ops", "ops._read_settings", command, db_url, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopping: asked to stop before the database answered (nothing was started)" in done.stderr
    assert done.stderr.rstrip().endswith("stopped"), done.stderr[-2000:]
    assert "worker started" not in done.stderr


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_serve_and_worker_print_the_answer_commands_as_the_cli_was_invoked(command: str, db_url: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh-user finding: one request's reminders read ``hazel approve …`` from ``serve`` and
    ``.venv/bin/hazel approve …`` from ``worker``, both started as ``.venv/bin/hazel``: serve's console channel
    ignored how the CLI was invoked."""
    from typer.testing import CliRunner

    import bot.server.processes as processes
    from bot.cli import app

    seen: list[str] = []
    monkeypatch.setattr(processes, "serve", lambda settings, **kw: seen.append(kw["console"].command))
    monkeypatch.setattr(processes, "work", lambda settings, **kw: seen.append(kw["console"].command) or (0, []))
    monkeypatch.setattr(sys, "argv", [str(Path(".venv/bin/hazel").resolve()), command])
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setattr("shutil.which", lambda name: None)  # (not on PATH: the path it was run by)
    result = CliRunner().invoke(app, [command, "--port", "18999"] if command == "serve" else [command])
    assert result.exit_code == 0, result.output
    assert seen == [os.path.relpath(Path(".venv/bin/hazel").resolve())], seen
