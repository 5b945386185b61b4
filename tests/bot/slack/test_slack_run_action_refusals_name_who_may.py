"""``/hazel cancel`` and ``/hazel retry`` by someone who may not name who may, as a rewind refusal does (the
engine's text, ``bot.engine.permissions.run_action_refusal``): real signed slash commands over HTTP, Slack's
Web API faked on loopback, on SQLite and PostgreSQL."""

from __future__ import annotations

from tests.bot.slack.conftest import OUTSIDER, PRIYA, STARTER, SlackEnv


def test_cancel_and_retry_refusals_name_the_approvers(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start(by=STARTER)
    env.settle()
    env.request_message(run_id)
    for verb in ("cancel", "retry"):
        response = env.sender.command(OUTSIDER, f"{verb} {run_id}")
        assert response.status_code == 200, response.text
        text = response.json()["text"]
        # (the command's answer names them in plain words, as the CLI does: no mention syntax, escaped or not)
        assert f"may not {verb} run {run_id}: only Slack user {PRIYA}, Slack group S0000000001, the console " \
               "operator may, or who started the run" in text, text
    assert env.pending(run_id) is not None  # nothing changed
    refused = [e for e in env.hazel.audit(run_id=run_id) if e.action == "decision.refused"]
    assert [e.detail["attempted"] for e in refused] == ["cancel", "retry"]
    assert all("or who started the run" in e.detail["reason"] for e in refused)
