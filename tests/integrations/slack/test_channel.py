"""SlackChannel against the fake Slack Web API: posting, files for long artefacts, DMs, updates in place,
thread replies, reminders, and how failures surface (retried by slack_sdk, then raised for the outbox)."""

from __future__ import annotations

import pytest

from integrations.base import DeliveryError, PermanentDeliveryError
from integrations.slack import SlackChannel, SlackDirectory
from integrations.slack.client import make_client
from store.models import Approvers, ProgressView, RequestStatus
from tests.support.fake_slack import FakeSlack
from tests.support.slack_views import decision, make_view


def test_open_request_posts_block_kit_and_returns_its_key(fake: FakeSlack, client) -> None:  # noqa: ANN001
    ref = SlackChannel(client).open_request(make_view())
    assert ref["channel"] == "C0000000001" and ref["key"] == f"C0000000001:{ref['ts']}"
    message = fake.message("C0000000001", ref["ts"])
    assert message.blocks[0]["type"] == "header" and message.blocks[-1]["type"] == "actions"
    assert fake.calls_to("chat.postMessage")[0].token == fake.bot_token


def test_a_60000_character_plan_arrives_complete_as_a_file_in_the_thread(fake: FakeSlack, client) -> None:  # noqa: ANN001
    plan = "# Plan\n" + "\n".join(f"{i:05d} step: backfill <batch> & verify " + "." * 80 for i in range(520))
    plan = plan[:60000]
    assert len(plan) == 60000
    ref = SlackChannel(client).open_request(make_view(shown=plan))
    message = fake.message(ref["channel"], ref["ts"])
    assert "attached as a file" in str(message.blocks)
    [file] = fake.files.values()
    assert file["content"].decode("utf-8") == plan
    assert file["channel"] == ref["channel"] and file["thread_ts"] == ref["ts"]


def test_notify_approvers_dms_each_user_and_group_member(fake: FakeSlack, client) -> None:  # noqa: ANN001
    ref = SlackChannel(client).open_request(make_view(notify=True))
    assert sorted(d["channel"] for d in ref["dms"]) == ["D0000000001", "D0000000003", "D0000000004"]
    assert fake.calls_to("usergroups.users.list")[0].params["usergroup"] == "S0000000001"


