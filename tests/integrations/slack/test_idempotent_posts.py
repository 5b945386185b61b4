"""A post whose answer was lost (timeout, dropped connection) is looked for before it is posted again: the fake
Slack Web API carries the call out and then stalls or closes the connection, and the retry (the outbox's next
attempt, ``Delivery.attempt`` 2) finds the message by its metadata instead of posting a second copy."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest

from integrations.base import DeliveryError
from integrations.slack import SlackChannel
METADATA_EVENT = "hazel_delivery"  # the metadata event type README documents
from integrations.slack.client import make_client
from store.models import Delivery, ProgressView, RequestView
from tests.support.fake_slack import FakeSlack
from tests.support.slack_views import make_view

MIGRATIONS = "C0000000001"


def attempt(view: RequestView | ProgressView, n: int, key: str = "abcdef123456/41") -> RequestView | ProgressView:
    """``view`` as the outbox hands it over on its ``n``-th delivery attempt."""
    return view.model_copy(update={"delivery": Delivery(key=key, attempt=n, queued_at=datetime.now(timezone.utc))})


@pytest.fixture
def quick(fake: FakeSlack):  # noqa: ANN201
    """A client that gives up waiting after 1 s (production: 10 s)."""
    return make_client(fake.bot_token, base_url=fake.api_url, backoff_sec=0.01, timeout_sec=1)


@pytest.mark.parametrize("lost", ["stall", "dropped connection"])
def test_a_request_whose_answer_was_lost_is_posted_once(fake: FakeSlack, quick, lost: str) -> None:  # noqa: ANN001
    fake.lose_answers("chat.postMessage", stall_sec=3 if lost == "stall" else None)
    channel = SlackChannel(quick)
    with pytest.raises(DeliveryError):
        channel.open_request(attempt(make_view(), 1))
    [posted] = fake.channel_messages(MIGRATIONS, top_level=True)  # Slack did post it
    assert posted.metadata == {"event_type": METADATA_EVENT, "event_payload": {"key": "abcdef123456/41/request"}}

    ref = SlackChannel(quick).open_request(attempt(make_view(), 2))  # the retry (here: another process)
    assert [m.ts for m in fake.channel_messages(MIGRATIONS, top_level=True)] == [posted.ts] == [ref["ts"]]
    assert len(fake.calls_to("chat.postMessage")) == 1
    [looked] = fake.calls_to("conversations.history")
    assert looked.params["channel"] == MIGRATIONS and looked.params["include_all_metadata"] in ("1", "true", "True")


def test_a_retry_posts_when_the_first_attempt_left_nothing(fake: FakeSlack, client) -> None:  # noqa: ANN001
    fake.fail("chat.postMessage", status=503)
    channel = SlackChannel(client)
    with pytest.raises(DeliveryError):
        channel.open_request(attempt(make_view(), 1))
    ref = channel.open_request(attempt(make_view(), 2))
    assert [m.ts for m in fake.channel_messages(MIGRATIONS, top_level=True)] == [ref["ts"]]
    other = SlackChannel(client).open_request(attempt(make_view(request_id=8), 2, key="abcdef123456/42"))
    assert other["ts"] != ref["ts"], "another outbox message's post is not mistaken for this one"


def test_a_thread_reply_whose_answer_was_lost_is_posted_once(fake: FakeSlack, client, quick) -> None:  # noqa: ANN001
    view = make_view()
    ref = SlackChannel(client).open_request(view)
    request = view.request.model_copy(update={"message_ref": ref})
    progress = ProgressView(run=view.run, workflow=view.workflow, event="completed", request=request,
                            steps=("write_scripts",))
    fake.lose_answers("chat.postMessage", stall_sec=3)
    with pytest.raises(DeliveryError):
        SlackChannel(quick).progress(attempt(progress, 1, key="abcdef123456/50"))
    SlackChannel(quick).progress(attempt(progress, 2, key="abcdef123456/50"))
    assert len(fake.channel_messages(MIGRATIONS, thread_ts=ref["ts"])) == 1
    [looked] = fake.calls_to("conversations.replies")
    assert looked.params["ts"] == ref["ts"]


def test_a_refused_lookup_falls_back_to_posting_and_says_so_once(fake: FakeSlack, client, caplog) -> None:  # noqa: ANN001
    fake.fail("conversations.history", error="missing_scope", times=None)
    channel = SlackChannel(client)
    with caplog.at_level(logging.WARNING, logger="hazel.slack"):
        first = channel.open_request(attempt(make_view(), 2))
        second = channel.open_request(attempt(make_view(request_id=8), 2, key="abcdef123456/42"))
    assert first["ts"] and second["ts"]
    assert len([r for r in caplog.records if "refused to look" in r.getMessage()]) == 1
