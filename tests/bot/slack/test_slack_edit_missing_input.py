"""An edit modal submitted without one of the inputs Hazel laid out (Slack sends every input block of a
submitted modal, an empty one with ``"value": null``; a form without one is not Hazel's) is refused in the
modal, and nothing is stored: the missing entry is not read as empty (which sets it to null)."""

from __future__ import annotations

from tests.bot.slack.conftest import PRIYA, SlackEnv, example
from tests.bot.slack.test_slack_end_to_end import edit_modal


def test_an_edit_modal_missing_an_input_is_refused_and_changes_nothing(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env(example())
    run_id = env.at_artefacts_review()
    modal, fields = edit_modal(env, run_id, "review_artefacts")
    scripts = env.hazel.state_at(run_id=run_id).scripts
    first, second = list(fields)
    request = env.pending(run_id)

    response = env.sender.submit(PRIYA, modal, {first: fields[first] + "\n-- edited"}, name="priya")

    assert response.status_code == 200
    body = response.json()
    assert body["response_action"] == "errors", body
    assert "is not the one Hazel laid out" in " ".join(body["errors"].values()), body
    assert repr(second) in " ".join(body["errors"].values()), body  # names the missing input
    assert env.pending(run_id) == request and env.hazel.state_at(run_id=run_id).scripts == scripts
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve"]

    response = env.sender.submit(PRIYA, modal, {first: fields[first] + "\n-- edited", second: fields[second]},
                                 name="priya")  # the whole form: the edit is taken
    assert response.status_code == 200 and not response.content.strip(), response.text
    env.wait(lambda: len(env.hazel.decisions(run_id=run_id)) == 2, "the edit")
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve", "edit"]
