"""The fake Slack Web API refuses what Slack refuses (so that tests passing against it mean something)."""

from __future__ import annotations

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from tests.support.fake_slack import FakeSlack


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button(text: str = "Go", value: str = "1", action_id: str = "a") -> dict:
    return {"type": "actions", "elements": [{"type": "button", "action_id": action_id,
                                             "text": {"type": "plain_text", "text": text}, "value": value}]}


def modal(blocks: list, title: str = "Edit") -> dict:
    return {"type": "modal", "title": {"type": "plain_text", "text": title},
            "submit": {"type": "plain_text", "text": "Save"}, "blocks": blocks}


def text_input(i: int) -> dict:
    return {"type": "input", "block_id": f"b{i}", "label": {"type": "plain_text", "text": "x"},
            "element": {"type": "plain_text_input", "action_id": "value"}}


@pytest.mark.parametrize("blocks, error", [
    ([section("x")] * 51, "invalid_blocks"),
    ([section("x" * 3001)], "invalid_blocks"),
    ([section("")], "invalid_blocks"),
    ([button(text="b" * 76)], "invalid_blocks"),
    ([button(value="v" * 2001)], "invalid_blocks"),
    ([text_input(0)], "invalid_blocks"),
    ([section("x" * 3000)] * 5, "msg_blocks_too_long"),
])
def test_messages_over_slack_limits_are_refused(blocks: list, error: str, fake: FakeSlack, client: WebClient) -> None:
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="#migrations", text="t", blocks=blocks)
    assert err.value.response["error"] == error
    assert fake.messages == {}


def test_views_over_limits_and_bad_triggers_are_refused(fake: FakeSlack, client: WebClient) -> None:
    with pytest.raises(SlackApiError) as err:
        client.views_open(trigger_id=fake.new_trigger_id(), view=modal([text_input(i) for i in range(101)]))
    assert err.value.response["error"] == "invalid_arguments"
    with pytest.raises(SlackApiError) as err:
        client.views_open(trigger_id=fake.new_trigger_id(), view=modal([text_input(0)], title="t" * 25))
    assert "less than 25" in str(err.value.response["response_metadata"])
    trigger = fake.new_trigger_id()
    fake.expire(trigger)
    with pytest.raises(SlackApiError) as err:
        client.views_open(trigger_id=trigger, view=modal([text_input(0)]))
    assert err.value.response["error"] == "expired_trigger_id"
    trigger = fake.new_trigger_id()
    client.views_open(trigger_id=trigger, view=modal([text_input(0)]))
    with pytest.raises(SlackApiError) as err:
        client.views_open(trigger_id=trigger, view=modal([text_input(0)]))
    assert err.value.response["error"] == "exchanged_trigger_id"
    assert len(fake.views) == 1


def test_wrong_token_and_unknown_channel(fake: FakeSlack) -> None:
    bad = WebClient(token="xoxb-wrong", base_url=fake.api_url)
    with pytest.raises(SlackApiError) as err:
        bad.chat_postMessage(channel="#migrations", text="t")
    assert err.value.response["error"] == "invalid_auth"
    good = WebClient(token=fake.bot_token, base_url=fake.api_url)
    with pytest.raises(SlackApiError) as err:
        good.chat_postMessage(channel="#elsewhere", text="t")
    assert err.value.response["error"] == "channel_not_found"
