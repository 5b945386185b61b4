"""Notification hooks through the outbox, delivered over real HTTP to a receiver on loopback that checks each
signature itself: events written with what caused them, retries with backoff, dead after the last attempt and
visible in ``hazel outbox``."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
from datetime import datetime, timedelta, timezone
from typing import Iterator

import pytest
from pydantic import ValidationError
from rich.console import Console
from typer.testing import CliRunner

from bot.engine.errors import ConfigurationError, NotAllowedError
from bot.engine.registry import Registry
from bot.server.app import HazelApp as Hazel
from bot.settings import Settings
from integrations.console import ConsoleChannel
from store.hooks import url_channel
from store.models import Actor, OutboxStatus, RunStatus
from tests.support.hook_receiver import HookReceiver, Received
from tests.workflows.doc import doc_workflow, flaky_workflow

SECRET = "hook-secret-4242"
ALICE = Actor(id="alice", channel="console", name="alice", person="alice")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def make(db_url: str, urls: list[str], *, clock: Clock | None = None, secret: str | None = SECRET) -> Hazel:
    registry = Registry()
    registry.add(doc_workflow())
    registry.add(flaky_workflow())
    settings = Settings(HAZEL_DATABASE_URL=db_url, HAZEL_HOOK_URLS=",".join(urls), HAZEL_HOOK_SECRET=secret,
                        HAZEL_HOOK_TIMEOUT_SEC=5)
    console = ConsoleChannel(console=Console(file=io.StringIO(), width=120), command="hazel")
    hazel = Hazel(settings, registry=registry, load_workflows=False, console=console,
                  **({"clock": clock} if clock else {}))
    hazel.prepare()
    return hazel


@pytest.fixture
def receiver() -> Iterator[HookReceiver]:
    with HookReceiver() as hooks:
        yield hooks


def signed(r: Received) -> dict:
    """The event, after checking the delivery as a receiver would."""
    expected = "sha256=" + hmac.new(SECRET.encode(), r.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(r.headers["X-Hazel-Signature"], expected)
    assert r.headers["Content-Type"] == "application/json"
    event = json.loads(r.body)
    assert r.headers["X-Hazel-Event"] == event["type"]
    return event


def hook_rows(hazel: Hazel, status: str | None = None) -> list:
    with hazel.store.read() as tx:
        return [m for m in tx.outbox.list(status=status, limit=1000) if m.kind == "hook.event"]


def test_run_events_reach_every_url_signed(db_url: str, receiver: HookReceiver) -> None:
    hazel = make(db_url, [receiver.url("/a"), receiver.url("/b?team=db")])
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=run.id)  # waits at review; delivers what is due
    request = hazel.pending_request(run_id=run.id)
    hazel.decide(run_id=run.id, action="approve", actor=ALICE)
    hazel.drive(run_id=run.id)

    by_path: dict[str, list[dict]] = {}
    for r in receiver.ok():
        by_path.setdefault(r.path, []).append(signed(r))
    assert set(by_path) == {"/a", "/b?team=db"}
    for events in by_path.values():
        assert [e["type"] for e in events] == ["run.waiting", "run.decided", "run.completed"]
        waiting, decided, completed = events
        assert waiting["run"] == {"id": run.id, "workflow": "doc", "workflow_version": 1, "status": "waiting"}
        assert waiting["request"]["id"] == request.id and waiting["request"]["point"] == "review"
        assert waiting["data"] == {"steps": ["draft"]}
        assert decided["data"]["action"] == "approve" and decided["data"]["settled"] is True
        assert decided["data"]["actor"] == {"id": "alice", "name": "alice", "channel": "console", "person": "alice"}
        assert decided["request"]["status"] == "decided" and decided["run"]["status"] == "waiting"
        assert completed["run"]["status"] == "completed" and completed["data"] == {"steps": ["publish"]}
    # One event, one id for every URL; one delivery id per URL, the same on every retry of it.
    assert [e["id"] for e in by_path["/a"]] == [e["id"] for e in by_path["/b?team=db"]]
    deliveries = [r.headers["X-Hazel-Delivery"] for r in receiver.ok()]
    assert len(set(deliveries)) == 6
    assert all(m.status is OutboxStatus.SENT for m in hook_rows(hazel))
    hazel.close()


def test_rejected_cancelled_failed_and_rewind_events(db_url: str, receiver: HookReceiver) -> None:
    hazel = make(db_url, [receiver.url("/hook")])
    rejected = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=rejected.id)
    hazel.decide(run_id=rejected.id, action="reject", actor=ALICE, payload={"reason": "not now"})
    hazel.rewind(run_id=rejected.id, actor=ALICE, to="review")
    cancelled = hazel.start(workflow="doc", input={"topic": "indexes"}, actor=ALICE)
    hazel.drive(run_id=cancelled.id)
    hazel.cancel(run_id=cancelled.id, actor=ALICE, reason="duplicate")
    failed = hazel.start(workflow="flaky", input={"topic": "vacuum"}, actor=ALICE)
    hazel.drive(run_id=failed.id)
    hazel.deliverer.deliver_due()

    events: dict[str, list[dict]] = {}
    for r in receiver.ok():
        event = signed(r)
        events.setdefault(event["run"]["id"], []).append(event)
    assert [e["type"] for e in events[rejected.id]] == ["run.waiting", "run.decided", "run.rejected",
                                                        "run.decided"]
    assert events[rejected.id][2]["data"] == {"by": "alice", "by_id": "alice", "by_channel": "console",
                                              "reason": "not now"}
    rewind = events[rejected.id][3]
    assert rewind["data"]["action"] == "rewind" and rewind["request"] is None
    assert rewind["run"]["status"] == "rejected"  # as the rewind found it (README: before it moved the run on)
    assert [e["type"] for e in events[cancelled.id]] == ["run.waiting", "run.cancelled"]
    assert events[cancelled.id][1]["data"] == {"by": "alice", "by_id": "alice", "by_channel": "console",
                                               "reason": "duplicate"}
    [fail] = events[failed.id]
    assert fail["type"] == "run.failed" and fail["data"]["step"] == "work"
    assert "first attempt fails" in fail["data"]["error"]
    hazel.close()


def test_events_exist_only_with_what_caused_them(db_url: str, receiver: HookReceiver) -> None:
    hazel = make(db_url, [receiver.url("/hook")])
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.runner.drive(hazel.runner.claim(run.id))
    assert [m.payload["event"]["type"] for m in hook_rows(hazel)] == ["run.waiting"]
    with pytest.raises(NotAllowedError):  # refused: nothing recorded, no event
        hazel.decide(run_id=run.id, action="approve", actor=Actor(id="mallory", channel="api", name="mallory"))
    assert len(hook_rows(hazel)) == 1
    hazel.close()
    quiet = make(db_url, [])  # no hook configured: no rows at all
    other = quiet.start(workflow="doc", input={"topic": "other"}, actor=ALICE)
    quiet.drive(run_id=other.id)
    quiet.decide(run_id=other.id, action="approve", actor=ALICE)
    quiet.drive(run_id=other.id)
    assert len(hook_rows(quiet)) == 1  # the first engine's waiting event only
    quiet.close()


def test_failures_are_retried_with_backoff(db_url: str, receiver: HookReceiver) -> None:
    clock = Clock()
    hazel = make(db_url, [receiver.url("/hook")], clock=clock)
    receiver.answer(503, headers={"Retry-After": "30"})
    receiver.answer(429, headers={"Retry-After": "5"})
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=run.id)
    [row] = hook_rows(hazel)
    assert row.status is OutboxStatus.PENDING and row.attempts == 1 and "answered 503" in row.last_error
    assert row.next_attempt_at >= clock.now + timedelta(seconds=30)  # the receiver's Retry-After
    assert hazel.deliverer.deliver_due() == 0  # not due yet: nothing sent
    clock.advance(40)
    hazel.deliverer.deliver_due()
    [row] = hook_rows(hazel)
    assert row.attempts == 2 and "answered 429" in row.last_error
    clock.advance(10)
    hazel.deliverer.deliver_due()
    [row] = hook_rows(hazel)
    assert row.status is OutboxStatus.SENT and row.attempts == 3
    statuses = [r.status for r in receiver.received]
    assert statuses == [503, 429, 200]
    assert len({r.headers["X-Hazel-Delivery"] for r in receiver.received}) == 1  # the same delivery, retried
    assert len({r.body for r in receiver.received}) == 1
    audit = [e.action for e in hazel.audit(run_id=run.id)]
    assert "outbox.failed" in audit
    hazel.close()


def test_dead_after_the_last_attempt_visible_in_hazel_outbox(db_url: str, receiver: HookReceiver,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    hazel = make(db_url, [receiver.url("/down"), receiver.url("/gone")], clock=clock)
    hazel.deliverer.max_attempts = 3
    receiver.answer(500, times=3, path="/down")  # /down fails three times...
    receiver.answer(410, path="/gone")  # ...and /gone refuses for good on its first attempt
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=run.id)
    for _ in range(3):
        clock.advance(3600)
        hazel.deliverer.deliver_due()
    by_channel = {url_channel(receiver.url(f"/{name}")): name for name in ("down", "gone")}
    rows = {by_channel[m.channel]: m for m in hook_rows(hazel)}
    assert rows["down"].status is OutboxStatus.DEAD and rows["down"].attempts == 3
    assert rows["gone"].status is OutboxStatus.DEAD and rows["gone"].attempts == 1
    assert "answered 410" in rows["gone"].last_error
    assert hazel.pending_request(run_id=run.id) is not None  # a dead notification never loses the request
    assert [e.action for e in hazel.audit(run_id=run.id)].count("outbox.dead") == 2

    from bot.cli import app

    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_HOOK_URLS", f"{receiver.url('/down')},{receiver.url('/gone')}")
    monkeypatch.setenv("HAZEL_HOOK_SECRET", SECRET)
    cli = CliRunner()
    listed = cli.invoke(app, ["outbox", "--status", "dead", "--json"])
    assert listed.exit_code == 0, listed.output
    shown = json.loads(listed.stdout)
    assert {m["id"] for m in shown["messages"]} == {rows["down"].id, rows["gone"].id}
    assert {m["channel"].split(":")[0] for m in shown["messages"]} == {"hook"} and shown["backlog"]["dead"] == 2
    assert SECRET not in listed.output
    assert {m["payload"]["url"] for m in shown["messages"]} == {receiver.url("/down"), receiver.url("/gone")}
    before = len(receiver.ok())
    retried = cli.invoke(app, ["outbox", "retry", str(rows["down"].id), "--json"])
    assert retried.exit_code == 0, retried.output
    assert json.loads(retried.stdout) == {"requeued": 1, "sent": 1}
    [again] = receiver.ok()[before:]
    assert again.path == "/down" and signed(again)["type"] == "run.waiting"
    hazel.close()


def test_network_errors_are_retried(db_url: str) -> None:
    clock = Clock()
    with HookReceiver() as closed:
        url = closed.url("/hook")  # stopped on leaving the block: nothing listens there any more
    hazel = make(db_url, [url], clock=clock)
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=run.id)
    [row] = hook_rows(hazel)
    assert row.status is OutboxStatus.PENDING and row.attempts == 1 and "ConnectError" in row.last_error
    assert hazel.get(run_id=run.id).status is RunStatus.WAITING
    hazel.close()


def test_misconfigured_hooks_are_refused(db_url: str) -> None:
    with pytest.raises(ConfigurationError, match="HAZEL_HOOK_SECRET is not"):
        make(db_url, ["http://127.0.0.1:9/hook"], secret=None)
    with pytest.raises(ValidationError, match="'ftp://example.com/x' is not an http"):  # a malformed setting
        make(db_url, ["ftp://example.com/x"])


def test_hooks_load_the_certificate_bundle_once(db_url: str, receiver: HookReceiver,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Six hook requests verify servers with one TLS context: the bundle of trusted certificates is loaded at
    most once in the process, not once per request (17-20 ms of CPU each, as ``httpx.post`` does by default)."""
    import ssl

    from bot.ops import hooks

    hooks.tls_context.cache_clear()
    loads: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append(args or kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    hazel = make(db_url, [receiver.url("/a"), receiver.url("/b")])
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=run.id)
    hazel.decide(run_id=run.id, action="approve", actor=ALICE)
    hazel.drive(run_id=run.id)
    hazel.close()
    assert len(receiver.ok()) == 6  # run.waiting, run.decided, run.completed to each URL
    assert len(loads) <= 1, loads


