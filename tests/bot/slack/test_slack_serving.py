"""How Slack reaches Hazel: signed requests only (bad signatures and stale timestamps get 401 and change nothing),
the wiring from settings, Socket Mode, and what happens when Slack is not configured or cannot be reached
(nothing is lost: the request stays pending and is posted later, or shown on the console)."""

from __future__ import annotations

import io
import json
import logging
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qsl

import httpx
from rich.console import Console

from bot.engine.registry import Registry
from bot.server.app import HazelApp as Hazel
from bot.settings import Settings
from bot.inbound.slack import slack_routers, start_socket_mode
from bot.server.http import create_app
from bot.server.wiring import channels_from_settings, http_routers
from integrations.console import ConsoleChannel
from integrations.slack import SlackChannel
from store.models import Actor
from tests.bot.slack.conftest import DBA, PRIYA, SAM, SECRET, SlackEnv, example
from tests.support.fake_slack import FakeSlack
from tests.support.live import LiveServer
from tests.support.fake_slack_socket import FakeSocketMode
from tests.support.live import LiveServer
from tests.support.slack_payloads import fixture


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def test_unsigned_forged_and_stale_requests_get_401_and_change_nothing(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    message = env.request_message(run_id)
    body = "payload=" + json.dumps(env.sender.click_payload(PRIYA, "approve", message))
    calls = len(env.fake.calls)
    assert env.sender.post(body, secret="not-the-secret").status_code == 401
    assert env.sender.post(body, timestamp=int(time.time()) - 600).status_code == 401  # replayed later
    assert env.sender.post(body, headers={"X-Slack-Signature": "v0=" + "0" * 64}).status_code == 401
    assert httpx.post(env.sender.url, content=body,
                      headers={"Content-Type": "application/x-www-form-urlencoded"}, timeout=30).status_code == 401
    vector = fixture("slack_slash_command__signature_test_vector.headers.json")  # Slack's own, from 2018
    response = httpx.post(env.sender.url, content=fixture("slack_slash_command__signature_test_vector.form.txt"),
                          headers=vector["headers"], timeout=30)
    assert response.status_code == 401
    assert len(env.fake.calls) == calls and env.hazel.decisions(run_id=run_id) == [] and env.pending(run_id)
    assert env.sender.post(body).status_code == 200  # the same click, signed now: it counts
    env.wait(lambda: env.hazel.decisions(run_id=run_id), "the decision")


def test_url_verification_challenge_is_answered(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    body = json.dumps({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"})
    response = env.sender.post(body, content_type="application/json")
    assert response.status_code == 200
    assert "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in response.text


def test_wiring_builds_the_channel_and_route_only_when_configured(db_url: str) -> None:
    with FakeSlack() as fake:
        settings = Settings(HAZEL_DATABASE_URL=db_url, SLACK_BOT_TOKEN=fake.bot_token,
                            SLACK_SIGNING_SECRET=SECRET, HAZEL_SLACK_API_URL=fake.api_url)
        channel = channels_from_settings(settings)["slack"]
        assert isinstance(channel, SlackChannel) and channel.client.base_url == fake.api_url
        hazel = Hazel(settings, registry=Registry(), load_workflows=False, channels={"slack": channel})
        paths = [r.path for router in http_routers(hazel, settings) for r in router.routes]
        assert "/slack/events" in paths
        no_secret = settings.model_copy(update={"slack_signing_secret": None})
        assert slack_routers(hazel, no_secret) == []
        hazel.close()
    bare = Settings(HAZEL_DATABASE_URL=db_url)
    assert "slack" not in channels_from_settings(bare)
    hazel = Hazel(bare, registry=Registry(), load_workflows=False)
    with LiveServer(create_app(hazel, routers=http_routers(hazel, bare))) as server:  # off: said so, not 404
        for path, says in (("/slack/events", "Slack is off on this server: set SLACK_BOT_TOKEN and "
                                             "SLACK_SIGNING_SECRET"),
                           ("/jira/webhook", "Jira is off on this server: set JIRA_URL with JIRA_USER and "
                                             "JIRA_API_TOKEN (Cloud), or with JIRA_PAT (Server/Data Center)")):
            answer = httpx.post(server.url + path, content=b"{}", headers={"Content-Type": "application/json"},
                                timeout=30)
            assert answer.status_code == 503, answer.text
            assert answer.json() == {"error": {"type": "ChannelOffError", "message": says}}
    hazel.close()
    secret_only = Settings(HAZEL_DATABASE_URL=db_url, SLACK_SIGNING_SECRET=SECRET)  # what is missing, only
    hazel = Hazel(secret_only, registry=Registry(), load_workflows=False)
    with LiveServer(create_app(hazel, routers=http_routers(hazel, secret_only))) as server:
        answer = httpx.post(server.url + "/slack/events", content=b"{}", timeout=30)
        assert answer.json()["error"]["message"] == "Slack is off on this server: set SLACK_BOT_TOKEN", answer.text
    hazel.close()


def test_without_slack_settings_requests_fall_back_to_the_console_and_nothing_is_lost(db_url: str, caplog,  # noqa: ANN001
                                                                                        tmp_path) -> None:
    settings = Settings(HAZEL_DATABASE_URL=db_url)
    registry = Registry()
    registry.add(example())
    out = io.StringIO()
    hazel = Hazel(settings, registry=registry, load_workflows=False, channels=channels_from_settings(settings),
                  console=ConsoleChannel(console=Console(file=out, width=200)))
    hazel.prepare()
    with caplog.at_level(logging.WARNING, logger="hazel.outbox"):
        run = hazel.start(workflow="migration-plan", input={"request": "split full_name"}, actor=Actor(id="ops", channel="console"))
        hazel.drive(run_id=run.id)
    assert "not configured" in caplog.text and "slack:#migrations" in caplog.text
    printed = out.getvalue()
    assert "Approve the migration plan" in printed and "meant for slack:#migrations" in printed
    with hazel.store.read() as tx:
        waiting = tx.outbox.list(status="pending", run_id=run.id)  # left for a process with Slack settings
        assert [(m.channel, m.kind) for m in waiting] == [("slack:#migrations", "request.opened")]
        assert tx.outbox.list(status="dead") == []
    assert hazel.pending_request(run_id=run.id) is not None  # still pending, answerable from the CLI
    with LiveServer(create_app(hazel, routers=http_routers(hazel, settings))) as server:
        off = httpx.post(server.url + "/slack/events", content=b"x", timeout=30)
        assert off.status_code == 503  # off, saying why
    hazel.decide(run_id=run.id, action="approve", actor=Actor(id="ops", channel="console"))
    hazel.close()


def test_a_request_slack_keeps_refusing_stays_pending_and_is_posted_later(make_env) -> None:  # noqa: ANN001
    clock = Clock()
    env: SlackEnv = make_env(clock=clock, max_retries=0)
    env.fake.fail("chat.postMessage", status=503, times=None)
    run_id = env.start()
    env.settle()
    for _ in range(3):
        clock.advance(3600)
        env.hazel.deliverer.deliver_due()
    request = env.pending(run_id)
    assert request is not None and request.message_ref is None
    with env.hazel.store.read() as tx:
        [opened] = [m for m in tx.outbox.list(run_id=run_id) if m.kind == "request.opened"]
    assert opened.status.value == "pending" and opened.attempts == 4 and "503" in opened.last_error
    assert any(e.action == "outbox.failed" for e in env.hazel.audit(run_id=run_id))

    env.fake.clear_failures()
    env.fake.fail("chat.postMessage", status=429, retry_after_sec=7, times=None)
    clock.advance(3600)
    env.hazel.deliverer.deliver_due()
    with env.hazel.store.read() as tx:
        opened = tx.outbox.get(opened.id)
    wait_sec = (opened.next_attempt_at - clock()).total_seconds()
    assert 7 <= wait_sec <= 7 * 1.25 + 0.01  # Slack's Retry-After, honoured by the outbox

    env.fake.clear_failures()
    clock.advance(5)
    env.hazel.deliverer.deliver_due()
    assert env.pending(run_id).message_ref is None  # not due yet
    clock.advance(4)
    env.hazel.deliverer.deliver_due()
    message = env.request_message(run_id)
    assert message.blocks[-1]["type"] == "actions"
    assert len(env.fake.channel_messages(message.channel, top_level=True)) == 1


def test_socket_mode_connects_with_the_app_token_and_dispatches_to_the_same_handlers(tmp_path) -> None:  # noqa: ANN001
    db_url = f"sqlite:///{tmp_path / 'hazel.db'}"  # the transport is under test here, not the database
    with FakeSlack(usergroups={DBA: [SAM]}) as fake, FakeSocketMode() as socket:
        fake.socket_url = socket.url
        settings = Settings(HAZEL_DATABASE_URL=db_url, SLACK_BOT_TOKEN=fake.bot_token,
                            SLACK_APP_TOKEN=fake.app_token, HAZEL_SLACK_API_URL=fake.api_url)
        registry = Registry()
        registry.add(example())
        hazel = Hazel(settings, registry=registry, load_workflows=False, channels=channels_from_settings(settings))
        hazel.prepare()
        handler = start_socket_mode(hazel, settings)
        try:
            socket.wait_connected()
            form = dict(parse_qsl(fixture("slack_slash_command__bolt_python_test.form.txt").strip()))
            form.update(command="/hazel", text='start migration-plan {"request": "add an index"}', user_id=PRIYA,
                        user_name="priya", trigger_id=fake.new_trigger_id())
            socket.send({"envelope_id": "e-1", "type": "slash_commands", "accepts_response_payload": True,
                         "payload": form})
            ack = socket.ack("e-1")
            assert ack["payload"]["text"].startswith("▶️ Started run")
            run_id = ack["payload"]["text"].split("`")[1]
            assert hazel.get(run_id=run_id).started_by == PRIYA
        finally:
            handler.close()
            hazel.close()
        [opened] = fake.calls_to("apps.connections.open")
        assert opened.token == fake.app_token


def test_a_slack_error_quoting_the_token_is_stored_and_shown_without_it(make_env) -> None:  # noqa: ANN001
    """A fresh-user finding: an API answer quoting the bot token (an error text, a proxy's page) was redacted in
    the log line but stored whole in the outbox's ``last_error`` and the audit's ``outbox.failed`` event, which
    ``hazel outbox --json`` and ``hazel audit --json`` print."""
    import json

    env: SlackEnv = make_env(max_retries=0)
    token = env.fake.bot_token
    env.fake.fail("chat.postMessage", error=f"invalid_auth Bearer {token}", times=None)
    run_id = env.start()
    env.settle()
    with env.hazel.store.read() as tx:
        [opened] = [m for m in tx.outbox.list(run_id=run_id) if m.kind == "request.opened"]
    events = [e for e in env.hazel.audit(run_id=run_id) if e.action.startswith("outbox.")]
    stored = opened.last_error + json.dumps([e.detail for e in events])
    assert events and "invalid_auth" in opened.last_error, stored
    assert token not in stored and "Bearer **********" in opened.last_error, stored
