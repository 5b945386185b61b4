"""A process without the Slack settings (a CLI command in a shell without ``SLACK_BOT_TOKEN``) acting on a run
whose request ``hazel serve`` posted in Slack: it shows the run's notifications on its console but leaves them
pending, so that the process with Slack updates the message (no live buttons left on a settled request)."""

from __future__ import annotations

import json

import io
import logging

from rich.console import Console

from bot.engine.registry import Registry
from bot.server.app import HazelApp as Hazel
from bot.server.wiring import channels_from_settings
from bot.settings import Settings
from integrations.console import ConsoleChannel
from store.models import Actor, OutboxKind

from tests.bot.slack.conftest import SlackEnv, example


def _hazel_outbox(db_url: str, monkeypatch, *args: str) -> str:  # noqa: ANN001
    from typer.testing import CliRunner

    from bot.cli import app, common

    monkeypatch.setattr(common.out, "width", 300)
    for name in ("SLACK_BOT_TOKEN", "JIRA_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HAZEL_DATABASE_URL", db_url)
    monkeypatch.setenv("HAZEL_WORKFLOWS", "examples/migration_plan.py")
    result = CliRunner().invoke(app, ["outbox", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_a_cli_without_slack_settings_leaves_the_slack_notifications_to_serve(make_env, db_url: str,  # noqa: ANN001
                                                                              caplog, monkeypatch) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    posted = env.request_message(run_id, "review_plan")
    assert posted.blocks and any(b.get("type") == "actions" for b in posted.blocks)  # live buttons
    request = env.pending(run_id)
    assert request is not None

    settings = Settings(HAZEL_DATABASE_URL=db_url)  # the shell: no SLACK_BOT_TOKEN
    registry = Registry()
    registry.add(example())
    out = io.StringIO()
    shell = Hazel(settings, registry=registry, load_workflows=False, channels=channels_from_settings(settings),
                  console=ConsoleChannel(console=Console(file=out, width=200)))
    with caplog.at_level(logging.WARNING, logger="hazel.outbox"):
        outcome = shell.decide(run_id=run_id, action="approve", actor=Actor(id="ops", channel="console"),
                               request_id=request.id, claim=True)
        assert outcome.settled
        shell.drive(run_id=run_id)  # as `hazel approve` does: runs on, delivers that run's notifications
    assert out.getvalue().strip(), "the shell shows the notifications on its console"
    with shell.store.read() as tx:
        waiting = {m.kind for m in tx.outbox.list(status="pending", run_id=run_id)}
    assert OutboxKind.REQUEST_CLOSED.value in waiting, waiting  # not consumed by the shell
    assert "not configured" in caplog.text and "stay pending" in caplog.text, caplog.text
    shown = out.getvalue()
    shell.deliver_due(run_ids=[run_id])
    assert out.getvalue() == shown, "each notification is shown once per process"
    shell.close()
    listed = _hazel_outbox(db_url, monkeypatch)  # `hazel outbox` in that shell says why they wait
    assert "wait for a hazel serve or hazel worker with the Slack settings" in listed, listed
    assert listed.startswith("backlog: ")
    assert _hazel_outbox(db_url, monkeypatch, "--run", run_id).startswith("backlog (all runs): ")
    as_json = json.loads(_hazel_outbox(db_url, monkeypatch, "--json"))
    assert as_json["waiting_for_settings"] == ["slack"], as_json

    updates = len(env.fake.calls_to("chat.update", ok=True))
    env.settle()  # hazel serve, which has Slack, delivers them
    assert len(env.fake.calls_to("chat.update", ok=True)) > updates
    settled = env.fake.message(request.message_ref["channel"], request.message_ref["ts"])
    assert not any(b.get("type") == "actions" for b in settled.blocks), settled.blocks  # no live buttons
    with env.hazel.store.read() as tx:
        assert [m for m in tx.outbox.list(status="pending", run_id=run_id)
                if m.channel.startswith("slack")] == []
