"""A fresh Slack user with a people file (``HAZEL_PEOPLE_FILE``): Sam starts a run, Priya is its approver (listed
by name and by her Slack id). The run's starter may rewind it as he may retry or cancel it (README: "`/hazel
rewind`, `retry` and `cancel` need who started the run or an approver"); the engine's messages name people, not
their Slack user names, and each person once; an edit modal that leaves an entry of the scripts blank is
refused under that entry, nothing stored."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from bot.cli import render
from store.models import Approvers, RunStatus
from tests.bot.slack.conftest import OUTSIDER, PRIYA, STARTER, SlackEnv, example

SAM = STARTER  # (the people file says this Slack user is sam)


@pytest.fixture
def env(make_env, tmp_path, monkeypatch) -> SlackEnv:  # noqa: ANN001
    people = tmp_path / "people.toml"
    people.write_text(f'[people.priya]\nslack = ["{PRIYA}"]\n\n[people.sam]\nslack = ["{SAM}"]\n', encoding="utf-8")
    monkeypatch.setenv("HAZEL_PEOPLE_FILE", str(people))
    made: SlackEnv = make_env(example(approvers=Approvers(people=("priya",), slack_users=(PRIYA,))))
    assert made.hazel.people.person_of("slack", SAM) == "sam"
    return made


def _text(table) -> str:  # noqa: ANN001
    out = io.StringIO()
    Console(file=out, width=200).print(table)
    return out.getvalue()


def test_the_starter_may_rewind_from_slack_as_he_may_retry_or_cancel(env: SlackEnv) -> None:
    run_id = env.start(by=SAM)
    env.settle()
    env.request_message(run_id, "review_plan")
    refused = env.sender.command(OUTSIDER, f"rewind {run_id} draft_plan shorter please", name="u")
    assert refused.status_code == 200
    assert refused.json()["text"] == (  # (an identity that is no person of the file: its Slack name)
        "🚫 u may not rewind at 'Approve the migration plan': only priya may, or who started the run"), \
        refused.json()
    response = env.sender.command(SAM, f"rewind {run_id} draft_plan shorter please", name="u")
    assert response.status_code == 200, response.text
    assert "rewound to checkpoint #" in response.json()["text"], response.json()
    rewind = env.hazel.decisions(run_id=run_id)[-1]
    assert (rewind.action.value, rewind.person, rewind.payload["feedback"]) == ("rewind", "sam", "shorter please")
    env.settle()
    assert env.hazel.get(run_id=run_id).branch == 1
    assert env.hazel.pending_request(run_id=run_id).point == "review_plan"


def test_messages_name_the_person_once_not_the_slack_user_name(env: SlackEnv) -> None:
    run_id = env.start(by=SAM)
    env.settle()
    message = env.request_message(run_id, "review_plan")
    # the request names its approver once: priya is her Slack id (a mention in Slack)
    assert "Approvers: <@U0000000001>" in str(message.blocks) and "priya, <@" not in str(message.blocks)

    assert env.sender.click(SAM, "approve", message, name="u").status_code == 200
    refusal = env.ephemeral(SAM, "may not approve")["text"]
    assert "sam may not approve at 'Approve the migration plan': only priya may" in refusal, refusal
    assert "u may not" not in refusal and "<@U0000000001>" not in refusal

    assert env.sender.click(PRIYA, "approve", message, name="u").status_code == 200
    env.wait(lambda: env.hazel.decisions(run_id=run_id), "priya's approval")
    env.settle()
    assert env.pending(run_id).point == "review_artefacts"
    cancelled = env.sender.command(SAM, f"cancel {run_id} not now", name="u")
    assert cancelled.json()["text"] == f"🚫 Run `{run_id}` is cancelled.", cancelled.json()
    assert env.hazel.get(run_id=run_id).status is RunStatus.CANCELLED
    request = env.hazel.requests(run_id=run_id)[-1]
    assert request.decided_by == "sam"
    env.settle()
    closed = env.wait(lambda: (m := env.fake.message(request.message_ref["channel"], request.message_ref["ts"]))
                      and "Cancelled by" in str(m.blocks) and m, "the cancelled request's message")
    # (named as a decider is: a mention, which Slack shows by name; never the payload's user name "u")
    assert f"Cancelled by <@{SAM}>" in str(closed.blocks) and "by u " not in str(closed.blocks), closed.blocks
    thread = env.wait(lambda: [m.text for m in env.fake.channel_messages(closed.channel, thread_ts=closed.ts)
                               if "cancelled by" in m.text], "the thread's cancelled line")
    assert thread == [f"🚫 Run `{run_id}` cancelled by <@{SAM}>: not now"], thread  # (it said "sam": s28 F10)

    run = env.hazel.get(run_id=run_id)
    assert render.started_by(run) == "sam"
    runs = _text(render.runs_table([run], {}))
    assert " sam " in runs and SAM not in runs
    history = _text(render.history_tree(run, env.hazel.checkpoints(run_id=run_id),
                                        env.hazel.decisions(run_id=run_id)))
    assert "approve by priya" in history and "by u" not in history, history
    who = {(e.action, e.person) for e in env.hazel.audit(run_id=run_id)}
    assert ("run.started", "sam") in who and ("decision.approve", "priya") in who


def test_an_edit_modal_leaving_a_script_blank_is_refused_under_it(env: SlackEnv) -> None:
    from tests.bot.slack.test_slack_end_to_end import edit_modal

    run_id = env.start(by=SAM)
    env.settle()
    env.sender.click(PRIYA, "approve", env.request_message(run_id, "review_plan"), name="priya")
    env.wait(lambda: env.hazel.decisions(run_id=run_id), "priya's approval")  # (decided after Bolt's ack)
    env.settle()
    modal, fields = edit_modal(env, run_id, "review_artefacts")
    scripts = env.hazel.state_at(run_id=run_id).scripts
    first, second = list(fields)
    request = env.pending(run_id)
    for blank in ("   ", " \n\t"):
        response = env.sender.submit(PRIYA, modal, {first: fields[first], second: blank}, name="priya")
        assert response.status_code == 200
        body = response.json()
        assert body["response_action"] == "errors", body
        assert list(body["errors"]) == [second], body
        assert "blank (only whitespace)" in body["errors"][second], body
    assert env.pending(run_id) == request and env.hazel.state_at(run_id=run_id).scripts == scripts
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve"]
