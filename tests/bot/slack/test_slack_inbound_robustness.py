"""/slack/events while Slack's Web API is down (no auth.test per request), malformed signed payloads (400, not
500 or 404), and click de-duplication per user."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from tests.bot.slack.conftest import PRIYA, SAM, STARTER, SlackEnv
from tests.bot.slack.test_slack_decisions import quorum_workflow


def test_clicks_and_commands_are_handled_while_auth_test_cannot_be_reached(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    env.fake.fail_connections("auth.test", times=None)  # from the start: Bolt cached one that succeeded
    run_id = env.start()
    env.settle()
    message = env.request_message(run_id)
    assert env.sender.command(PRIYA, "runs").status_code == 200
    response = env.sender.click(PRIYA, "approve", message)
    assert response.status_code == 200, response.text
    env.wait(lambda: env.hazel.decisions(run_id=run_id), "the approval to be recorded")
    assert [d.action for d in env.hazel.decisions(run_id=run_id)] == ["approve"]


@pytest.mark.parametrize("payload", [
    {"type": "block_actions", "actions": "x"},
    {"type": "block_actions", "user": {"id": PRIYA}, "actions": "x"},
    {"type": "block_actions", "user": {"id": PRIYA}, "actions": ["x", 1]},
    {"type": "block_actions", "user": {"id": PRIYA}, "actions": []},
    {"type": "block_actions", "user": {"id": PRIYA}, "actions": [{"value": "1"}]},
    {"type": "block_actions", "user": {"id": PRIYA}, "actions": [{"action_id": "hazel_approve", "value": {}}]},
    {"type": "block_actions", "user": "x", "actions": [{"action_id": "hazel_approve", "value": "1"}]},
    {"type": "view_submission", "user": {"id": PRIYA}, "view": "x"},
    {"type": "view_submission", "user": {"id": PRIYA}, "view": {"id": "V1", "type": "modal",
                                                                  "callback_id": "hazel_reject", "state": "x"}},
    {"type": "view_submission", "user": {"id": PRIYA}, "view": {"id": "V1"}},
])
def test_a_malformed_signed_payload_answers_400(make_env, payload) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    response = env.sender.post(urlencode({"payload": json.dumps(payload)}))
    assert response.status_code == 400, response.text
    assert response.text.startswith("malformed Slack request")


def test_a_signed_body_that_is_not_a_slack_payload_answers_400(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    response = env.sender.post("hello=world")
    assert response.status_code == 400, response.text
    assert "not a Slack payload" in response.text
    assert env.sender.post(json.dumps({"hello": "world"}), content_type="application/json").status_code == 400


def test_clicks_by_two_users_with_the_same_trigger_id_are_two_decisions(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env(quorum_workflow())
    run_id = env.start("quorum", {"text": "ship it"}, by=STARTER)
    env.settle()
    message = env.request_message(run_id)
    trigger = env.fake.new_trigger_id()
    assert env.sender.click(PRIYA, "approve", message, trigger_id=trigger).status_code == 200
    env.ephemeral(PRIYA, "Your approval is counted: 1 of 2")
    assert env.sender.click(PRIYA, "approve", message, trigger_id=trigger, retry_num=1).status_code == 200
    assert env.sender.click(SAM, "approve", message, trigger_id=trigger).status_code == 200
    env.wait(lambda: len(env.hazel.decisions(run_id=run_id)) == 2, "both approvals")
    assert sorted(d.actor_id for d in env.hazel.decisions(run_id=run_id)) == sorted([PRIYA, SAM])


def test_submissions_by_two_users_under_one_view_id_are_two_decisions(make_env) -> None:  # noqa: ANN001
    """A modal submission was known by its view id alone: one from another user (another run, another request)
    under the same id was answered as a success and recorded nothing, not even a refusal (a fresh-user
    finding, s28 F5; Slack's view ids are unique, so this guards against a client that reuses them). The
    key is the user's and the view's now, as a click's is the user's and the trigger's."""
    env: SlackEnv = make_env()
    first, second = env.start(), env.start(data={"request": "drop users.legacy"})
    env.settle()
    modal = env.open_form(PRIYA, "feedback", env.request_message(first))
    assert env.sender.submit(PRIYA, modal, {"text": "split it in two"}).status_code == 200
    env.wait(lambda: env.hazel.decisions(run_id=first), "priya's feedback")
    other = env.open_form(SAM, "reject", env.request_message(second), name="sam")
    response = env.sender.submit(SAM, {**other, "id": modal["id"]}, {"reason": "not this quarter"}, name="sam")
    assert response.status_code == 200 and response.text in ("", "null"), response.text
    [rejected] = env.wait(lambda: env.hazel.decisions(run_id=second), "sam's rejection")
    assert rejected.actor_id == SAM and rejected.action.value == "reject"
    # the same submission again (Slack's resend) is the same delivery: nothing more
    assert env.sender.submit(SAM, {**other, "id": modal["id"]}, {"reason": "not this quarter"}, name="sam",
                             retry_num=1).status_code == 200
    assert len(env.hazel.decisions(run_id=second)) == 1 and len(env.hazel.decisions(run_id=first)) == 1
    # the same user under that view id on another run's request (s30 F9: dropped as the earlier decision's
    # duplicate, nothing decided nor audited): the key names the run and the request too
    third = env.start(data={"request": "rename orders.total"})
    env.settle()
    again = env.open_form(PRIYA, "feedback", env.request_message(third))
    assert env.sender.submit(PRIYA, {**again, "id": modal["id"]}, {"text": "one index only"}).status_code == 200
    [taken] = env.wait(lambda: env.hazel.decisions(run_id=third), "priya's feedback on the third run")
    assert taken.actor_id == PRIYA and taken.payload["text"] == "one index only"


def test_building_the_app_logs_no_ignored_token_warning(make_env, caplog, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")  # as hazel serve has it: Bolt reads it too
    with caplog.at_level("WARNING", logger="slack_bolt"):
        env: SlackEnv = make_env()
        assert env.sender.command(PRIYA, "help").status_code == 200
    assert not [r for r in caplog.records if "will be ignored" in r.getMessage() or "will be unused" in
                r.getMessage()], caplog.text
