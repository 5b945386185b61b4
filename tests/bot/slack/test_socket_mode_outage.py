"""Socket Mode while Slack cannot be reached (a fresh-user finding, F3: ``hazel serve --socket-mode`` exited 1 within
2 s when ``apps.connections.open`` failed at start, taking the REST API, the workers and the scheduler with it).

The connection is made in the background: while Slack cannot be reached, or answers with an error, it is tried
again with backoff, one log line a try; once Slack issues a URL it connects and dispatches to the same handlers.
An app-level token Slack refuses is one ERROR line and no more tries; ``hazel serve`` keeps serving everything
else. Slack is the fake Web API (``tests.support.fake_slack``) and a fake Socket Mode endpoint, both on loopback.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qsl

import httpx
import pytest

from bot.engine.registry import Registry
from bot.inbound.slack import start_socket_mode
from bot.server.app import HazelApp as Hazel
from bot.server.wiring import channels_from_settings
from bot.settings import Settings
from tests.bot.slack.conftest import PRIYA, example
from tests.support.fake_slack import FakeSlack
from tests.support.fake_slack_socket import FakeSocketMode
from tests.support.live import free_port
from tests.support.slack_payloads import fixture
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]
TRIES = "Socket Mode: Slack"


def _hazel(tmp_path: Path, fake: FakeSlack, *, app_token: str) -> tuple[Hazel, Settings]:
    settings = Settings(HAZEL_DATABASE_URL=f"sqlite:///{tmp_path / 'hazel.db'}", SLACK_BOT_TOKEN=fake.bot_token,
                        SLACK_APP_TOKEN=app_token, HAZEL_SLACK_API_URL=fake.api_url)
    registry = Registry()
    registry.add(example())
    hazel = Hazel(settings, registry=registry, load_workflows=False, channels=channels_from_settings(settings))
    hazel.prepare()
    return hazel, settings


def _slash_command(fake: FakeSlack, text: str) -> dict:
    form = dict(parse_qsl(fixture("slack_slash_command__bolt_python_test.form.txt").strip()))
    form.update(command="/hazel", text=text, user_id=PRIYA, user_name="priya", trigger_id=fake.new_trigger_id())
    return form


def test_socket_mode_tries_again_while_slack_cannot_be_reached_then_connects(tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hazel.slack")
    caplog.set_level(logging.INFO, logger="slack_sdk")  # (its per-call failure lines would show here)
    with FakeSlack() as fake, FakeSocketMode() as socket:
        fake.fail_connections("apps.connections.open", times=None)  # Slack unreachable: each call is reset
        hazel, settings = _hazel(tmp_path, fake, app_token=fake.app_token)
        started = time.monotonic()
        connection = start_socket_mode(hazel, settings, first_backoff_sec=0.05, max_backoff_sec=0.2)
        try:
            assert time.monotonic() - started < 2.0  # returns at once: nothing waits for Slack
            fake.wait_for(lambda: len(fake.calls_to("apps.connections.open")) >= 3, what="three tries")
            assert connection.state == "connecting" and not connection.connected
            fake.clear_failures()  # Slack answers again, but Socket Mode is not turned on in the app yet
            fake.wait_for(lambda: any(c.error == "socket_mode_not_enabled"
                                      for c in fake.calls_to("apps.connections.open")), what="an error answer")
            fake.socket_url = socket.url  # now it is
            socket.wait_connected()
            wait_until(lambda: connection.state == "connected", 10, "the connection's state")
            socket.send({"envelope_id": "e-1", "type": "slash_commands", "accepts_response_payload": True,
                         "payload": _slash_command(fake, 'start migration-plan {"request": "add an index"}')})
            ack = socket.ack("e-1")
            assert ack["payload"]["text"].startswith("▶️ Started run")
        finally:
            connection.close()
            hazel.close()
    calls = fake.calls_to("apps.connections.open")
    failed = [c for c in calls if not c.ok]
    assert len(failed) >= 4 and calls[-1].ok and all(c.token == fake.app_token for c in calls)
    tries = [r for r in caplog.records if r.name == "hazel.slack" and r.getMessage().startswith(TRIES)]
    assert len(tries) == len(failed), [r.getMessage() for r in tries]  # one line a try, and only one
    said = [r.getMessage() for r in tries]
    assert any("Slack cannot be reached (" in m and "trying again in 0.05 s" in m for m in said), said
    assert any("answered apps.connections.open with socket_mode_not_enabled (turn Socket Mode on in the app's "
               "settings)" in m for m in said), said
    assert not [r for r in caplog.records if r.getMessage().startswith(("Failed to send a request to Slack",
                                                                         "Failed to retrieve WSS URL"))]
    assert any(r.getMessage() == "connected to Slack over Socket Mode" for r in caplog.records)
    assert fake.app_token not in caplog.text


def test_an_app_token_slack_refuses_is_one_error_line_and_no_more_tries(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hazel.slack")
    caplog.set_level(logging.INFO, logger="slack_sdk")
    wrong = "xapp-1-A0000000001-wrong-token-0123456789"
    with FakeSlack() as fake:
        hazel, settings = _hazel(tmp_path, fake, app_token=wrong)
        connection = start_socket_mode(hazel, settings, first_backoff_sec=0.02, max_backoff_sec=0.02)
        try:
            wait_until(lambda: connection.state == "refused", 10, "the token to be refused")
            time.sleep(0.2)  # ten backoffs: no further try
            assert len(fake.calls_to("apps.connections.open")) == 1
        finally:
            connection.close()
            hazel.close()
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert error.name == "hazel.slack"
    assert error.getMessage().startswith("Socket Mode is off: Slack refused SLACK_APP_TOKEN (invalid_auth): set an "
                                         "app-level token (xapp-…) with the connections:write scope and restart "
                                         "hazel serve; everything else keeps running"), error.getMessage()
    assert wrong not in caplog.text


# -- hazel serve --socket-mode, a process of its own --------------------------------------------------------------

class _Serve:
    """``hazel serve --socket-mode`` on the fake Slack, its stderr collected line by line."""

    def __init__(self, tmp_path: Path, fake: FakeSlack, *, app_token: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_token = "tok-socket-12345678"
        env = {**os.environ, "HAZEL_DATABASE_URL": f"sqlite:///{tmp_path / 'hazel.db'}", "HAZEL_PORT": str(self.port),
               "HAZEL_API_TOKEN": self.api_token, "SLACK_APP_TOKEN": app_token, "SLACK_BOT_TOKEN": fake.bot_token,
               "SLACK_SIGNING_SECRET": "abcdefgh12345678", "HAZEL_SLACK_API_URL": fake.api_url,
               "HAZEL_OPERATOR": "tester"}
        env.pop("HAZEL_WORKFLOWS", None)
        self.process = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--socket-mode"], env=env,
                                        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(iter(self.process.stderr.readline, "")),
                                        daemon=True)
        self._reader.start()

    def said(self, text: str) -> list[str]:
        return [line for line in list(self.lines) if text in line]

    def api_answers(self) -> bool:
        try:
            response = httpx.get(self.url + "/api/runs", headers={"Authorization": f"Bearer {self.api_token}"},
                                 timeout=2)
        except httpx.TransportError:
            return False
        return response.status_code == 200 and response.json()["runs"] == []

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self._reader.join(timeout=10)


@pytest.mark.slow
def test_serve_answers_while_slack_cannot_be_reached_and_connects_once_it_can(tmp_path: Path) -> None:
    with FakeSlack() as fake, FakeSocketMode() as socket:
        fake.fail_connections("apps.connections.open", times=None)
        serve = _Serve(tmp_path, fake, app_token=fake.app_token)
        try:
            wait_until(lambda: len(serve.said("Socket Mode: Slack cannot be reached")) >= 2
                       or serve.process.poll() is not None, 30, "two tries")
            assert serve.process.poll() is None, "".join(serve.lines)[-3000:]
            assert serve.api_answers(), "".join(serve.lines)[-3000:]  # the REST API answers meanwhile
            assert httpx.get(serve.url + "/healthz", timeout=2).status_code == 200
            fake.clear_failures()
            fake.socket_url = socket.url
            socket.wait_connected(timeout_sec=30)
            wait_until(lambda: serve.said("connected to Slack over Socket Mode"), 10, "the connected line")
            socket.send({"envelope_id": "e-1", "type": "slash_commands", "accepts_response_payload": True,
                         "payload": _slash_command(fake, "help")})
            assert socket.ack("e-1")["envelope_id"] == "e-1"
            assert serve.api_answers()
        finally:
            code = serve.stop()
    err = "".join(serve.lines)
    assert code == 0, err[-3000:]
    tries = serve.said("Socket Mode: Slack cannot be reached")
    failed = [c for c in fake.calls_to("apps.connections.open") if not c.ok]
    assert len(tries) == len(failed) >= 2, err[-3000:]  # one line a try
    assert "trying again in 1 s" in tries[0] and "trying again in 2 s" in tries[1], tries
    assert "Failed to send a request to Slack" not in err and "unexpected" not in err, err[-3000:]
    assert fake.app_token not in err


@pytest.mark.slow
def test_serve_with_an_app_token_slack_refuses_logs_it_once_and_keeps_serving(tmp_path: Path) -> None:
    wrong = "xapp-1-A0000000001-wrong-token-0123456789"
    with FakeSlack() as fake:
        serve = _Serve(tmp_path, fake, app_token=wrong)
        try:
            wait_until(lambda: serve.said("Socket Mode is off") or serve.process.poll() is not None, 30,
                       "the refused token's line")
            wait_until(serve.api_answers, 10, "the REST API")
            time.sleep(1.5)  # past the first backoff: no further try
            assert serve.process.poll() is None and serve.api_answers()
        finally:
            code = serve.stop()
    err = "".join(serve.lines)
    assert code == 0, err[-3000:]
    [line] = serve.said("Socket Mode is off")
    assert " ERROR hazel.slack Socket Mode is off: Slack refused SLACK_APP_TOKEN (invalid_auth)" in line, line
    assert len(fake.calls_to("apps.connections.open")) == 1
    assert wrong not in err and "unexpected" not in err, err[-3000:]
