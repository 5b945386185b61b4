"""``hazel serve`` and ``hazel worker`` under ``HAZEL_LOG_FORMAT=json``: every line they write, on stdout and
stderr, is one JSON object (journald, a log shipper). The console channel's notifications (a steering request,
a decision, a run completed or failed) are records of ``hazel.console`` carrying the notification's plain text
and its run, request and kind, with secrets redacted as in every other record; not rich panels wrapped at 80
columns on stdout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.live import free_port
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "tests" / "workflows" / "doc.py"
API_TOKEN = "tok-jsonlogs-5c5c5c5c5c"


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


class Process:
    """A ``hazel serve`` / ``hazel worker`` subprocess whose stdout and stderr lines are collected as read."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", *args], env=env, cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [threading.Thread(target=lambda s=s, into=into: into.extend(iter(s.readline, "")),
                                         daemon=True)
                        for s, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    def records(self) -> list[dict]:
        """The stderr lines read so far that parse as JSON objects."""
        found = []
        for line in list(self.err):
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
        return found

    def wait_for(self, what: str, match) -> dict:  # noqa: ANN001
        try:
            wait_until(lambda: any(map(match, self.records())) or self.proc.poll() is not None, 60, what)
        except AssertionError:
            raise AssertionError(f"{what}: not logged; the process wrote:\n{''.join(self.out + self.err)[-3000:]}")
        found = [r for r in self.records() if match(r)]
        assert found, f"{what}: the process exited; it wrote:\n{''.join(self.out + self.err)[-3000:]}"
        return found[0]

    def stop(self) -> None:
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
            for reader in self.readers:
                reader.join(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def assert_all_json(name: str, lines: list[str]) -> None:
    for line in lines:
        try:
            assert isinstance(json.loads(line), dict), line
        except ValueError:
            pytest.fail(f"{name} wrote a line that is not JSON: {line!r}")


def env_for(db_url: str) -> dict[str, str]:
    env = {**os.environ, "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": str(WORKFLOWS), "HAZEL_OPERATOR": "alice",
           "HAZEL_PORT": str(free_port()), "HAZEL_WORKERS": "2", "HAZEL_LOG_FORMAT": "json",
           "HAZEL_API_TOKEN": API_TOKEN, "COLUMNS": "80"}
    env.pop("HAZEL_DEBUG", None)
    return env


def console_record(run_id: str, **fields: object):  # noqa: ANN201
    return lambda r: r.get("logger") == "hazel.console" and r.get("run_id") == run_id and all(
        r.get(k) == v for k, v in fields.items())


@pytest.mark.slow
def test_every_line_is_json_and_notifications_are_records(db_url: str) -> None:
    """``serve``; ``worker`` builds the same console (``console_for``): ``worker --until-idle`` below."""
    command = "serve"
    env = env_for(db_url)
    # the plan the notification shows quotes a secret setting's value, and is long enough to be wrapped at 80
    topic = f"rotate the credentials {API_TOKEN} of every replica in the eastern region before the freeze"
    waiting = json.loads(cli(["run", "doc", "--input", json.dumps({"topic": topic}), "--detach", "--json"],
                             env).stdout)["run"]["id"]
    failing = json.loads(cli(["run", "flaky", "--input", '{"topic": "vacuum"}', "--detach", "--json"],
                             env).stdout)["run"]["id"]
    first = Process([command], env)  # runs both: one reaches its steering point, the other fails
    try:
        asked = first.wait_for("the steering request's record", console_record(waiting, kind="steering_request"))
        failed = first.wait_for("the failed run's record", console_record(failing, status="failed"))
    finally:
        first.stop()
    request_id = asked["request_id"]
    # decided while no process runs (a running one might finish the run before this command delivers the
    # run's news, and the command would print it): the next process completes the run and reports it
    cli(["approve", waiting, "--at", "review", "--request", str(request_id), "--detach"], env)
    second = Process([command], env)
    try:
        done = second.wait_for("the completed run's record", console_record(waiting, status="completed"))
    finally:
        second.stop()

    for process in (first, second):
        said = "".join(process.out + process.err)
        assert process.proc.returncode == 0, said[-3000:]
        assert_all_json(f"{command}'s stdout", process.out)
        assert_all_json(f"{command}'s stderr", process.err)
        assert API_TOKEN not in said

    text = asked["message"]  # the notification's plain text: no panel borders, no wrapping, no markup
    assert text.startswith("Steering request: Review the plan\ndoc v1 · run " + waiting), text
    assert "write rotate the credentials ********** of every replica in the eastern region before the freeze" \
           in text, text
    assert f"Answer with:\n  hazel approve {waiting} --at review --request {request_id}" in text, text
    assert not any(c in text for c in "╭│╰─"), text  # no panel
    assert (asked["level"], asked["workflow"], asked["point"]) == ("INFO", "doc", "review")

    assert (done["message"], done["kind"], done["level"]) == (f"run {waiting} completed", "run", "INFO")
    assert failed["message"].startswith(f"run {failing} failed: ") and failed["level"] == "WARNING", failed
    assert failed["kind"] == "run" and failed["workflow"] == "flaky"


def test_worker_until_idle_logs_its_summary_as_json(db_url: str) -> None:
    """``hazel worker --until-idle`` (a cron job, say): the request it reaches and its own summary are records."""
    env = env_for(db_url)
    run_id = json.loads(cli(["run", "doc", "--input", '{"topic": "backups"}', "--detach", "--json"],
                            env).stdout)["run"]["id"]
    done = cli(["worker", "--until-idle"], env)
    assert_all_json("worker --until-idle's stdout", done.stdout.splitlines())
    assert_all_json("worker --until-idle's stderr", done.stderr.splitlines())
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert any(console_record(run_id, kind="steering_request")(r) for r in records), done.stderr
    assert {"logger": "hazel.worker", "message": "worked on 1 run(s); none is ready now", "drives": 1}.items() \
           <= records[-1].items(), records[-1]


def test_serves_refusal_to_start_is_a_record(db_url: str) -> None:
    """A port already taken: the error that ends ``serve`` is one JSON line too, not ``error: …`` text."""
    env = env_for(db_url)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", int(env["HAZEL_PORT"])))
        taken.listen()
        refused = subprocess.run([sys.executable, "-m", "bot.cli", "serve"], env=env, cwd=ROOT,
                                 capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1, refused.stderr
    assert refused.stdout == ""
    assert_all_json("serve's stderr", refused.stderr.splitlines())
    last = json.loads(refused.stderr.splitlines()[-1])
    assert last["level"] == "ERROR" and last["logger"] == "hazel.server", last
    assert last["message"].startswith(f"cannot listen on 127.0.0.1:{env['HAZEL_PORT']}: "), last
