"""An edit modal refused for leaving a value blank says where an empty value can be set, since a modal has no
``allow_empty`` control: it said "allow an empty value (allow_empty) if that is what you mean", advice no one
could follow there. The check stays the engine's (``EmptyEditError``); the modal renders it."""

from __future__ import annotations

from tests.bot.slack.conftest import PRIYA, SlackEnv
from tests.bot.slack.test_slack_end_to_end import edit_modal

ELSEWHERE = "an empty value can be set with hazel edit --allow-empty or the REST API's allow_empty, not from a Slack form"


def test_a_modal_entry_typed_blank_says_where_an_empty_value_can_be_set(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.at_artefacts_review()
    scripts = env.hazel.state_at(run_id=run_id).scripts
    modal, fields = edit_modal(env, run_id, "review_artefacts")
    first, second = list(fields)
    name = list(scripts)[1]
    request = env.pending(run_id)

    response = env.sender.submit(PRIYA, modal, {first: fields[first], second: "   "}, name="priya")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["response_action"] == "errors" and list(body["errors"]) == [second], body
    assert body["errors"][second] == (f"the edit leaves entry {name!r} of field 'scripts' blank (only whitespace): "
                                      f"that would replace the value with nothing; {ELSEWHERE}"), body
    assert env.pending(run_id) == request and env.hazel.state_at(run_id=run_id).scripts == scripts
