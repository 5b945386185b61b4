"""Jira webhooks for tests, built from the real samples in ``tests/fixtures/jira`` (our ids, bodies and
statuses substituted), signed like Jira signs them, and sent over HTTP to the running app."""

from __future__ import annotations

import copy
import itertools
import json
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

import httpx

from integrations.jira import sign

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "jira"
CLOUD_COMMENT = "jira_cloud__comment_created__mattermost.json"
CLOUD_TRANSITION = "jira_cloud__issue_updated__status_transition_with_fieldId__mattermost.json"
CLOUD_TRANSITION_NO_FIELD_ID = "jira_cloud__issue_updated__status_transition__zulip.json"
SERVER_COMMENTED = "jira_server__issue_updated__issue_commented_companion_event__mattermost.json"
SERVER_TRANSITION = "jira_server__issue_updated__issue_resolved_transition__mattermost.json"
CLOUD_DELETED = "jira_cloud__issue_deleted__shape_of_limacharlie_capture.json"
_comment_ids = itertools.count(30001)
_changelog_ids = itertools.count(40001)


@lru_cache(maxsize=None)
def _load(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def fixture(name: str) -> dict[str, Any]:
    """A fresh copy of a sample payload."""
    return json.loads(_load(name))


def new_comment_id() -> str:
    return str(next(_comment_ids))


def user(person: str, *, cloud: bool, display: str | None = None, base: str | None = None) -> dict[str, Any]:
    """A user object as the sample payloads carry it: Cloud by ``accountId``, Server by ``name``/``key``."""
    if cloud:
        raw = copy.deepcopy(fixture(CLOUD_COMMENT)["comment"]["author"])
        for legacy in ("name", "key"):
            raw.pop(legacy, None)
        raw.update(accountId=person, self=f"{base or 'https://example.atlassian.net'}/rest/api/2/user?accountId={person}")
    else:
        raw = copy.deepcopy(fixture(SERVER_COMMENTED)["user"])
        raw.update(name=person, key=person,
                   self=f"{base or 'http://jira.example.invalid:8080'}/rest/api/2/user?username={person}")
    raw["displayName"] = display or person
    return raw


def _stamp(payload: dict[str, Any], at: datetime | None) -> dict[str, Any]:
    """``payload`` with Jira's times set to ``at`` (default: now), as Jira sends them: ``timestamp`` in
    milliseconds since the epoch, the comment's ``created`` / ``updated`` as ``2019-02-15T19:11:18.321-0800``
    (the samples carry their 2019 times)."""
    at = at or datetime.now(timezone.utc)
    payload["timestamp"] = int(at.timestamp() * 1000)
    comment = payload.get("comment")
    if isinstance(comment, dict):
        text = at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}" + at.strftime("%z")
        comment.update(created=text, updated=text)
    return payload


def _issue(template: dict[str, Any], issue: dict[str, Any], base: str) -> dict[str, Any]:
    out = copy.deepcopy(template)
    out.update(id=issue["id"], key=issue["key"], self=f"{base}/rest/api/2/issue/{issue['id']}")
    out["fields"]["project"]["key"] = issue["key"].split("-")[0]
    out["fields"]["status"]["name"] = issue["fields"]["status"]["name"]
    out["fields"]["labels"] = list(issue["fields"].get("labels", []))
    return out


def _comment(template: dict[str, Any], issue_id: str, comment_id: str, body: str, author: dict[str, Any],
             base: str) -> dict[str, Any]:
    out = copy.deepcopy(template)
    out.update(id=comment_id, body=body, author=author, updateAuthor=author,
               self=f"{base}/rest/api/2/issue/{issue_id}/comment/{comment_id}")
    return out


def comment_event(issue: dict[str, Any], body: str | dict[str, Any], person: str, *, cloud: bool = True,
                  base: str | None = None, comment_id: str | None = None, event: str = "comment_created",
                  display: str | None = None, at: datetime | None = None) -> dict[str, Any]:
    """``comment_created`` / ``comment_updated``: Cloud's with ``issue``, Server's without (the issue id is
    only in ``comment.self``); ``body`` is wiki markup, or an ADF document (``adf``) as REST API v3 carries it.
    ``at``: when the comment was written (default: now)."""
    base = base or ("https://example.atlassian.net" if cloud else "http://jira.example.invalid:8080")
    comment_id = comment_id or new_comment_id()
    author = user(person, cloud=cloud, display=display, base=base)
    if cloud:
        payload = fixture(CLOUD_COMMENT)
        payload["issue"] = _issue(payload["issue"], issue, base)
        payload["comment"] = _comment(payload["comment"], issue["id"], comment_id, body, author, base)
    else:
        sample = fixture(SERVER_COMMENTED)
        payload = {"timestamp": sample["timestamp"], "webhookEvent": "comment_created",
                   "comment": _comment(sample["comment"], issue["id"], comment_id, body, author, base)}
    payload["webhookEvent"] = event
    return _stamp(payload, at)