def test_update_in_place_shows_outcome_and_removes_buttons(fake: FakeSlack, client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    ref = channel.open_request(make_view(notify=True))
    decided = make_view(status=RequestStatus.DECIDED, decided_action="approve", message_ref=ref, notify=True,
                        decisions=(decision("approve"),))
    channel.update_request(decided)
    for where in [{"channel": ref["channel"], "ts": ref["ts"]}, *ref["dms"]]:
        message = fake.message(where["channel"], where["ts"])
        assert len(message.versions) == 1
        assert not any(b["type"] == "actions" for b in message.blocks)
        assert "✅ Approved by <@U0000000001>" in str(message.blocks)


def test_progress_and_reminders_go_in_the_thread(fake: FakeSlack, client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    view = make_view()
    ref = channel.open_request(view)
    posted = view.request.model_copy(update={"message_ref": ref})
    channel.progress(ProgressView(run=view.run, workflow=view.workflow, event="completed", request=posted,
                                  steps=("deploy",)))
    channel.remind(make_view(message_ref=ref, reminder=True))
    replies = fake.channel_messages(ref["channel"], thread_ts=ref["ts"])
    assert [r.text.split(" ")[0] for r in replies] == ["Ran", "⏰"]
    assert "completed" in replies[0].text and "still waits for <@U0000000001>" in replies[1].text


def test_escalation_dms_the_backup_approvers(fake: FakeSlack, client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    ref = channel.open_request(make_view())
    channel.remind(make_view(message_ref=ref, escalation=True, escalate_to=Approvers(slack_users=("U0000000042",))))
    dm = fake.channel_messages("D0000000042")
    assert len(dm) == 1 and "escalated to <@U0000000042>" in dm[0].text


def test_escalation_to_another_channel_posts_the_whole_request_there(fake: FakeSlack, client) -> None:  # noqa: ANN001
    """``escalate_channel`` names another Slack channel, and the request may even live in Jira: the backup
    approvers get the request with its buttons in that channel."""
    channel = SlackChannel(client)
    view = make_view(channel="jira:MIG", message_ref={"key": "jira:10001", "issue_key": "MIG-1"}, escalation=True,
                     escalate_channel="slack:#deploys", escalate_to=Approvers(slack_users=("U0000000042",)))
    channel.remind(view)
    [posted] = fake.channel_messages("C0000000002")
    assert "escalated to <@U0000000042>" in posted.text
    assert any(b["type"] == "actions" for b in posted.blocks), "buttons to decide from there"
    assert len(fake.channel_messages("D0000000042")) == 1


def test_rate_limit_is_waited_out_with_retry_after(fake: FakeSlack, client) -> None:  # noqa: ANN001
    fake.fail("chat.postMessage", status=429, retry_after_sec=1)
    ref = SlackChannel(client).open_request(make_view())
    calls = fake.calls_to("chat.postMessage")
    assert [c.status for c in calls] == [429, 200] and ref["ts"]


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_and_dropped_connections_are_retried(fake: FakeSlack, client, status: int) -> None:  # noqa: ANN001
    """slack_sdk retries updates (idempotent); a post whose outcome is unknown goes back to the outbox, whose
    retry looks for it first (test_idempotent_posts.py)."""
    channel = SlackChannel(client)
    fake.fail("chat.postMessage", status=status, times=1)
    with pytest.raises(DeliveryError):
        channel.open_request(make_view())
    ref = channel.open_request(make_view())
    fake.fail("chat.update", status=status, times=1)
    fake.fail_connections("chat.update")
    channel.update_request(make_view(message_ref=ref))
    assert [c.status for c in fake.calls_to("chat.postMessage")] == [status, 200]
    assert [c.error for c in fake.calls_to("chat.update")] == [f"http_{status}", "connection_reset", None]


def test_failures_that_outlast_retries_raise_delivery_errors(fake: FakeSlack) -> None:
    client = make_client(fake.bot_token, base_url=fake.api_url, max_retries=1, backoff_sec=0.01)
    channel = SlackChannel(client)
    fake.fail("chat.postMessage", status=429, retry_after_sec=1, times=None)
    with pytest.raises(DeliveryError) as err:
        channel.open_request(make_view())
    assert not isinstance(err.value, PermanentDeliveryError) and err.value.retry_after_sec == 1
    fake.clear_failures()
    fake.fail("chat.postMessage", status=503, times=None)
    with pytest.raises(DeliveryError) as err:
        channel.open_request(make_view())
    assert "503" in str(err.value) and not isinstance(err.value, PermanentDeliveryError)
    fake.clear_failures()
    with pytest.raises(DeliveryError) as err:  # the bot is not in the channel yet: retried later
        channel.open_request(make_view(channel="slack:#nowhere"))
    assert "channel_not_found" in str(err.value) and not isinstance(err.value, PermanentDeliveryError)
    fake.fail("chat.postMessage", error="invalid_blocks")
    with pytest.raises(PermanentDeliveryError):
        channel.open_request(make_view())
    assert fake.bot_token not in str(err.value)
    # s33 F4: an answer whose error is an object (a proxy's, a gateway's) was a TypeError in the classification
    fake.fail("chat.postMessage", status=401, error={"message": "Incorrect API key", "code": "invalid_key"},  # type: ignore[arg-type]
              times=None)
    with pytest.raises(DeliveryError) as err:
        channel.open_request(make_view())
    assert not isinstance(err.value, PermanentDeliveryError), err.value
    assert '401 {"message": "Incorrect API key", "code": "invalid_key"}' in str(err.value), err.value


def test_a_retry_after_a_partial_failure_does_not_post_twice(fake: FakeSlack, client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    fake.fail("files.getUploadURLExternal", status=503, times=None)
    view = make_view(shown="x" * 20000, notify=True)
    with pytest.raises(DeliveryError):
        channel.open_request(view)
    fake.clear_failures()
    fake.fail("chat.postMessage", error="fatal_error")  # the first DM fails once
    with pytest.raises(DeliveryError):
        channel.open_request(view)
    ref = channel.open_request(view)
    top = fake.channel_messages("C0000000001", top_level=True)
    assert len(top) == 1 and top[0].ts == ref["ts"]
    assert len(fake.files) == 1 and len(ref["dms"]) == 3
    assert all(len(fake.channel_messages(d["channel"])) == 1 for d in ref["dms"])


def test_directory_caches_members_and_falls_back_to_stale_lists(fake: FakeSlack, client) -> None:  # noqa: ANN001
    now = [0.0]
    directory = SlackDirectory(client, ttl_sec=60, clock=lambda: now[0])
    assert directory.groups_of("U0000000003", ["S0000000001"]) == {"S0000000001"}
    assert directory.groups_of("U0000000001", ["S0000000001"]) == frozenset()
    assert len(fake.calls_to("usergroups.users.list")) == 1
    now[0] = 61
    fake.usergroups["S0000000001"].append("U0000000001")
    assert directory.groups_of("U0000000001", ["S0000000001"]) == {"S0000000001"}
    now[0] = 200
    fake.fail("usergroups.users.list", status=503, times=None)
    assert "U0000000001" in directory.members("S0000000001")  # stale, but Slack is down
    from integrations.slack import DirectoryError

    with pytest.raises(DirectoryError):
        directory.members("S0000000999")
