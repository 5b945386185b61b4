"""``/hazel`` inside Slack's 3-second window: a command whose answer takes longer (a slow database) was not
acknowledged in time (Bolt answered 404 after 3 s and Slack showed ``operation_timeout``), though a ``start``
had started its run: the person would type it again. Now it is acknowledged with ``WORKING`` and the answer
follows through the command's ``response_url``. A command the database failed under is answered (it may not
have been done) and logged in one line, without the SQL or its parameters."""

from __future__ import annotations

import logging
import time
from urllib.parse import parse_qsl

import pytest

from bot.inbound.slack import commands
from tests.bot.slack.conftest import PRIYA, STARTER, SlackEnv
from tests.bot.slack.test_slack_click_acknowledged import _outage

START = 'start migration-plan {"request": "add an index"}'


def _slow_start(env: SlackEnv, monkeypatch: pytest.MonkeyPatch, delay_sec: float = 0.6) -> None:
    monkeypatch.setattr(commands, "ANSWER_WITHIN_SEC", 0.2)
    start = env.hazel.start

    def slow(**kwargs):  # noqa: ANN003, ANN202 (the database takes its time)
        time.sleep(delay_sec)
        return start(**kwargs)

    monkeypatch.setattr(env.hazel, "start", slow)


def test_a_slow_command_is_acknowledged_at_once_and_answered_after(make_env, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    _slow_start(env, monkeypatch)
    body = env.sender.command_body(STARTER, START)
    url = dict(parse_qsl(body))["response_url"]
    sent = time.monotonic()
    response = env.sender.post(body)
    assert time.monotonic() - sent < 0.6  # (acknowledged before the start ended)
    assert response.status_code == 200 and response.json() == {"text": commands.WORKING,
                                                               "response_type": "ephemeral"}, response.text
    [answer] = env.fake.wait_for(lambda: env.fake.responses_to(url), what="the answer")
    assert answer["response_type"] == "ephemeral" and answer["text"].startswith("▶️ Started run"), answer
    run_id = answer["text"].split("`")[1]
    assert [r.id for r in env.hazel.runs()] == [run_id]
    # the sender the tests use reads the answer as the person does: the message that followed
    followed = env.sender.command(STARTER, 'start migration-plan {"request": "drop an index"}')
    assert followed.status_code == 200 and followed.json()["text"].startswith("▶️ Started run"), followed.text
    assert len(env.hazel.runs()) == 2


def test_a_quick_command_is_answered_in_its_acknowledgement(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    body = env.sender.command_body(PRIYA, "help")
    response = env.sender.post(body)
    assert response.status_code == 200 and response.json()["text"].startswith("*/hazel* steers Hazel runs")
    time.sleep(0.3)
    assert env.fake.responses == []  # nothing follows


def test_an_answer_slack_refuses_is_logged_without_the_response_url(
        make_env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    _slow_start(env, monkeypatch)
    env.fake.response_status = (404, "expired_url")
    body = env.sender.command_body(STARTER, START)
    with caplog.at_level(logging.INFO, logger="hazel.slack"):
        assert env.sender.post(body).json()["text"] == commands.WORKING
        env.wait(lambda: env.hazel.runs(), "the run to start")
        record = env.wait(lambda: next((r for r in caplog.records if "slow /hazel" in r.getMessage()), None),
                          "the warning")
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (f"the answer to a slow /hazel start by {STARTER} could not be sent to Slack: "
                                   "Slack answered 404 'expired_url'"), record.getMessage()
    assert "/commands/" not in "\n".join(r.getMessage() for r in caplog.records)


def test_a_command_the_database_failed_under_is_answered_and_logged_in_one_line(
        make_env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()

    def down(**kwargs):  # noqa: ANN003, ANN202
        raise _outage()

    monkeypatch.setattr(env.hazel, "start", down)
    with caplog.at_level(logging.INFO):
        response = env.sender.command(STARTER, START)
    assert response.status_code == 200, response.text
    assert response.json()["text"] == ("⚠️ `/hazel start` may not have been done: Hazel could not reach its "
                                       "database. `/hazel runs` shows what is in flight; please try again in a "
                                       "moment."), response.text
    said = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(said) == 1 and said[0].exc_info is None, [r.getMessage() for r in said]
    assert said[0].getMessage().startswith(f"a Slack /hazel start by {STARTER} failed: OperationalError: "
                                           "(builtins.Exception) terminating connection")
    logged = "\n".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    assert "priya-secret" not in logged and "[SQL" not in logged and "DETAIL" not in logged
    assert env.hazel.runs() == []


def test_a_start_on_a_schema_older_than_this_hazel_says_so(make_env, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """A start the engine refuses on a schema older than it needs (``SchemaNotReadyError``) is answered with
    what ``/healthz`` says, not "something went wrong on Hazel's side"."""
    from store.errors import SchemaNotReadyError

    env: SlackEnv = make_env()
    said = "the database is at schema revision 0008, this Hazel needs 0009: run `hazel db upgrade`"

    def older(**kwargs):  # noqa: ANN003, ANN202
        raise SchemaNotReadyError(said)

    monkeypatch.setattr(env.hazel, "start", older)
    text = env.sender.command(STARTER, START).json()["text"]
    assert text == (f"⚠️ `/hazel start` may not have been done: {said}. `/hazel runs` shows what is in flight; "
                    "please try again in a moment."), text