def server_issue_commented(issue: dict[str, Any], body: str, person: str, *, comment_id: str,
                           base: str = "http://jira.example.invalid:8080",
                           at: datetime | None = None) -> dict[str, Any]:
    """Server's companion ``jira:issue_updated`` / ``issue_commented`` for the same comment."""
    payload = fixture(SERVER_COMMENTED)
    author = user(person, cloud=False, base=base)
    payload["user"] = author
    payload["issue"] = _issue(payload["issue"], issue, base)
    payload["comment"] = _comment(payload["comment"], issue["id"], comment_id, body, author, base)
    return _stamp(payload, at)


def transition_event(issue: dict[str, Any], to_status: str, from_status: str, person: str, *, cloud: bool = True,
                     base: str | None = None, comment: str | None = None, changelog_id: str | None = None,
                     sample: str | None = None, at: datetime | None = None,
                     comment_id: str | None = None) -> dict[str, Any]:
    """``jira:issue_updated`` with a ``status`` changelog item (Cloud's carries ``fieldId``); ``at``: when the
    issue was moved (default: now)."""
    base = base or ("https://example.atlassian.net" if cloud else "http://jira.example.invalid:8080")
    payload = fixture(sample or (CLOUD_TRANSITION if cloud else SERVER_TRANSITION))
    payload["user"] = user(person, cloud=cloud, base=base)
    payload["issue"] = _issue(payload["issue"], issue, base)
    payload["issue"]["fields"]["status"]["name"] = to_status
    items = payload["changelog"]["items"]
    status_item = next(i for i in items if i["field"] == "status")
    status_item.update(fromString=from_status, toString=to_status)
    payload["changelog"]["id"] = changelog_id or str(next(_changelog_ids))
    if comment is not None:
        author = user(person, cloud=cloud, base=base)
        template = fixture(SERVER_COMMENTED)["comment"]
        payload["comment"] = _comment(template, issue["id"], comment_id or new_comment_id(), comment, author, base)
    return _stamp(payload, at)


def issue_deleted(issue: dict[str, Any], person: str, *, at: datetime | None = None,
                  base: str = "https://example.atlassian.net") -> dict[str, Any]:
    """Jira Cloud's ``jira:issue_deleted``: who deleted the issue (``user``) and the issue as it was."""
    payload = fixture(CLOUD_DELETED)
    payload["user"] = user(person, cloud=True, base=base)
    payload["issue"] = _issue(payload["issue"], issue, base)
    return _stamp(payload, at)


def adf(*blocks: dict[str, Any]) -> dict[str, Any]:
    """An Atlassian Document Format document (the comment body of Jira Cloud's REST API v3), e.g.
    ``adf(paragraph(text("/approve")))``; see developer.atlassian.com/cloud/jira/platform/apis/document/structure."""
    return {"type": "doc", "version": 1, "content": list(blocks)}


def paragraph(*inline: dict[str, Any]) -> dict[str, Any]:
    return {"type": "paragraph", "content": list(inline)}


def text(value: str, *marks: str) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "text", "text": value}
    if marks:
        node["marks"] = [{"type": m} for m in marks]
    return node


def send(url: str, payload: Any, *, secret: str | None, webhook_id: str | None = None,
         signature: str | None = None, raw: bytes | None = None) -> httpx.Response:
    """POST a webhook to ``url`` (``…/jira/webhook``) as Jira does: JSON body, ``X-Hub-Signature`` over the
    raw bytes (unless ``secret`` is None or ``signature`` overrides it), ``X-Atlassian-Webhook-Identifier``."""
    body = raw if raw is not None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "Atlassian Webhook HTTP Client"}
    if signature is not None:
        headers["X-Hub-Signature"] = signature
    elif secret is not None:
        headers["X-Hub-Signature"] = sign(secret, body)
    if webhook_id is not None:
        headers["X-Atlassian-Webhook-Identifier"] = webhook_id
    return httpx.post(url, content=body, headers=headers, timeout=30)
