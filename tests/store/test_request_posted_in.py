"""``SteeringRequest.posted_in``: whether a message (a Slack conversation id and timestamp) is one posted for the
request: its message, an approver's DM, a reminder's or an escalation's copy."""

from __future__ import annotations

from datetime import datetime, timezone

from store.models import RequestStatus, SteeringRequest


def request(ref: dict | None) -> SteeringRequest:
    return SteeringRequest(id=1, run_id="abcdef123456", checkpoint_seq=1, point="review", title="Review",
                           channel="slack:#migrations", status=RequestStatus.PENDING, approvals_required=1,
                           approvals=0, created_at=datetime(2026, 1, 1, tzinfo=timezone.utc), message_ref=ref)


def test_the_message_its_dms_and_its_copies_are_posted_for_it_nothing_else() -> None:
    r = request({"channel": "C1", "ts": "1.1", "key": "C1:1.1", "dms": [{"channel": "D1", "ts": "2.2", "user": "U1"}],
                 "copies": [{"channel": "C2", "ts": "3.3", "via": "slack:#escalations"}, "junk", {"channel": "C3"}]})
    assert r.posted_in("C1", "1.1") and r.posted_in("D1", "2.2") and r.posted_in("C2", "3.3")
    assert not r.posted_in("C1", "2.2") and not r.posted_in("C2", "1.1") and not r.posted_in("C3", None)
    assert not r.posted_in(None, "1.1") and not r.posted_in("", "") and not r.posted_in("C1", None)
    assert not request(None).posted_in("C1", "1.1") and not request({"key": "MIG-1"}).posted_in("C1", "1.1")
