"""One deployment as ``hazel serve`` wires it, for end-to-end tests that cross channels: settings ->
``channels_from_settings`` / ``http_routers`` -> ``create_app`` on a live loopback server, a worker pool and the
outbox deliverer in threads, the fake Slack Web API (its own HTTP server) and the fake Jira (``responses``), and
the environment a ``hazel`` command run in-process needs to act on the same database."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import httpx
import responses
from rich.console import Console

from bot.ops.worker import WorkerPool
from bot.server.app import HazelApp
from bot.server.http import create_app
from bot.server.wiring import channels_from_settings, http_routers
from bot.settings import Settings
from integrations.console import ConsoleChannel
from tests.support import jira_payloads
from tests.support.fake_jira import FakeJira
from tests.support.fake_slack import FakeSlack
from tests.support.live import LiveServer
from tests.support.slack_payloads import SlackSender

if TYPE_CHECKING:
    from store.models import RunStatus, SteeringRequest

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
JIRA_SECRET = "jira-webhook-secret-for-tests"


def wait_for(predicate: Callable[[], Any], what: str = "condition", timeout_sec: float = 15.0) -> Any:
    """Poll ``predicate`` every 20 ms until it returns something truthy (returned); fails after ``timeout_sec``."""
    deadline = time.monotonic() + timeout_sec
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class _App(HazelApp):
    """``HazelApp`` whose PostgreSQL ``LISTEN`` connection checks its stop flag every 50 ms (not every second),
    so that stopping the worker pool after each test is quick."""

    def ready_listener(self, *, on_ready: Callable[[str], None]) -> Any:
        listener = super().ready_listener(on_ready=on_ready)
        if listener is not None:
            listener.poll_sec = 0.05
        return listener


class Deployment:
    """Hazel with Slack, Jira and the REST API on a live server, a worker pool and the deliverer.

    Args:
        workflows: ``HAZEL_WORKFLOWS`` (a test module defining its workflows at the top level).
        slack_channels: the fake Slack's channels (name -> id); ``emails``: its users' profile emails.
        tokens: ``HAZEL_API_TOKENS`` (name -> token); ``token``: the one ``http`` sends by default (None: none).
        env: more settings (``HAZEL_PEOPLE_FILE``, …).
    """

    def __init__(self, db_url: str, tmp_path: Path, *, workflows: str, slack_channels: dict[str, str],
                 tokens: dict[str, str], token: str | None = None, emails: dict[str, str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.tokens = tokens
        # trigger ids live 30 s here, not Slack's 3: on the loaded 2-core CI machine a click's handler once took
        # longer than 3 s to open its modal (the expiry itself is tested in tests/bot/slack with ``expire``)
        self.slack = FakeSlack(channels=slack_channels, emails=emails, trigger_ttl_sec=30.0).start()
        self._mock = responses.RequestsMock(assert_all_requests_are_fired=False)  # patches `requests` globally
        self._mock.start()
        try:
            self._build(db_url, tmp_path, workflows, token, env or {})
        except BaseException:
            self._mock.stop()
            self.slack.stop()
            raise

    def _build(self, db_url: str, tmp_path: Path, workflows: str, token: str | None, env: dict[str, str]) -> None:
        self.jira = FakeJira(self._mock, cloud=True)
        auth = self.jira.client_kwargs()
        self.env = {
            "HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": workflows, "HAZEL_OPERATOR": "olga",
            "HAZEL_OUTPUT_DIR": str(tmp_path / "out"),
            "HAZEL_API_TOKENS": ",".join(f"{name}={value}" for name, value in self.tokens.items()),
            "SLACK_BOT_TOKEN": self.slack.bot_token, "SLACK_SIGNING_SECRET": SLACK_SECRET,
            "HAZEL_SLACK_API_URL": self.slack.api_url,
            "JIRA_URL": self.jira.base, "JIRA_USER": auth["user"], "JIRA_API_TOKEN": auth["api_token"],
            "JIRA_WEBHOOK_SECRET": JIRA_SECRET, **env,
        }
        """The environment of the deployment: the server's settings, and the CLI's environment."""
        settings = Settings(**self.env)
        self.hazel = _App(settings, channels=channels_from_settings(settings),
                          console=ConsoleChannel(console=Console(file=io.StringIO(), width=120)))
        self.hazel.prepare()
        self.server = LiveServer(create_app(self.hazel, routers=http_routers(self.hazel, settings)))
        self.server.__enter__()
        headers = {"Authorization": f"Bearer {self.tokens[token]}"} if token else {}
        self.http = httpx.Client(base_url=self.server.url, timeout=30, headers=headers)
        self.sender = SlackSender(self.server.url + "/slack/events", SLACK_SECRET, self.slack)
        self.pool = WorkerPool(self.hazel, threads=2, sweep_sec=0.2)  # as `hazel serve` runs them
        self.pool.start()
        self.hazel.deliverer.start(sweep_sec=0.1)

    def close(self) -> None:
        self.pool.stop()
        self.sender.close()
        self.http.close()
        self.server.__exit__(None, None, None)
        self.hazel.close()
        self.slack.stop()
        self._mock.stop()

    def jira_send(self, payload: dict[str, Any]) -> httpx.Response:
        """A Jira webhook delivery, signed with the deployment's secret."""
        return jira_payloads.send(self.server.url + "/jira/webhook", payload, secret=JIRA_SECRET)

    def waiting(self, run_id: str, point: str) -> "SteeringRequest":
        """The run's pending request at ``point``, once the run waits on it and it was delivered."""
        from store.models import RunStatus

        def posted() -> "SteeringRequest | None":
            request = self.hazel.pending_request(run_id=run_id)
            if request is None or request.point != point or not request.message_ref:
                return None
            return request if self.hazel.get(run_id=run_id).status is RunStatus.WAITING else None

        return wait_for(posted, f"run {run_id} to wait at {point}")

    def ended(self, run_id: str, status: "RunStatus") -> None:
        wait_for(lambda: self.hazel.get(run_id=run_id).status is status, f"run {run_id} to be {status.value}")

    def quiet(self, run_id: str) -> None:
        """Wait until every outbox message of the run is delivered (so that a duplicate would be posted by now)."""
        def delivered() -> bool:
            with self.hazel.store.read() as tx:
                return all(m.status == "sent" for m in tx.outbox.list(run_id=run_id, limit=1000))

        wait_for(delivered, f"the outbox messages of run {run_id} to be delivered")

    def cli(self, *args: str) -> Any:
        """``hazel ARGS`` in-process on the deployment's settings; it must exit 0."""
        from typer.testing import CliRunner

        from bot.cli import app as cli_app

        result = CliRunner().invoke(cli_app, list(args), env=self.env)
        assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
        return result
