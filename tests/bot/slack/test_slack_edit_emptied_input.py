"""An edit modal's input emptied (Slack submits it as ``"value": null``) means null, and the state model decides:
where it needs a value the modal flags the input with the engine's words for an emptied field, ``the edit leaves
field 'plan' empty: …`` (it was pydantic's ``invalid edit: plan: Input should be a valid string``), and nothing
is decided; where null is allowed, null is stored."""

from __future__ import annotations

from pydantic import BaseModel

from hazel import StepContext, Workflow
from tests.bot.slack.conftest import APPROVERS, PRIYA, SlackEnv, example
from tests.bot.slack.test_slack_end_to_end import edit_modal


def refused(env: SlackEnv, modal: dict, values: dict) -> dict[str, str]:
    response = env.sender.submit(PRIYA, modal, values, name="priya")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["response_action"] == "errors", body
    return body["errors"]


def test_an_emptied_text_field_is_flagged_with_the_engines_words(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env(example())
    run_id = env.start()
    env.settle()
    plan = env.hazel.state_at(run_id=run_id).plan
    modal, fields = edit_modal(env, run_id, "review_plan")
    assert list(fields) == ["edit_0_0"]
    request = env.pending(run_id)

    errors = refused(env, modal, {"edit_0_0": None})

    assert list(errors) == ["edit_0_0"], errors
    assert errors["edit_0_0"].startswith("the edit leaves field 'plan' empty: "), errors
    assert "valid string" not in errors["edit_0_0"] and "hazel edit" not in errors["edit_0_0"], errors
    assert env.pending(run_id) == request and env.hazel.state_at(run_id=run_id).plan == plan
    assert env.hazel.decisions(run_id=run_id) == []


def test_an_emptied_entry_is_flagged_under_its_input(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env(example())
    run_id = env.at_artefacts_review()
    scripts = env.hazel.state_at(run_id=run_id).scripts
    modal, fields = edit_modal(env, run_id, "review_artefacts")
    first, second = list(fields)
    name = list(scripts)[1]

    errors = refused(env, modal, {first: fields[first], second: None})

    assert list(errors) == [second], errors
    assert errors[second].startswith(f"the edit leaves entry {name!r} of field 'scripts' empty: "), errors
    assert env.hazel.state_at(run_id=run_id).scripts == scripts
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve"]


class Memo(BaseModel):
    request: str = ""
    note: str | None = None


def noted() -> Workflow:
    wf = Workflow("noted", version=1, state=Memo)

    @wf.step
    def draft(state: Memo, ctx: StepContext) -> Memo:
        return state.model_copy(update={"note": "a note"})

    wf.steer("review", show="note", channel="slack:#migrations", approvers=APPROVERS)
    return wf


def test_an_emptied_optional_field_stores_null(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env(noted())
    run_id = env.start("noted", {"request": "x"})
    env.settle()
    assert env.hazel.state_at(run_id=run_id).note == "a note"
    modal, fields = edit_modal(env, run_id, "review")

    response = env.sender.submit(PRIYA, modal, {"edit_0_0": None}, name="priya")

    assert response.status_code == 200 and not response.content.strip(), response.text
    [decision] = env.hazel.decisions(run_id=run_id)
    assert decision.action.value == "edit" and decision.payload == {"value": None}
    env.settle()
    assert env.hazel.state_at(run_id=run_id).note is None