def test_a_receiver_that_is_down_holds_back_no_other_receiver(db_url: str, receiver: HookReceiver) -> None:
    """Each URL's events are delivered in order on their own: while /down answers 500 (its run.waiting retried
    with backoff), /ok gets run.waiting, run.decided and run.completed as they happen (a fresh-user finding:
    on one outbox channel for every URL, /ok's later events waited behind /down's row, for hours)."""
    clock = Clock()
    hazel = make(db_url, [receiver.url("/ok"), receiver.url("/down")], clock=clock)
    receiver.answer(500, times=100, path="/down")
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=run.id)
    hazel.decide(run_id=run.id, action="approve", actor=ALICE)
    hazel.drive(run_id=run.id)
    hazel.deliverer.deliver_due()
    assert [r.event["type"] for r in receiver.ok()] == ["run.waiting", "run.decided", "run.completed"]
    assert {r.path for r in receiver.ok()} == {"/ok"}
    down = [r.event["type"] for r in receiver.received if r.path == "/down"]
    assert down and set(down) == {"run.waiting"}  # /down's own order holds: nothing overtook its first event
    channels = {m.id: m.channel for m in hook_rows(hazel)}
    assert set(channels.values()) == {url_channel(receiver.url("/ok")), url_channel(receiver.url("/down"))}
    assert len(set(channels.values())) == 2 and all(c.startswith("hook:") for c in channels.values())
    assert all(len(c) == len("hook:") + 12 and "/" not in c for c in channels.values())  # a digest, not the URL
    hazel.close()


