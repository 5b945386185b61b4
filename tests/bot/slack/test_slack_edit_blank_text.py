"""An edit modal of a text field typed as only whitespace is flagged as README says: ``the edit leaves field
'plan' blank (only whitespace): …`` (it was ``an edit needs a new value for field 'plan'``, the words for an edit
that gives no value at all), under the input, saying where an empty value can be set (a modal cannot); nothing
is decided."""

from __future__ import annotations

from tests.bot.slack.conftest import PRIYA, SlackEnv, example
from tests.bot.slack.test_slack_end_to_end import edit_modal


def test_an_edit_modal_of_only_whitespace_says_the_edit_leaves_the_field_blank(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env(example())
    run_id = env.start()
    env.settle()
    modal, fields = edit_modal(env, run_id, "review_plan")
    plan = env.hazel.state_at(run_id=run_id).plan
    [field] = list(fields)
    request = env.pending(run_id)
    for blank in ("   ", " \n\t"):
        response = env.sender.submit(PRIYA, modal, {field: blank}, name="priya")
        assert response.status_code == 200
        body = response.json()
        assert body["response_action"] == "errors" and list(body["errors"]) == [field], body
        error = body["errors"][field]
        assert error == ("the edit leaves field 'plan' blank (only whitespace): that would replace the value with "
                         "nothing; an empty value can be set with hazel edit --allow-empty or the REST API's "
                         "allow_empty, not from a Slack form"), error  # (not the console's "(see `…`)" hint)
    assert env.pending(run_id) == request and env.hazel.state_at(run_id=run_id).plan == plan
    assert env.hazel.decisions(run_id=run_id) == []
