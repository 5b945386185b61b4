"""``POST /slack/events`` under the same limits as the REST API and Jira: a body over ``HAZEL_MAX_BODY_BYTES``
is refused with 413 before Bolt parses or verifies it; a start whose input is over ``HAZEL_MAX_STATE_BYTES`` is
refused by the engine; a hostile payload nested too deeply is a 400, never a 500."""

from __future__ import annotations

import json

import pytest

from tests.bot.slack.conftest import STARTER, SlackEnv

BODY_LIMIT, STATE_LIMIT = 16 * 1024, 4 * 1024


@pytest.fixture
def env(make_env, monkeypatch: pytest.MonkeyPatch) -> SlackEnv:  # noqa: ANN001
    monkeypatch.setenv("HAZEL_MAX_BODY_BYTES", str(BODY_LIMIT))
    monkeypatch.setenv("HAZEL_MAX_STATE_BYTES", str(STATE_LIMIT))
    made: SlackEnv = make_env()
    assert made.hazel.settings.max_body_bytes == BODY_LIMIT
    return made


def test_an_oversized_slack_request_is_refused_before_it_is_parsed(env: SlackEnv) -> None:
    calls = len(env.fake.calls)
    text = "start migration-plan " + json.dumps({"request": "r" * BODY_LIMIT})
    for secret in (None, "not-the-signing-secret"):  # signed or not: refused before Bolt sees it
        response = env.sender.post(env.sender.command_body(STARTER, text), secret=secret)
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["type"] == "PayloadTooLargeError" and f"{BODY_LIMIT:,}" in error["message"]
        assert "HAZEL_MAX_BODY_BYTES" in error["message"] and "rrrr" not in error["message"]
    assert env.hazel.runs() == [] and len(env.fake.calls) == calls


def test_a_start_over_the_state_limit_is_refused_by_the_engine(env: SlackEnv) -> None:
    response = env.sender.command(STARTER, "start migration-plan " + json.dumps({"request": "r" * STATE_LIMIT}))
    assert response.status_code == 200, response.text
    answer = response.json()["text"]
    assert f"the limit is {STATE_LIMIT:,} (HAZEL_MAX_STATE_BYTES)" in answer and "rrrr" not in answer
    assert env.hazel.runs() == []


def test_a_payload_nested_too_deeply_is_a_400(env: SlackEnv) -> None:
    body = "payload=" + "[" * 3000 + "]" * 3000
    response = env.sender.post(body)
    assert response.status_code == 400, response.text
    assert env.hazel.runs() == []
