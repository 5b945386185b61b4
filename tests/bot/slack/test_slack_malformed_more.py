"""More malformed Slack requests into ``POST /slack/events``, over real HTTP with real signatures: an unsigned
request whose timestamp is not an integer (401, not Bolt's ValueError), signed payloads whose parts are of the
wrong kind (an ``event`` that is not an object, an edit input that is not an input's state, a rewind target that
is not a number: 400 ``malformed Slack request: <why>``), bodies that are not JSON or not UTF-8 (400 with the
why), and modal field errors as plain text under the right input."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import httpx
import pytest

from tests.bot.slack.conftest import PRIYA, SAM, SECRET, SlackEnv


def _unchanged(env: SlackEnv, run_id: str) -> None:
    assert env.hazel.decisions(run_id=run_id) == [] and env.pending(run_id) is not None


def _modal(env: SlackEnv, action: str, run_id: str) -> dict:
    return env.open_form(PRIYA, action, env.request_message(run_id))


@pytest.mark.parametrize("timestamp", ["abc", "", "1.5", "9" * 5000])
def test_an_unsigned_request_whose_timestamp_is_not_an_integer_answers_401(make_env, timestamp) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    body = urlencode({"payload": json.dumps(env.sender.click_payload(PRIYA, "approve", env.request_message(run_id)))})
    response = env.sender.post(body, headers={"X-Slack-Request-Timestamp": timestamp,
                                              "X-Slack-Signature": "v0=" + "0" * 64})
    assert response.status_code == 401, response.text
    response = env.sender.post(body, headers={"X-Slack-Signature": "v0=é".encode("latin-1")})  # type: ignore[dict-item]
    # (not ASCII: hmac.compare_digest raised TypeError)
    assert response.status_code == 401, response.text
    time.sleep(0.3)
    _unchanged(env, run_id)


@pytest.mark.parametrize("body", [
    "hello=world", "payload=%7Bnotjson", "payload=%5B%5D",
    urlencode({"payload": json.dumps({"type": "block_actions", "user": {"id": PRIYA}, "actions": "x"})}),
    json.dumps({"type": "event_callback", "event": "x"}),
])
def test_an_unsigned_malformed_body_answers_401_before_its_shape_is_judged(make_env, body) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    response = env.sender.post(body, secret="not-the-signing-secret")
    assert response.status_code == 401, response.text
    response = env.sender.post(body, timestamp=int(time.time()) - 600)  # signed more than 5 minutes ago
    assert response.status_code == 401, response.text
    assert env.sender.post(body).status_code == 400  # signed: the shape is judged


@pytest.mark.parametrize("event", ["x", ["x"], {"type": 5}, {"type": "app_home_opened", "tab": "home"}])
def test_a_signed_event_callback_whose_event_is_not_an_object_answers_400(make_env, event) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    body = json.dumps({"token": "x", "team_id": "T0000000002", "api_app_id": "A0000000001", "type": "event_callback",
                       "event": event, "event_id": "Ev1", "event_time": int(time.time())})
    response = env.sender.post(body, content_type="application/json")
    assert response.status_code == 400, response.text
    assert response.text.startswith("malformed Slack request: "), response.text
    assert "event" in response.text


@pytest.mark.parametrize("state, why", [
    ({"edit_0_0": "x"}, "view.state.values.edit_0_0 is not an object of input states"),
    ({"edit_0_0": {"value": "x"}}, "view.state.values.edit_0_0 is not an object of input states"),
    ({"edit_0_0": {"value": {"type": "plain_text_input", "value": 5}}}, "view.state.values.edit_0_0.value.value"),
    ({"edit_0_0": {"value": {"type": "plain_text_input", "value": 0}}}, "view.state.values.edit_0_0.value.value"),
    ({"edit_0_0": {"value": {"type": "static_select", "selected_option": "x"}}}, "selected_option"),
])
def test_a_signed_edit_whose_inputs_are_not_input_states_answers_400(make_env, state, why) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    modal = _modal(env, "edit", run_id)
    payload = env.sender.submission_payload(PRIYA, modal, {})
    payload["view"]["state"] = {"values": state}
    response = env.sender.send_payload(payload)
    assert response.status_code == 400, response.text
    assert response.text.startswith("malformed Slack request: ") and why in response.text, response.text
    _unchanged(env, run_id)


@pytest.mark.parametrize("target", ["abc", "1.0", "", "-", "٣", "9" * 200])
def test_a_rewind_submission_whose_target_is_not_a_number_answers_400(make_env, target) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    modal = _modal(env, "rewind", run_id)
    response = env.sender.submit(PRIYA, modal, {"target": {"selected": target}})
    if target == "":  # nothing chosen: the modal says so
        assert response.status_code == 200 and response.json()["errors"] == {
            "target": "choose the checkpoint to continue from"}, response.text
    else:
        assert response.status_code == 400, response.text
        assert response.text.startswith("malformed Slack request: the chosen checkpoint"), response.text
        assert "is not a checkpoint number" in response.text
    _unchanged(env, run_id)


@pytest.mark.parametrize("target", ["99999999999999999999", "999999", "-1"])
def test_a_rewind_to_a_checkpoint_that_does_not_exist_is_a_field_error(make_env, target) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    modal = _modal(env, "rewind", run_id)
    response = env.sender.submit(PRIYA, modal, {"target": {"selected": target}})
    assert response.status_code == 200, response.text
    errors = response.json()["errors"]
    assert list(errors) == ["target"] and errors["target"], errors
    _unchanged(env, run_id)


def _post_bytes(env: SlackEnv, body: bytes) -> httpx.Response:
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return env.sender.http.post(env.sender.url, content=body, headers={
        "Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}"})


@pytest.mark.parametrize("body, why", [
    ("payload=%7Bnotjson", "the payload is not JSON (Expecting property name enclosed in double quotes"),
    ("payload=%5B%5D", "the payload is not a JSON object"),
    ("payload=" + "%5B" * 100_000, "the payload is nested too deeply"),
])
def test_a_signed_payload_that_is_not_a_json_object_says_why(make_env, body, why) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    response = env.sender.post(body)
    assert response.status_code == 400, response.text
    assert response.text.startswith(f"malformed Slack request: {why}"), response.text


def test_a_signed_body_that_is_not_utf8_says_why(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    response = _post_bytes(env, b"\xff\xfe")
    assert response.status_code == 400, response.text
    assert response.text == "malformed Slack request: the body is not UTF-8 (byte 0)"


def test_modal_field_errors_are_plain_text(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    message = env.request_message(run_id)
    modal = _modal(env, "feedback", run_id)
    env.sender.click(SAM, "approve", message, name="sam")
    env.wait(lambda: env.pending(run_id) is None, "Sam's approval")
    response = env.sender.submit(PRIYA, modal, {"text": "more detail please"})
    error = response.json()["errors"]["text"]
    decided = env.hazel.decisions(run_id=run_id)[0]
    assert error == f"Already approved by sam at {decided.created_at:%Y-%m-%d %H:%M} UTC.", error
    assert "<" not in error


def test_a_rewind_feedback_refused_is_flagged_under_the_feedback_input(make_env, monkeypatch) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    modal = _modal(env, "rewind", run_id)
    target = modal["blocks"][2]["element"]["options"][0]["value"]
    monkeypatch.setattr(env.hazel.steering, "max_state_bytes", 1024)
    response = env.sender.submit(PRIYA, modal, {"target": {"selected": target}, "feedback": "x" * 2000})
    errors = response.json()["errors"]
    assert list(errors) == ["feedback"] and "the feedback" in errors["feedback"], errors
    response = env.sender.submit(PRIYA, modal, {"target": {"selected": target}, "feedback": "a\x00b"})
    errors = response.json()["errors"]
    assert list(errors) == ["feedback"] and "NUL" in errors["feedback"], errors
    _unchanged(env, run_id)


@pytest.mark.parametrize("request_id", ["99999999999999999999", "2147483648", "0", "-5"])
def test_a_button_naming_a_request_id_beyond_the_database_range_is_answered(make_env, request_id) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    payload = env.sender.click_payload(PRIYA, "approve", env.request_message(run_id))
    payload["actions"][0]["value"] = request_id
    assert env.sender.send_payload(payload).status_code == 200
    env.ephemeral(PRIYA, "This button does not belong to a Hazel steering request" if request_id == "-5"
                  else f"belongs to a steering request that no longer exists (request {request_id};")  # (digits)
    _unchanged(env, run_id)


@pytest.mark.parametrize("request_id", ["99999999999999999999", "Infinity", "1e400"])
def test_a_modal_whose_context_names_a_request_id_beyond_the_database_range_is_answered(make_env, request_id) -> None:  # noqa: ANN001,E501
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    modal = _modal(env, "feedback", run_id)
    meta = json.loads(modal["private_metadata"])
    forged = json.dumps(meta).replace(f'"request_id": {meta["request_id"]}', f'"request_id": {request_id}')
    assert forged != json.dumps(meta)
    response = env.sender.submit(PRIYA, {**modal, "private_metadata": forged}, {"text": "more detail"})
    assert response.status_code == 200, response.text
    assert response.json()["response_action"] == "errors" and list(response.json()["errors"]) == ["text"]
    _unchanged(env, run_id)


def test_hazel_rewind_to_a_checkpoint_beyond_the_database_range_is_answered(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    env.request_message(run_id)
    response = env.sender.command(PRIYA, f"rewind {run_id} 99999999999999999999")
    assert response.status_code == 200, response.text
    assert "99999999999999999999" in response.json()["text"], response.text
    _unchanged(env, run_id)


@pytest.mark.parametrize("body", ["command=/hazel&text=runs", json.dumps({"command": "/hazel", "user_id": 5})])
def test_a_signed_slash_command_without_a_user_id_answers_400(make_env, body) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    content_type = "application/json" if body.startswith("{") else "application/x-www-form-urlencoded"
    response = env.sender.post(body, content_type=content_type)
    assert response.status_code == 400, response.text
    assert response.text.startswith("malformed Slack request: a slash command without"), response.text


@pytest.mark.parametrize("change", [{"container": "x"}, {"channel": "x"}, {"channel": {"id": 5}, "container": {}},
                                    {"user": {"id": PRIYA, "name": 5}}])
def test_a_signed_click_whose_container_channel_or_user_name_is_of_the_wrong_kind_answers_400(make_env, change) -> None:  # noqa: ANN001,E501
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    payload = {**env.sender.click_payload(PRIYA, "approve", env.request_message(run_id)), **change}
    response = env.sender.send_payload(payload)
    assert response.status_code == 400, response.text
    assert response.text.startswith("malformed Slack request: "), response.text
    _unchanged(env, run_id)


@pytest.mark.parametrize("user_id", ["", "   "])
def test_a_signed_click_whose_user_id_is_blank_is_refused_like_a_missing_user(make_env, user_id) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    before = len(env.fake.calls)
    payload = {**env.sender.click_payload(PRIYA, "approve", env.request_message(run_id)), "user": {"id": user_id}}
    response = env.sender.send_payload(payload)
    assert response.status_code == 400, response.text
    assert response.text == "malformed Slack request: user is not an object with an id (and a name that is text)"
    assert len(env.fake.calls) == before, [c.method for c in env.fake.calls[before:]]  # no users.info, no publish
    _unchanged(env, run_id)


@pytest.mark.parametrize("user_id", ["", "  "])
def test_a_signed_slash_command_whose_user_id_is_blank_answers_400(make_env, user_id) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    response = env.sender.post(env.sender.command_body(user_id, "runs"))
    assert response.status_code == 400, response.text
    assert response.text.startswith("malformed Slack request: a slash command without"), response.text


def test_a_signed_event_hazel_does_not_handle_is_answered_200_in_one_log_line(make_env, caplog) -> None:  # noqa: ANN001
    """Fresh-user s20 L6: an event of a type Hazel does not subscribe to (an app configured with more than the
    manifest's ``app_home_opened``) answered 404, which Slack counts as a failure, and logged Bolt's multi-line
    "[Suggestion] … @app.event" advice."""
    import logging

    env: SlackEnv = make_env()
    body = json.dumps({"token": "x", "team_id": "T0000000002", "api_app_id": "A0000000001", "type": "event_callback",
                       "event": {"type": "message", "user": PRIYA, "text": "/approve", "channel": "C1", "ts": "1.2"},
                       "event_id": "Ev5", "event_time": int(time.time())})
    said = "slack: an event of type 'message' is not one Hazel handles"
    with caplog.at_level(logging.INFO):
        response = env.sender.post(body, content_type="application/json")
        deadline = time.monotonic() + 10  # (Bolt runs the listener after the ack: a loaded machine takes its time)
        while said not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)  # (anything Bolt would log after the listener: its advice, below)
    assert response.status_code == 200, response.text
    assert "[Suggestion]" not in caplog.text and "Unhandled request" not in caplog.text, caplog.text
    assert said in caplog.text, caplog.text
    assert env.sender.home_opened(PRIYA).status_code == 200  # the Home tab's own event still goes to its listener
