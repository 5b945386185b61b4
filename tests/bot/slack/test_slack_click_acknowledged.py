"""An Approve click gets Slack's 200 once its decision is recorded: Slack never sends a click again after its 200,
so a click acknowledged first and lost to a crash or an outage in between was lost without a word (a fresh-user
finding). When the database fails under the click, the person is told it may not have been recorded, and the
log says so in one line, without the SQL statement or its parameters."""

from __future__ import annotations

import logging
import time

import pytest
from sqlalchemy.exc import OperationalError

from tests.bot.slack.conftest import PRIYA, SlackEnv


def _outage() -> OperationalError:
    return OperationalError("UPDATE hazel_steering_requests SET decided_by = %(actor)s", {"actor": "priya-secret"},
                            Exception("terminating connection due to administrator command\nDETAIL: more"))


def test_the_200_comes_once_the_approval_is_recorded(make_env, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    message = env.request_message(run_id)
    decide = env.hazel.decide

    def slow(**kwargs):  # noqa: ANN003, ANN202 (a decision that takes its time: the 200 waits for it)
        time.sleep(0.3)
        return decide(**kwargs)

    monkeypatch.setattr(env.hazel, "decide", slow)
    response = env.sender.click(PRIYA, "approve", message, name="priya")
    assert response.status_code == 200
    assert [d.actor_id for d in env.hazel.decisions(run_id=run_id)] == [PRIYA]  # recorded before the 200


def test_a_click_the_database_failed_is_told_and_logged_in_one_line(
        make_env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    message = env.request_message(run_id)
    request = env.pending(run_id)

    def down(**kwargs):  # noqa: ANN003, ANN202
        raise _outage()

    monkeypatch.setattr(env.hazel, "decide", down)
    with caplog.at_level(logging.INFO):
        assert env.sender.click(PRIYA, "approve", message, name="priya").status_code == 200
        told = env.ephemeral(PRIYA, "may not have been recorded")
    assert "could not reach its database" in told["text"] and "click again" in told["text"]
    assert env.hazel.decisions(run_id=run_id) == [] and env.pending(run_id) == request
    said = [r for r in caplog.records if "click" in r.getMessage() and r.levelno >= logging.ERROR]
    assert len(said) == 1 and said[0].exc_info is None, [r.getMessage() for r in said]
    assert said[0].getMessage().startswith(f"a Slack approve click by {PRIYA} on request {request.id} failed: "
                                           "OperationalError: (builtins.Exception) terminating connection")
    logged = "\n".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    assert "priya-secret" not in logged and "[SQL" not in logged and "DETAIL" not in logged
    monkeypatch.undo()  # the database is back: the same click again is recorded
    env.sender.click(PRIYA, "approve", message, name="priya")
    env.wait(lambda: env.hazel.decisions(run_id=run_id), "the approval clicked again")


def test_a_home_tab_refresh_the_database_failed_is_one_line(
        make_env, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    from bot.inbound.slack.bridge import SlackBridge

    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    bridge = SlackBridge(env.hazel, env.channel.client, env.channel.directory)

    def down(*args, **kwargs) -> None:  # noqa: ANN002, ANN003
        raise _outage()

    bridge.publish_home = down  # type: ignore[method-assign]
    view = env.hazel.request_view(request_id=env.pending(run_id).id)
    with caplog.at_level(logging.INFO):
        bridge.refresh_homes(view)  # never raises: the message it follows was delivered
    [record] = [r for r in caplog.records if "Home tabs" in r.getMessage()]
    assert record.exc_info is None and "[SQL" not in record.getMessage()
    assert record.getMessage().startswith(f"refreshing the Home tabs after request {view.request.id} changed "
                                          "failed: OperationalError:")


def test_a_form_the_database_kept_from_opening_is_told(make_env, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    message = env.request_message(run_id)

    def down(**kwargs):  # noqa: ANN003, ANN202
        raise _outage()

    monkeypatch.setattr(env.hazel, "check", down)
    assert env.sender.click(PRIYA, "reject", message, name="priya").status_code == 200
    told = env.ephemeral(PRIYA, "The form could not be opened")
    assert "could not reach its database" in told["text"] and env.fake.views == []