def test_a_process_without_the_hook_secret_leaves_hook_events_to_one_with_it(db_url: str, receiver: HookReceiver,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    """A process without ``HAZEL_HOOK_SECRET`` cannot sign hook events: it leaves their rows pending, as it
    leaves Slack's to a process with Slack's settings, instead of failing them (a fresh-user finding: a second
    ``serve`` and a shell without the hook settings took the rows and spent their attempts, 25 in all)."""
    clock = Clock()
    emitter = make(db_url, [receiver.url("/a")], clock=clock)
    emitter.deliverer.senders.clear()  # (this one only writes: the rows wait for a deliverer)
    run = emitter.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    emitter.drive(run_id=run.id)
    [row] = hook_rows(emitter)
    unsigned = make(db_url, [], clock=clock, secret=None)
    unsigned.deliverer.deliver_due()
    [row] = hook_rows(unsigned)
    assert row.status is OutboxStatus.PENDING and row.attempts == 0 and row.last_error is None
    assert receiver.received == []
    elsewhere = make(db_url, [receiver.url("/b")], clock=clock)  # the secret, not that URL (a row holds none:
    elsewhere.deliverer.deliver_due(run_ids=[run.id])  # s33 F3): it leaves the row to a process that has it,
    [row] = hook_rows(elsewhere)  # and shows nothing of it on its console ("unknown outbox kind" was logged)
    assert row.status is OutboxStatus.PENDING and row.attempts == 0 and receiver.received == []
    assert not [r for r in caplog.records if "hook.event" in r.getMessage()], caplog.records
    signer = make(db_url, [receiver.url("/a")], clock=clock)  # the secret and the URL: it delivers the row
    signer.deliverer.deliver_due()
    [row] = hook_rows(signer)
    assert row.status is OutboxStatus.SENT and [signed(r)["type"] for r in receiver.ok()] == ["run.waiting"]
    for h in (emitter, unsigned, elsewhere, signer):
        h.close()


def test_hazel_outbox_json_names_a_hook_url_without_its_credentials(db_url: str, receiver: HookReceiver,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh-user finding (s28 F7): the table, the logs and the audit log named a hook URL without its user,
    password and query; ``hazel outbox --json`` printed them."""
    url = receiver.url("/hook").replace("http://", "http://user:s3cretpw@") + "?token=tok123"
    hazel = make(db_url, [url])
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=run.id)
    from bot.cli import app

    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_HOOK_URLS", url)  # (the row holds no URL: the CLI names it from its settings)
    monkeypatch.setenv("HAZEL_HOOK_SECRET", SECRET)
    listed = CliRunner().invoke(app, ["outbox", "--status", "sent", "--json"])
    assert listed.exit_code == 0, listed.output
    [message] = [m for m in json.loads(listed.stdout)["messages"] if m["kind"] == "hook.event"]
    assert message["payload"]["url"] == receiver.url("/hook")
    assert "s3cretpw" not in listed.output and "tok123" not in listed.output and "user:" not in listed.output
    monkeypatch.delenv("HAZEL_HOOK_URLS")  # a shell without it: the URL is not known, nothing else is lost
    monkeypatch.delenv("HAZEL_HOOK_SECRET")
    listed = CliRunner().invoke(app, ["outbox", "--status", "sent", "--json"])
    [message] = [m for m in json.loads(listed.stdout)["messages"] if m["kind"] == "hook.event"]
    assert message["payload"]["url"] is None and message["channel"] == url_channel(url)
    # s33 F3: the database holds no part of the URL (its password, its query's token)
    from sqlalchemy import text

    with hazel.store.engine.connect() as conn:
        stored = " ".join(str(row) for row in conn.execute(text("SELECT payload, last_error FROM hazel_outbox")))
    assert "s3cretpw" not in stored and "tok123" not in stored and "/hook" not in stored, stored
    hazel.close()


@pytest.mark.parametrize(("url", "shown"), [
    ("https://hooks.slack.com/services/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",
     "https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/…"),
    ("https://discord.com/api/webhooks/112233445566778899/" + "Zx9" * 22, "https://discord.com/api/webhooks/…/…"),
    ("https://acme.webhook.office.com/webhookb2/0f8fad5b-d9cb-469f-a165-70867728950e@72f988bf/IncomingWebhook/"
     "3f2504e04f8911d39a0c0305e82c3301/ab12", "https://acme.webhook.office.com/webhookb2/…/IncomingWebhook/…/ab12"),
    ("https://ops.example.com:8443/hazel/deployment-notifications?key=k#f",
     "https://ops.example.com:8443/hazel/deployment-notifications"),
])
def test_a_hook_url_is_shown_without_a_token_in_its_path(url: str, shown: str) -> None:
    """A finding of s29 (F10): a hook URL's user, password, query and fragment were hidden, its path shown
    whole, and Slack's, Discord's and Teams' webhook URLs carry their secret in the path."""
    from bot.ops.hooks import url_shown

    assert url_shown(url) == shown


def test_a_hook_urls_secrets_never_reach_the_log(db_url: str, receiver: HookReceiver,
                                                 serve_logging: None) -> None:  # noqa: ARG001
    """s33 F3: at ``HAZEL_LOG_LEVEL=DEBUG`` httpx's own line named the whole hook URL, its password, its query's
    token and a token in its path; they are redacted as every secret setting is."""
    import logging

    from bot.ops.logs import configure_logging

    url = (receiver.url("/hooks/T0ABCDEFGH1/XyzSecretPath99999").replace("http://", "http://hookuser:HookPw12345@")
           + "?token=HookQueryTok777")
    hazel = make(db_url, [url])
    stream = io.StringIO()
    configure_logging(Settings(HAZEL_DATABASE_URL=db_url, HAZEL_HOOK_URLS=url, HAZEL_HOOK_SECRET=SECRET,
                               HAZEL_LOG_LEVEL="debug"), stream=stream)
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=ALICE)
    hazel.drive(run_id=run.id)
    logging.getLogger().handlers[-1].flush()
    assert [signed(r)["type"] for r in receiver.ok()] == ["run.waiting"]
    logged = stream.getvalue()
    assert "HTTP Request: POST" in logged, logged  # (httpx's line, at DEBUG)
    for secret in ("HookPw12345", "HookQueryTok777", "XyzSecretPath99999"):  # (a path token: 16+)
        assert secret not in logged, (secret, logged)
    hazel.close()
