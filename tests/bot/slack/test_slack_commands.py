"""``/hazel``: every subcommand, helpful answers to unknown subcommands and bad run ids, permissions, and a
resent ``start`` that starts nothing new."""

from __future__ import annotations

from urllib.parse import parse_qsl

from store.models import Actor
from tests.bot.slack.conftest import OUTSIDER, PRIYA, STARTER, SlackEnv


def reply(env: SlackEnv, user: str, text: str, **kwargs) -> str:  # noqa: ANN003
    response = env.sender.command(user, text, **kwargs)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body.get("response_type", "ephemeral") == "ephemeral"
    return body["text"]


def test_help_unknown_subcommands_and_bad_run_ids(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    assert "/hazel runs" in reply(env, PRIYA, "") and "/hazel start WORKFLOW" in reply(env, PRIYA, "help")
    unknown = reply(env, PRIYA, "frobnicate 42")
    assert unknown.startswith("I don't know `frobnicate`") and "/hazel status RUN" in unknown
    for text in ("status zzzzzz", "history 1234", "cancel nope", "retry nope", "rewind nope draft_plan"):
        answer = reply(env, PRIYA, text)
        assert "no run" in answer and "/hazel runs" in answer, (text, answer)
    assert "Usage: `/hazel status RUN`" in reply(env, PRIYA, "status")
    assert "Usage" in reply(env, PRIYA, "rewind")


def test_runs_status_and_history(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    mine = reply(env, PRIYA, "runs")
    waiting, in_flight = mine.split("*In flight*")
    assert run_id in waiting and "Approve the migration plan" in waiting and run_id in in_flight
    theirs = reply(env, OUTSIDER, "runs")
    assert "Nothing." in theirs.split("*In flight*")[0] and run_id in theirs
    status = reply(env, OUTSIDER, f"status {run_id[:6]}")
    assert f"`{run_id}`" in status and "*waiting*" in status and "waits at *Approve the migration plan*" in status
    history = reply(env, PRIYA, f"history {run_id}")
    assert "#0 start → draft_plan" in history and "#1 draft_plan → review_plan" in history and "◀ *head*" in history


def test_rewind_retry_cancel_with_permissions(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    refused = reply(env, OUTSIDER, f"rewind {run_id} draft_plan shorter please")
    assert refused.startswith("🚫") and env.hazel.decisions(run_id=run_id) == []
    answer = reply(env, PRIYA, f"rewind {run_id} draft_plan shorter please")
    assert answer.startswith(f"↩️ Run `{run_id}` rewound to checkpoint #0") and "`draft_plan`" in answer
    env.settle()
    assert "shorter please" in env.hazel.state_at(run_id=run_id).plan
    env.hazel.rewind(run_id=run_id, actor=Actor(channel="slack", id=PRIYA), to=0, edits={"request": "Add a column"},
                     claim=False)
    assert "_set_ request → draft_plan" in reply(env, PRIYA, f"history {run_id}")  # the fields a rewind set
    env.settle()
    refused = reply(env, PRIYA, f"retry {run_id}")
    assert refused == (f"run {run_id} is waiting on a steering request: answer it instead; retry resumes a failed run, "
                       "or continues a ready run that no process is continuing"), refused
    refused = reply(env, OUTSIDER, f"cancel {run_id} no")
    assert refused.startswith("🚫") and "&lt;@" not in refused, refused  # not an escaped mention, read literally
    assert f"only Slack user {PRIYA}" in refused, refused
    assert reply(env, STARTER, f"cancel {run_id} changed my mind") == f"🚫 Run `{run_id}` is cancelled."
    assert env.hazel.get(run_id=run_id).status.value == "cancelled"
    assert "nothing to cancel" in reply(env, STARTER, f"cancel {run_id}")
    assert reply(env, PRIYA, f"retry {run_id}").startswith(f"run {run_id} is cancelled: nothing to retry (rewind it to run it again from an earlier checkpoint); ")
    refused_actions = [(e.actor_id, e.detail.get("attempted")) for e in env.hazel.audit(run_id=run_id)
                       if e.action == "decision.refused"]
    assert (OUTSIDER, "rewind") in refused_actions and (OUTSIDER, "cancel") in refused_actions


def test_start_validates_its_input_and_a_resent_command_starts_one_run(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    assert "not valid JSON" in reply(env, STARTER, "start migration-plan {oops")
    assert "JSON object" in reply(env, STARTER, "start migration-plan [1]")
    assert "unknown workflow 'nope'" in reply(env, STARTER, "start nope")
    assert "invalid input" in reply(env, STARTER, 'start migration-plan {"request": "x"}')
    assert "workflows: `migration-plan`" in reply(env, STARTER, "start")
    assert env.hazel.runs() == []
    body = env.sender.command_body(STARTER, 'start migration-plan {"request": "add an index"}')
    first = env.sender.post(body).json()["text"]
    again = env.sender.post(body, retry_num=1).json()["text"]
    run_id = first.split("`")[1]
    assert first.startswith("▶️ Started run") and again == f"Run `{run_id}` was started by this command already."
    assert [r.id for r in env.hazel.runs()] == [run_id]
    assert env.hazel.get(run_id=run_id).started_by == STARTER and env.hazel.get(run_id=run_id).started_via == "slack"
    # another command under the same trigger id is not the same command: it is answered as itself
    trigger = dict(parse_qsl(body))["trigger_id"]
    other = env.sender.command(STARTER, "start nope", trigger_id=trigger).json()["text"]
    assert "unknown workflow 'nope'" in other, other


def test_a_start_resent_after_a_restart_starts_nothing_new(make_env) -> None:  # noqa: ANN001
    """Slack resends a command it got no answer to (``X-Slack-Retry-Num``): when the server that took it restarted
    meanwhile (or the resend reaches another server on the database), the run it started is found by the
    engine's start key, not by a memory that the restart lost."""
    first_server: SlackEnv = make_env()
    body = first_server.sender.command_body(STARTER, 'start migration-plan {"request": "add an index"}')
    run_id = first_server.sender.post(body).json()["text"].split("`")[1]
    restarted: SlackEnv = make_env()  # (a new process on the same database)
    again = restarted.sender.post(body, retry_num=1).json()["text"]
    assert again == f"Run `{run_id}` was started by this command already.", again
    assert [r.id for r in restarted.hazel.runs()] == [run_id]
    started = [e for e in restarted.hazel.audit(run_id=run_id) if e.action == "run.started"]
    assert len(started) == 1, started


def test_a_command_whose_text_says_payload_is_read_as_a_command(make_env) -> None:  # noqa: ANN001
    """Bolt reads any form body holding the word ``payload`` as an interactivity payload: a slash command whose
    text said it had an empty body and was answered 400."""
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    answer = reply(env, PRIYA, f"rewind {run_id} draft_plan the payload section is too short")
    assert answer.startswith(f"↩️ Run `{run_id}` rewound to checkpoint #0"), answer
    assert env.hazel.decisions(run_id=run_id)[-1].payload["feedback"] == "the payload section is too short"
    assert "/hazel start WORKFLOW" in reply(env, PRIYA, "help payload")
