"""Parsing Jira webhooks (Cloud and Server / Data Center shapes), the signature, and the comment commands."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from integrations.jira import MalformedWebhookError, parse_command, parse_event, sign, verify_signature
from integrations.jira.webhook import split_rewind
from tests.support import jira_payloads as p

ISSUE = {"id": "10001", "key": "MIG-1", "fields": {"status": {"name": "To Do"}, "labels": ["hazel"]}}


# -- the samples as they are ------------------------------------------------------------------------------

def test_cloud_comment_sample_as_sent() -> None:
    event = parse_event(p.fixture(p.CLOUD_COMMENT))
    assert event is not None and event.kind == "comment"
    assert (event.issue_id, event.issue_key, event.comment_id) == ("10040", "TES-41", "10019")
    assert event.actor.id == "000000000000000000000000"  # Cloud: the account id, not the legacy name
    assert event.actor.display_name == "Example User"
    assert event.text == "Added a comment"
    assert event.delivery_id == "example.atlassian.net/issue/10040/comment/10019"
    assert event.site == "example.atlassian.net"


def test_server_issue_commented_sample_is_the_same_comment() -> None:
    event = parse_event(p.fixture(p.SERVER_COMMENTED))
    assert event is not None and event.kind == "comment"
    assert (event.issue_id, event.comment_id, event.text) == ("10013", "10082", "unik")
    assert event.actor.id == "exampleuser"  # Server: the user name
    assert event.delivery_id == "jira.example.invalid:8080/issue/10013/comment/10082"


@pytest.mark.parametrize("sample, to, frm", [
    (p.CLOUD_TRANSITION, "In Progress", "To Do"),
    (p.CLOUD_TRANSITION_NO_FIELD_ID, "In Progress", "To Do"),
    ("jira_cloud__issue_updated__transition_to_done_with_resolution__mattermost.json", "Done", "In Progress"),
    (p.SERVER_TRANSITION, "Resolved", "In Progress"),
])
def test_transition_samples(sample: str, to: str, frm: str) -> None:
    payload = p.fixture(sample)
    event = parse_event(payload, webhook_id="w-1")
    assert event is not None and event.kind == "transition"
    assert (event.to_status, event.from_status) == (to, frm)
    assert event.issue_id == payload["issue"]["id"]
    assert event.delivery_id == f"{event.site}/issue/{event.issue_id}/changelog/{payload['changelog']['id']}"
    assert event.site in ("example.atlassian.net", "jira.example.invalid:8080")
    assert event.text == ""


# -- derived shapes ------------------------------------------------------------------------------------------

def test_when_the_person_acted_is_read_from_the_samples_timestamp_else_the_comments_time() -> None:
    from datetime import datetime, timezone

    cloud = parse_event(p.fixture(p.CLOUD_COMMENT))  # timestamp 1550286678321, created ...18.321-0800
    assert cloud.at == datetime(2019, 2, 16, 3, 11, 18, 321000, tzinfo=timezone.utc)
    moved = parse_event(p.fixture(p.SERVER_TRANSITION))
    assert moved.at == datetime.fromtimestamp(1565652182.025, tz=timezone.utc)
    payload = p.fixture(p.CLOUD_COMMENT)
    del payload["timestamp"]
    payload["comment"]["updated"] = "2019-02-15T19:20:00.500-0800"  # an edit: when it was edited
    assert parse_event(payload).at == datetime(2019, 2, 16, 3, 20, 0, 500000, tzinfo=timezone.utc)
    for stamp in (True, "1550286678321", -5, 10**15):  # unusable: the comment's time, else none
        payload = p.fixture(p.CLOUD_COMMENT)
        payload["timestamp"] = stamp
        assert parse_event(payload).at == datetime(2019, 2, 16, 3, 11, 18, 321000, tzinfo=timezone.utc)
        payload["comment"].update(created="yesterday", updated=None)
        assert parse_event(payload).at is None


def test_server_comment_created_has_no_issue_object() -> None:
    payload = p.comment_event(ISSUE, "looks good", "sme", cloud=False, comment_id="555")
    assert "issue" not in payload
    event = parse_event(payload)
    assert event is not None
    assert (event.issue_id, event.issue_key, event.actor.id, event.delivery_id) == (
        "10001", None, "sme", "jira.example.invalid:8080/issue/10001/comment/555")


def test_comment_updated_is_read_as_the_editor() -> None:
    payload = p.comment_event(ISSUE, "/approve", "author-1", event="comment_updated", comment_id="9")
    payload["comment"]["updateAuthor"] = p.user("editor-2", cloud=True)
    event = parse_event(payload)
    assert event is not None and event.actor.id == "editor-2" and event.delivery_id.endswith("/issue/10001/comment/9")


def test_transition_with_a_comment_uses_the_comment() -> None:
    payload = p.transition_event(ISSUE, "Rejected", "To Do", "sme", comment="the rollback is missing")
    event = parse_event(payload)
    assert event is not None and event.kind == "transition"
    assert event.text == "the rollback is missing"
    assert event.delivery_id == f"example.atlassian.net/issue/10001/comment/{payload['comment']['id']}"


def test_transition_without_changelog_id_falls_back_to_the_webhook_identifier() -> None:
    payload = p.transition_event(ISSUE, "Approved", "To Do", "sme")
    del payload["changelog"]["id"]
    assert parse_event(payload, webhook_id="abc").delivery_id == "example.atlassian.net/issue/10001/webhook/abc"
    with pytest.raises(MalformedWebhookError):
        parse_event(payload)


@pytest.mark.parametrize("payload", [
    {"webhookEvent": "jira:issue_created", "issue": {"id": "1"}},
    {"webhookEvent": "jira:issue_updated", "issue": {"id": "1"},
     "changelog": {"id": "5", "items": [{"field": "summary", "toString": "x"}]}},
    {"webhookEvent": "comment_deleted", "comment": {"id": "1"}},
    {"webhookEvent": "worklog_updated"},
])
def test_other_events_are_not_for_hazel(payload: dict) -> None:
    assert parse_event(payload) is None


@pytest.mark.parametrize("payload, message", [
    ([], "webhookEvent"),
    ({"no": "event"}, "webhookEvent"),
    ({"webhookEvent": "comment_created"}, "comment.id"),
    ({"webhookEvent": "comment_created", "comment": {"id": "1", "body": "x", "self": "nowhere",
                                                     "author": {"accountId": "a"}}}, "issue"),
    ({"webhookEvent": "comment_created", "comment": {"id": "1", "body": {"type": "paragraph"},
                                                     "self": "/issue/1/comment/1", "author": {}}}, "neither text"),
    ({"webhookEvent": "comment_created", "comment": {"id": "1", "body": 42,
                                                     "self": "/issue/1/comment/1", "author": {}}}, "neither text"),
    ({"webhookEvent": "comment_created", "comment": {"id": "1", "body": "x", "self": "/issue/1/comment/1",
                                                     "author": {"displayName": "nobody"}}}, "accountId"),
    ({"webhookEvent": "jira:issue_updated", "issue": {},
      "changelog": {"id": "1", "items": [{"field": "status", "toString": "Done"}]}}, "issue.id"),
])
def test_malformed_payloads_say_what_is_missing(payload: object, message: str) -> None:
    with pytest.raises(MalformedWebhookError, match=message.replace(".", r"\.")):
        parse_event(payload)


# -- signature --------------------------------------------------------------------------------------------

def test_signature_is_hmac_sha256_of_the_raw_body() -> None:
    body = json.dumps(p.fixture(p.CLOUD_COMMENT)).encode()
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert sign("s3cret", body) == expected
    assert verify_signature("s3cret", body, expected)
    assert verify_signature("s3cret", body, expected.upper().replace("SHA256", "sha256"))


@pytest.mark.parametrize("header", [None, "", "sha256=", "sha1=abc", "sha256=00", "garbage"])
def test_bad_signatures(header: str | None) -> None:
    assert not verify_signature("s3cret", b"{}", header)


def test_signature_over_other_bytes_or_secret_fails() -> None:
    header = sign("s3cret", b'{"a": 1}')
    assert not verify_signature("s3cret", b'{"a":1}', header)
    assert not verify_signature("other", b'{"a": 1}', header)


# -- commands ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, action, argument, plain", [
    ("/approve", "approve", "", False),
    ("  /APPROVE looks fine", "approve", "looks fine", False),
    ("/reject the rollback is missing", "reject", "the rollback is missing", False),
    ("/reject", "reject", "", False),
    ("/feedback add an index", "feedback", "add an index", False),
    ("/rewind draft_plan add a rollback check", "rewind", "draft_plan add a rollback check", False),
    ("Please add an index on email", "feedback", "Please add an index on email", True),
    ("/etc/hosts is not touched, right?", "feedback", "/etc/hosts is not touched, right?", True),
    ("/aprove", "unknown", "aprove", False),
    # in wiki markup's inline marks, as a document's bold command reads (s30 F6: it was feedback)
    ("*/approve*", "approve", "", False),
    ("_/approve_", "approve", "", False),
    ("{{/approve}}", "approve", "", False),
    ("+/approve+", "approve", "", False),
    ("*/reject* too risky", "reject", "too risky", False),
    ("*/reject too risky*", "reject", "too risky", False),
    ("-/approve-", "feedback", "-/approve-", True),  # (struck through: not meant)
    ("*/etc/hosts* is not touched", "feedback", "*/etc/hosts* is not touched", True),
    ("*/approve", "feedback", "*/approve", True),  # (no closing mark: not a mark)
    # nested, in Jira's {*} form, and the other inline marks (s31 F5); a mark closing inside a word is none
    ("*_/approve_*", "approve", "", False),
    ("{*}/approve{*}", "approve", "", False),
    ("??/approve??", "approve", "", False),
    ("_*/reject*_ too risky", "reject", "too risky", False),
    ("*/appro*ve", "feedback", "*/appro*ve", True),
])
def test_commands(text: str, action: str, argument: str, plain: bool) -> None:
    command = parse_command(text)
    assert (command.action, command.argument, command.plain) == (action, argument, plain)


def test_edit_keeps_the_value_and_unwraps_blocks() -> None:
    assert parse_command("/edit\nline one\n  line two\n").argument == "line one\n  line two"
    assert parse_command('/edit {code:json}\n{"a.sql": "SELECT 1;"}\n{code}').argument == '{"a.sql": "SELECT 1;"}'
    assert parse_command("/edit\n{noformat}\nplan v2\n{noformat}").argument == "plan v2"


def test_split_rewind() -> None:
    assert split_rewind("draft_plan add a check") == ("draft_plan", "add a check")
    assert split_rewind(" #3 ") == ("#3", None)
    assert split_rewind("") == ("", None)
