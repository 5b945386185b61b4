"""A Jira comment whose answer was lost (Jira added it, then the request timed out) is not added again by the
retry: the comment carries a property naming its outbox message, and the retry looks for it first."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import requests

from integrations.base import DeliveryError
COMMENT_PROPERTY = "hazel.delivery"  # the comment property README documents
from store.models import Delivery, RequestStatus
from tests.integrations.jira.test_jira_channel import decision, fake, request, rsps, view  # noqa: F401 (fixtures)
from tests.support.fake_jira import FakeJira


def delivery(attempt: int, key: str = "a1b2c3d4e5f6/12") -> Delivery:
    return Delivery(key=key, attempt=attempt, queued_at=datetime.now(timezone.utc))


def test_a_vote_comment_whose_answer_was_lost_is_added_once(fake: FakeJira) -> None:
    channel = fake.channel()
    ref = channel.open_request(view(request(required=2)))
    voted = view(request(ref=ref, approvals=1, required=2), decisions=(decision("approve"),))
    fake.fail("POST", r"/comment$", after=True, exception=requests.ReadTimeout("read timed out"))
    with pytest.raises(DeliveryError):
        channel.update_request(voted.model_copy(update={"delivery": delivery(1)}))
    assert len(fake.bodies(ref["issue_id"])) == 1  # Jira did add it
    for n in (2, 3):  # the outbox's retries (another process, even: nothing is remembered in the channel)
        fake.channel().update_request(voted.model_copy(update={"delivery": delivery(n)}))
    [comment] = fake.comments[ref["issue_id"]]
    assert comment["properties"] == [{"key": COMMENT_PROPERTY, "value": {"key": "a1b2c3d4e5f6/12/outcome"}}]
    assert fake.count("GET", r"/comment$") == 2


def test_a_retry_adds_the_comment_when_the_first_attempt_did_not(fake: FakeJira) -> None:
    channel = fake.channel()
    ref = channel.open_request(view(request()))
    decided = view(request(ref=ref, status=RequestStatus.DECIDED, action="reject"), decisions=(decision("reject"),))
    fake.fail("POST", r"/comment$", exception=requests.ConnectionError("connection refused"))
    with pytest.raises(DeliveryError):
        channel.update_request(decided.model_copy(update={"delivery": delivery(1)}))
    channel.update_request(decided.model_copy(update={"delivery": delivery(2)}))
    other = view(request(ref=ref, status=RequestStatus.DECIDED, action="reject"), decisions=(decision("reject"),))
    channel.update_request(other.model_copy(update={"delivery": delivery(2, key="a1b2c3d4e5f6/13")}))
    assert len(fake.bodies(ref["issue_id"])) == 2, "another outbox message's comment is not mistaken for this one"
