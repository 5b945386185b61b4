"""Jira webhooks: signature check, the Cloud and Server / Data Center payload shapes as one event, and the
comment commands.

Shapes accepted (see Jira's "Webhooks" developer documentation and the samples in ``tests/fixtures/jira``):

- ``comment_created`` / ``comment_updated``: ``comment`` with ``id``, ``self``, ``body``, ``author``,
  ``updateAuthor``; Cloud adds ``issue``, Server / Data Center does not (the issue id is in ``comment.self``,
  ``…/rest/api/2/issue/<issue id>/comment/<comment id>``).
- ``jira:issue_updated`` with ``issue_event_type_name`` ``issue_commented`` / ``issue_comment_edited``: the
  companion event Server sends for the same comment (``issue`` + ``comment`` + ``user``).
- ``jira:issue_updated`` with a ``status`` item in ``changelog.items`` (a transition; ``toString`` is the new
  status name; Cloud adds ``fieldId``); ``user`` is who moved it; a transition screen's comment comes as
  ``comment``.

A comment's ``body`` is wiki markup (REST API v2) or an Atlassian Document Format document (REST API v3, read
as text by ``integrations.jira.adf``). Everything else is not for Hazel (``parse_event`` returns None).

The site: every payload names the Jira that sent it in its ``self`` URLs (``comment.self``, ``issue.self``,
``user.self``: ``<base URL>/rest/api/2/…``); ``matchedWebhookIds`` and a cloud id are not in every shape.
Comment and changelog ids are unique only within one site, so a delivery is keyed by site, issue and id
(``delivery_key``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import urlsplit

from integrations.jira.adf import ADFError, adf_text, is_adf, opens_with_own_words
from integrations.jira.client import user_id

SIGNATURE_HEADER = "X-Hub-Signature"
WEBHOOK_ID_HEADER = "X-Atlassian-Webhook-Identifier"
_ISSUE_IN_COMMENT_URL = re.compile(r"/issue/(\d+)/comment/(\d+)")
_COMMAND = re.compile(r"^\s*/([A-Za-z]+)(?=\s|$)(.*)$", re.DOTALL)
_WRAPPED = re.compile(r"^\s*\{(noformat|code)(?::[^}]*)?\}\n?(.*?)\n?\{\1\}\s*$", re.DOTALL)
COMMANDS = ("approve", "reject", "edit", "rewind", "feedback")


class MalformedWebhookError(ValueError):
    """The payload is not a Jira webhook of a kind Hazel handles (the message says what is missing)."""


def verify_signature(secret: str, body: bytes, header: str | None) -> bool:
    """True when ``header`` is ``sha256=<hex HMAC-SHA256 of body with secret>`` (Jira's ``X-Hub-Signature``
    for webhooks registered with a secret; compared in constant time)."""
    if not header or not secret:
        return False
    method, _, signature = header.strip().partition("=")
    if method.lower() != "sha256" or not signature:
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature.strip().lower())


def sign(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature`` value Jira sends for ``body`` (for tests and tools)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class JiraUser:
    """Who acted: ``id`` is the account id (Cloud) or user name (Server), as approver lists name people;
    ``email`` is the ``emailAddress`` the payload shows (Server does; Cloud hides it unless the user's profile
    visibility allows), matched against the people file."""

    id: str
    display_name: str | None = None
    email: str | None = None


@dataclass(frozen=True)
class JiraEvent:
    """One thing a person did on an issue, whatever the payload shape.

    Attributes:
        kind: ``comment`` (a new or edited comment), ``transition`` (the status changed) or ``deleted`` (the
            issue was deleted: ``jira:issue_deleted``).
        issue_id: Jira's numeric issue id (stable when an issue moves project; Hazel indexes issues by it).
        issue_key: e.g. ``MIG-12`` (absent from Server's ``comment_created``).
        actor: who commented (the editor, for an edited comment), who moved the issue or who deleted it.
        delivery_id: what makes this delivery unique across retries and companion events, and across issues
            and sites (``delivery_key``): ``<site>/issue/<issue id>/comment/<id>`` for a comment (also for a
            transition made with a comment), else ``…/changelog/<id>``, else ``…/webhook/<identifier>``; a
            deletion ``…/deleted/<issue id>`` (an issue is deleted once).
        text: the comment body (for a transition: its comment, or ""); an ADF body as its plain text.
        to_status, from_status: the new and the previous status names (transitions only).
        comment_id: the comment's id (a comment, or a transition made with one).
        webhook_event: ``webhookEvent`` (plus ``/issue_event_type_name`` when given), for logs.
        site: the Jira site as ``site_of`` names it (``example.atlassian.net``); None when no ``self`` URL says.
        at: when the person did it, UTC, by Jira's clock (``event_time``); None when the payload does not say.
        issue_status: the issue's status as the payload shows it (``issue.fields.status.name``; Cloud's
            ``comment_created`` carries it, Server's does not): a comment arriving on an issue already moved to
            an approve or reject status is that transition's comment, delivered before it.
        quoted_opening: the comment (an ADF body) opens with something other than its author's own line: a
            quote, a code block, a list (``adf.opens_with_own_words``); its text is then never a command
            (``parse_command(text, own_words=False)``), as a wiki-markup ``{quote}/approve{quote}`` is not.
    """

    kind: Literal["comment", "transition", "deleted"]
    issue_id: str
    issue_key: str | None
    actor: JiraUser
    delivery_id: str
    text: str = ""
    to_status: str | None = None
    from_status: str | None = None
    comment_id: str | None = None
    webhook_event: str = ""
    site: str | None = None
    at: datetime | None = None
    issue_status: str | None = None
    quoted_opening: bool = False


def _user(raw: Any, what: str) -> JiraUser:
    found = user_id(raw)
    if not found:
        raise MalformedWebhookError(f"{what} has no accountId or name")
    email = raw.get("emailAddress")
    return JiraUser(id=found, display_name=raw.get("displayName") or None,
                    email=email if isinstance(email, str) and "@" in email else None)


def site_of(*urls: Any) -> str | None:
    """The Jira site of the first usable ``self`` URL: its host in lower case, a port other than the scheme's
    default, and the context path before ``/rest/`` (Server installed under ``/jira``), e.g.
    ``example.atlassian.net``, ``jira.example.invalid:8080``, ``corp.example.com/jira``. The scheme is left
    out (one site behind http and https is one site). None when no URL is an absolute http(s) URL."""
    for url in urls:
        if not isinstance(url, str):
            continue
        parts = urlsplit(url.strip())
        try:
            port = parts.port
        except ValueError:
            continue
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            continue
        host = parts.hostname.lower()
        if port is not None and port != {"http": 80, "https": 443}[parts.scheme.lower()]:
            host += f":{port}"
        cut = parts.path.find("/rest/")
        return host + (parts.path[:cut] if cut >= 0 else "").rstrip("/")
    return None


def delivery_key(site: str | None, issue_id: str, kind: str, ident: str) -> str:
    """``<site>/issue/<issue id>/<kind>/<id>`` (``kind``: ``comment``, ``changelog``, ``webhook``): a
    delivery's key, unique across Jira sites and issues (a comment id alone is unique only within one site).
    At most 200 characters (the column's size): a longer site or id is replaced by its SHA-256 (16 hex).
    ``store/migrations/versions/0004_jira_delivery_keys.py`` rewrote older keys (``comment:<id>``) this way."""
    def short(text: str, limit: int) -> str:
        return text if len(text) <= limit else "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]

    return f"{short(site or '?', 120)}/issue/{short(issue_id, 24)}/{kind}/{short(ident, 32)}"


def event_time(payload: dict[str, Any]) -> datetime | None:
    """When the person acted, UTC: the payload's ``timestamp`` (milliseconds since the epoch, in every shape
    Jira Cloud and Server send: the comment's creation, its edit, the transition), else the comment's
    ``updated`` / ``created`` (``2019-02-15T19:11:18.321-0800``); None when neither is usable (nothing is
    refused for it: the time only binds a late delivery to the request the issue showed then)."""
    stamp = payload.get("timestamp")
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and 0 < stamp < 1e14:
        return datetime.fromtimestamp(stamp / 1000, tz=timezone.utc)
    comment = payload.get("comment")
    for field in ("updated", "created"):
        text = comment.get(field) if isinstance(comment, dict) else None
        try:
            at = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z") if isinstance(text, str) else None
        except ValueError:
            at = None
        if at is not None:
            return at.astimezone(timezone.utc)
    return None


def _comment(raw: Any) -> tuple[str, str, str | None, bool]:
    """(comment id, body as text, issue id from its ``self`` URL, whether the body opens with its author's own
    words: False for an ADF body that opens with a quote, a code block, a list… (``opens_with_own_words``))."""
    if not isinstance(raw, dict) or not raw.get("id"):
        raise MalformedWebhookError("comment event without comment.id")
    body, own = raw.get("body"), True
    if is_adf(body):
        try:
            body, own = adf_text(body), opens_with_own_words(body)
        except ADFError as exc:
            raise MalformedWebhookError(f"comment.body: {exc}") from None
    if not isinstance(body, str):
        raise MalformedWebhookError("comment.body is neither text nor an Atlassian Document Format document")
    m = _ISSUE_IN_COMMENT_URL.search(str(raw.get("self") or ""))
    return str(raw["id"]), body, m.group(1) if m else None, own


def parse_event(payload: Any, *, webhook_id: str | None = None) -> JiraEvent | None:
    """The event in a webhook payload, or None when it is nothing Hazel acts on.

    Raises:
        MalformedWebhookError: not a JSON object with ``webhookEvent``, or an event of a handled kind that
            lacks what it needs (comment id, issue id, author).
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("webhookEvent"), str):
        raise MalformedWebhookError("not a Jira webhook: no webhookEvent")
    name = payload["webhookEvent"]
    subtype = payload.get("issue_event_type_name")
    label = f"{name}/{subtype}" if subtype else name
    issue = payload.get("issue") if isinstance(payload.get("issue"), dict) else {}
    issue_key = issue.get("key") if isinstance(issue.get("key"), str) else None
    site = site_of(*(part.get("self") for part in (payload.get("comment"), issue, payload.get("user"))
                     if isinstance(part, dict)))

    if name in ("comment_created", "comment_updated") or (
            name == "jira:issue_updated" and subtype in ("issue_commented", "issue_comment_edited")
            and "comment" in payload and not _status_item(payload)):
        comment_id, body, issue_from_url, own = _comment(payload.get("comment"))
        issue_id = str(issue.get("id") or issue_from_url or "")
        if not issue_id:
            raise MalformedWebhookError("comment event without issue.id or an issue id in comment.self")
        raw = payload["comment"]
        edited = name == "comment_updated" or subtype == "issue_comment_edited"
        author = raw.get("updateAuthor") if edited and raw.get("updateAuthor") else raw.get("author")
        return JiraEvent(kind="comment", issue_id=issue_id, issue_key=issue_key,
                         actor=_user(author or payload.get("user"), "comment.author"),
                         delivery_id=delivery_key(site, issue_id, "comment", comment_id), text=body,
                         comment_id=comment_id, webhook_event=label, site=site, at=event_time(payload),
                         issue_status=_status_name(issue), quoted_opening=not own)

    if name == "jira:issue_updated":
        item = _status_item(payload)
        if item is None:
            return None
        if not issue.get("id"):
            raise MalformedWebhookError("jira:issue_updated without issue.id")
        comment_id, text, own = None, "", True
        if isinstance(payload.get("comment"), dict):
            comment_id, text, _, own = _comment(payload["comment"])
        changelog_id = (payload.get("changelog") or {}).get("id")
        kind, ident = (("comment", comment_id) if comment_id else ("changelog", changelog_id) if changelog_id
                       else ("webhook", webhook_id) if webhook_id else (None, None))
        if kind is None:
            raise MalformedWebhookError("status change without changelog.id or a webhook identifier")
        return JiraEvent(kind="transition", issue_id=str(issue["id"]), issue_key=issue_key,
                         actor=_user(payload.get("user"), "user"),
                         delivery_id=delivery_key(site, str(issue["id"]), kind, str(ident)), text=text,
                         to_status=str(item.get("toString") or ""), from_status=item.get("fromString") or None,
                         comment_id=comment_id, webhook_event=label, site=site, at=event_time(payload),
                         quoted_opening=not own)

    if name == "jira:issue_deleted":  # (Cloud and Server: the whole issue as it was, and who deleted it)
        if not issue.get("id"):
            raise MalformedWebhookError("jira:issue_deleted without issue.id")
        return JiraEvent(kind="deleted", issue_id=str(issue["id"]), issue_key=issue_key,
                         actor=_user(payload.get("user"), "user"),
                         delivery_id=delivery_key(site, str(issue["id"]), "deleted", str(issue["id"])),
                         webhook_event=label, site=site, at=event_time(payload))
    return None


def _status_name(issue: dict[str, Any]) -> str | None:
    fields = issue.get("fields")
    status = fields.get("status") if isinstance(fields, dict) else None
    name = status.get("name") if isinstance(status, dict) else None
    return name if isinstance(name, str) and name else None


def _status_item(payload: dict[str, Any]) -> dict[str, Any] | None:
    changelog = payload.get("changelog")
    items = changelog.get("items") if isinstance(changelog, dict) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and (item.get("fieldId") == "status" or item.get("field") == "status"):
            return item
    return None


@dataclass(frozen=True)
class Command:
    """A comment read as a decision: ``action`` is one of ``COMMANDS``, ``unknown`` (``/word`` that is no
    command; ``argument`` holds the word), or ``feedback`` for a plain comment (``plain`` is True)."""

    action: str
    argument: str
    plain: bool = False


def parse_command(text: str, *, own_words: bool = True) -> Command:
    """``/approve``, ``/reject REASON``, ``/edit VALUE`` (a wrapping ``{noformat}`` / ``{code}`` block is
    removed), ``/rewind STEP [feedback]``, ``/feedback TEXT``; anything else is plain feedback. Commands are
    case-insensitive; a path such as ``/etc/hosts`` is not a command. ``own_words=False`` (a comment that opens
    with a quote or a code block: ``JiraEvent.quoted_opening``): plain feedback, whatever it starts with."""
    m = _COMMAND.match(_unmarked(text or "")) if own_words else None
    if m is None:
        return Command("feedback", (text or "").strip(), plain=True)
    word, rest = m.group(1).lower(), m.group(2)
    if word not in COMMANDS:
        return Command("unknown", word)
    if word == "edit":
        rest = rest.strip("\r\n ")
        wrapped = _WRAPPED.match(rest)
        return Command("edit", wrapped.group(2) if wrapped else rest)
    return Command(word, rest.strip())


_MARKS = (("{{", "}}"), ("{*}", "{*}"), ("{_}", "{_}"), ("{+}", "{+}"), ("*", "*"), ("_", "_"), ("+", "+"),
          ("??", "??"), ("^", "^"), ("~", "~"))
"""Wiki markup's inline marks (monospace; bold, italic, underline, also in Jira's ``{*}`` form beside other
characters; citation, superscript, subscript) a command may be typed in: ``*/approve*``, ``*_/approve_*``."""


def _unmarked(text: str) -> str:
    """``text`` without the inline wiki marks around a command that opens it (``*/approve*``, ``{{/approve}}``,
    ``*_/approve_*``, ``_/reject_ too risky``, ``*/reject too risky*``: the marks at its start, and where each
    closes on that line, before a space, the line's end or the mark around it), as a document's bold
    ``/approve`` reads (formatting dropped). The same command in wiki markup was feedback, the run drafted again
    (fresh-user findings, s30 F6, s31 F5); a mark closing inside a word (``*/appro*ve``) is no mark. Struck-through
    text (``-/approve-``) is not unwrapped: a struck command is not meant."""
    first, newline, more = text.lstrip().partition("\n")
    ends: list[str] = []
    while not first.startswith("/"):
        mark = next(((start, end) for start, end in _MARKS if first.startswith(start)), None)
        if mark is None:
            return text
        ends.append(mark[1])
        first = first[len(mark[0]):]
    for depth in range(len(ends) - 1, -1, -1):  # the innermost mark closes first
        end, outer = ends[depth], ends[:depth]
        at = 1
        while True:
            at = first.find(end, at)
            if at < 0:
                return text
            after = first[at + len(end):]
            if not after or after[0].isspace() or any(after.startswith(o) for o in outer):
                break
            at += 1
        first = first[:at] + first[at + len(end):]
    return first + newline + more if ends else text


def split_rewind(argument: str) -> tuple[str, str | None]:
    """``STEP [feedback]`` -> (step, feedback or None)."""
    parts = argument.strip().split(None, 1)
    if not parts:
        return "", None
    return parts[0], (parts[1].strip() or None) if len(parts) > 1 else None
