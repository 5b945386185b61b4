"""SlackChannel's copies of a request (reminders, escalations) against the fake Slack Web API: which messages
carry the buttons, what ``remind`` returns for the outbox to record, and ``update_request`` reaching them."""

from __future__ import annotations

import pytest

from integrations.base import DeliveryError
from integrations.slack import SlackChannel
from store.models import Approvers, RequestStatus
from tests.support.fake_slack import FakeSlack
from tests.support.slack_views import decision, make_view

BACKUP = "U0000000042"


def has_buttons(message) -> bool:  # noqa: ANN001
    return any(b.get("type") == "actions" for b in message.blocks or [])


def test_reminders_reply_in_the_thread_of_each_approvers_dm_without_more_buttons(fake: FakeSlack,
                                                                                 client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    ref = channel.open_request(make_view(notify=True))
    assert sorted(d["user"] for d in ref["dms"]) == ["U0000000001", "U0000000003", "U0000000004"]
    assert channel.remind(make_view(message_ref=ref, notify=True, reminder=True)) is None  # no new copies
    for dm in ref["dms"]:
        [reply] = fake.channel_messages(dm["channel"], thread_ts=dm["ts"])
        assert reply.text.startswith("⏰ Reminder") and not has_buttons(reply)
        assert fake.calls_to("chat.postMessage")[-1].params.get("reply_broadcast") in (True, "true", "1", 1)


def test_escalation_returns_the_copies_it_posted_with_buttons(fake: FakeSlack, client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    ref = channel.open_request(make_view())
    out = channel.remind(make_view(message_ref=ref, escalation=True, escalate_channel="slack:#deploys",
                                   escalate_to=Approvers(slack_users=(BACKUP,))))
    [post] = fake.channel_messages("C0000000002")
    [dm] = fake.channel_messages("D0000000042")
    assert has_buttons(post) and has_buttons(dm)
    assert out == {"copies": [{"channel": "C0000000002", "ts": post.ts},
                              {"channel": "D0000000042", "ts": dm.ts, "user": BACKUP}]}


def test_a_failed_escalation_reports_what_it_posted_and_a_retry_does_not_post_it_again(fake: FakeSlack,
                                                                                       client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    ref = channel.open_request(make_view())
    view = make_view(message_ref=ref, escalation=True, escalate_channel="slack:#deploys",
                     escalate_to=Approvers(slack_users=(BACKUP,)))
    posts = len(fake.calls_to("chat.postMessage"))
    fake.fail("chat.postMessage", error="fatal_error")  # the post in #deploys fails: nothing was posted
    with pytest.raises(DeliveryError) as failed:
        channel.remind(view)
    assert failed.value.message_ref == {"copies": []}  # type: ignore[attr-defined]
    fake.clear_failures()
    original = fake._chat_postMessage

    def dm_fails(p: dict) -> dict:
        return {"ok": False, "error": "fatal_error"} if p.get("channel") == BACKUP else original(p)

    fake._chat_postMessage = dm_fails  # type: ignore[method-assign]
    with pytest.raises(DeliveryError) as failed:
        channel.remind(view)
    [post] = fake.channel_messages("C0000000002")
    assert failed.value.message_ref == {"copies": [{"channel": "C0000000002", "ts": post.ts}]}  # type: ignore
    fake._chat_postMessage = original  # type: ignore[method-assign]
    out = channel.remind(view)
    assert len(fake.channel_messages("C0000000002")) == 1 and len(fake.channel_messages("D0000000042")) == 1
    assert [c["channel"] for c in out["copies"]] == ["C0000000002", "D0000000042"]
    assert len(fake.calls_to("chat.postMessage")) == posts + 4  # failed post, post, failed DM, DM


def test_a_settled_request_is_not_reminded_of(fake: FakeSlack, client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    ref = channel.open_request(make_view(notify=True))
    before = len(fake.calls_to("chat.postMessage"))
    decided = make_view(status=RequestStatus.DECIDED, decided_action="approve", message_ref=ref, notify=True,
                        decisions=(decision("approve"),), escalation=True, escalate_channel="slack:#deploys",
                        escalate_to=Approvers(slack_users=(BACKUP,)))
    assert channel.remind(decided) is None
    assert len(fake.calls_to("chat.postMessage")) == before


def test_update_reaches_every_copy_and_skips_one_slack_no_longer_has(fake: FakeSlack, client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    ref = channel.open_request(make_view(notify=True))
    out = channel.remind(make_view(message_ref=ref, escalation=True, escalate_channel="slack:#deploys",
                                   escalate_to=Approvers(slack_users=(BACKUP,))))
    gone = {"channel": "D0000000077", "ts": "1.000001", "user": "U0000000077", "via": "slack:#migrations"}
    jira = {"channel": "x", "ts": "y", "via": "jira:MIG"}  # not Slack's: not touched
    copies = [{**c, "via": "slack:#deploys"} for c in out["copies"]] + [gone, jira]
    decided = make_view(status=RequestStatus.DECIDED, decided_action="approve", notify=True,
                        message_ref={**ref, "copies": copies}, decisions=(decision("approve"),))
    channel.update_request(decided)
    with fake._lock:
        messages = list(fake.messages.values())
    assert not [m for m in messages if has_buttons(m)]
    for copy in out["copies"]:
        message = fake.message(copy["channel"], copy["ts"])
        assert len(message.versions) == 1 and "✅ Approved by <@U0000000001>" in str(message.blocks)
    updated = {(c.params["channel"], c.params["ts"]) for c in fake.calls_to("chat.update")}
    assert ("x", "y") not in updated and (gone["channel"], gone["ts"]) in updated


def test_an_update_of_a_request_not_posted_in_slack_updates_only_its_slack_copies(fake: FakeSlack,
                                                                                  client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    jira_ref = {"key": "jira:10001", "issue_key": "MIG-1"}
    out = channel.remind(make_view(channel="jira:MIG", message_ref=jira_ref, escalation=True,
                                   escalate_channel="slack:#deploys", escalate_to=Approvers(slack_users=(BACKUP,))))
    copies = [{**c, "via": "slack:#deploys"} for c in out["copies"]]
    channel.update_request(make_view(channel="jira:MIG", status=RequestStatus.DECIDED, decided_action="approve",
                                     message_ref={**jira_ref, "copies": copies}, decisions=(decision("approve"),)))
    assert [(c.params["channel"]) for c in fake.calls_to("chat.update")] == ["C0000000002", "D0000000042"]
    assert not has_buttons(fake.channel_messages("C0000000002")[0])


def test_an_approver_who_deleted_their_dm_gets_the_whole_request_again(fake: FakeSlack, client) -> None:  # noqa: ANN001
    channel = SlackChannel(client)
    ref = channel.open_request(make_view(approvers=Approvers(slack_users=("U0000000001",)), notify=True))
    [dm] = ref["dms"]
    with fake._lock:
        del fake.messages[(dm["channel"], dm["ts"])]
    out = channel.remind(make_view(message_ref=ref, approvers=Approvers(slack_users=("U0000000001",)), notify=True,
                                   reminder=True))
    [again] = fake.channel_messages(dm["channel"])
    assert has_buttons(again) and again.text.startswith("⏰ Reminder")
    assert out == {"copies": [{"channel": dm["channel"], "ts": again.ts, "user": "U0000000001"}]}
