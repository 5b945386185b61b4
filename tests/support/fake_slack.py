"""A fake Slack Web API on 127.0.0.1 for tests, reached through ``WebClient(base_url=fake.api_url)``.

It serves the methods Hazel calls, keeps what they did (messages, threads, ephemerals, modals, Home tabs,
uploaded files), records every call, and enforces Slack's published limits so that a message Slack would
refuse is refused here too:

- messages: at most 50 blocks; section text 1..3000 characters, at most 10 fields of 2000; header 150;
  context 1..10 elements; actions 1..25 elements; button text 75, value 2000, ``action_id``/``block_id`` 255;
  confirm dialog title 100, text 300, buttons 30; ``text`` 40,000; all block text together at most 13,000
  (``msg_blocks_too_long``, observed: slackapi/bolt-js#2509). Refusals answer ``invalid_blocks``.
- views: modals and Home tabs at most 100 blocks; modal title/submit/close 24; ``private_metadata`` 3000;
  ``callback_id`` 255; ``plain_text_input`` at most 3000 characters; ``static_select`` 1..100 options of text
  75 and value 150. Refusals answer ``invalid_arguments`` with messages, as Slack does.
- ``trigger_id``: only ids from ``new_trigger_id()``, usable once (``exchanged_trigger_id``) within
  ``trigger_ttl_sec`` (``expired_trigger_id``); ``expire(trigger_id)`` ages one at once.
- ``fail(method, ...)`` makes the next calls answer 429 ``ratelimited`` with ``Retry-After``, a 5xx, or an
  error code; ``fail_connections(method)`` resets the connection; ``lose_answers(method)`` carries the call out
  and then stalls (the client times out) or closes the connection instead of answering.
- ``response_url()``: a command's response URL on the fake (``/commands/…``, as Slack's
  ``https://hooks.slack.com/commands/…``); what is posted to it is kept in ``responses``, answered ``ok``, or
  ``response_status`` (e.g. 404 ``expired_url``) when set.
- ``conversations.history`` / ``conversations.replies`` (``oldest``, ``limit``/``cursor`` paging, message
  ``metadata`` only with ``include_all_metadata``) and ``conversations.list`` read what was posted.

Usage::

    with FakeSlack(channels={"migrations": "C0000000001"}) as slack:
        client = WebClient(token=slack.bot_token, base_url=slack.api_url)
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qsl, urlparse


@dataclass
class Call:
    """One Web API call as the fake saw it."""

    method: str
    params: dict[str, Any]
    token: str | None
    status: int = 200
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None


@dataclass
class Failure:
    status: int = 200
    error: str | None = None
    retry_after_sec: int = 1
    times: int | None = 1
    reset: bool = False
    after: bool = False
    """Carry the call out first, then withhold the answer (``stall_sec``, or close the connection)."""
    stall_sec: float = 0.0


@dataclass
class Message:
    channel: str
    ts: str
    text: str | None
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    metadata: dict[str, Any] | None = None
    versions: list[dict[str, Any]] = field(default_factory=list)
    """Earlier (text, blocks) of a message changed by ``chat.update``."""


class FakeSlack:
    """The fake Web API (see the module docstring). Thread-safe; start with ``with`` or ``start()``."""

    methods_seen: set[str] = set()
    """Every method any fake answered in this test session (the manifest test checks them)."""

    def __init__(self, *, channels: dict[str, str] | None = None, usergroups: dict[str, list[str]] | None = None,
                 bot_token: str = "xoxb-test-bot-token", app_token: str = "xapp-test-app-token",
                 trigger_ttl_sec: float = 3.0, emails: dict[str, str] | None = None) -> None:
        self.channels = dict(channels or {"migrations": "C0000000001", "deploys": "C0000000002"})
        self.usergroups = {k: list(v) for k, v in (usergroups or {}).items()}
        self.emails = dict(emails or {})
        """Profile emails by user id, for ``users.info`` (users without one have no ``profile.email``)."""
        self.bot_token = bot_token
        self.app_token = app_token
        self.trigger_ttl_sec = trigger_ttl_sec
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []
        self.homes: dict[str, dict[str, Any]] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self.socket_url: str | None = None
        self.responses: list[dict[str, Any]] = []
        """What was posted to ``response_url()`` URLs: each message's JSON, with its ``"url"``."""
        self.response_status: tuple[int, str] | None = None
        """When set, posts to a response URL are answered with it (status, body) and not kept."""
        self._failures: dict[str, list[Failure]] = {}
        self._triggers: dict[str, float] = {}
        self._used_triggers: set[str] = set()
        self._lock = threading.RLock()
        self._seq = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.url}/api/"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-slack", daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> "FakeSlack":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakeSlack":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- test controls -------------------------------------------------------------------------------------

    def fail(self, method: str, *, status: int = 200, error: str | None = None, retry_after_sec: int = 1,
             times: int | None = 1) -> None:
        """The next ``times`` calls of ``method`` (None: all, until ``clear_failures``) answer ``status``
        (429: ``ratelimited`` with ``Retry-After``) or, with status 200, ``{"ok": false, "error": error}``."""
        if status == 429 and error is None:
            error = "ratelimited"
        with self._lock:
            self._failures.setdefault(method, []).append(Failure(status, error, retry_after_sec, times))

    def fail_connections(self, method: str, *, times: int | None = 1) -> None:
        """The next ``times`` calls of ``method`` have their connection closed without an answer."""
        with self._lock:
            self._failures.setdefault(method, []).append(Failure(times=times, reset=True))

    def lose_answers(self, method: str, *, stall_sec: float | None = None, times: int | None = 1) -> None:
        """The next ``times`` calls of ``method`` are carried out (a message is posted), then not answered: the
        answer stalls ``stall_sec`` (longer than the client's timeout), or, without it, the connection closes."""
        with self._lock:
            self._failures.setdefault(method, []).append(
                Failure(times=times, after=True, reset=stall_sec is None, stall_sec=stall_sec or 0.0))

    def clear_failures(self) -> None:
        with self._lock:
            self._failures.clear()

    def new_trigger_id(self) -> str:
        """A trigger id as Slack puts in interaction payloads, valid for ``trigger_ttl_sec``."""
        n = next(self._seq)
        tid = f"{n}{int(time.time())}.2222222222222.{n:032x}"
        with self._lock:
            self._triggers[tid] = time.monotonic()
        return tid

    def response_url(self) -> str:
        """A slash command's ``response_url`` on the fake, unique to the command."""
        return f"{self.url}/commands/T0000000002/{next(self._seq)}/B6x3mNoSecretHere"

    def responses_to(self, url: str) -> list[dict[str, Any]]:
        """The messages posted to ``url`` (a ``response_url()``), in order."""
        with self._lock:
            return [r for r in self.responses if r["url"] == url]

    def expire(self, trigger_id: str) -> None:
        with self._lock:
            self._triggers[trigger_id] = time.monotonic() - self.trigger_ttl_sec - 1

    # -- reading what happened ---------------------------------------------------------------------------------

    def calls_to(self, method: str, *, ok: bool | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method and (ok is None or c.ok == ok)]

    def methods(self) -> set[str]:
        with self._lock:
            return {c.method for c in self.calls}

    def channel_messages(self, channel: str, *, thread_ts: str | None = None,
                         top_level: bool = False) -> list[Message]:
        """Messages in ``channel`` (an id), oldest first; only replies to ``thread_ts``, or only top-level."""
        with self._lock:
            found = [m for (c, _), m in self.messages.items() if c == channel]
        if thread_ts is not None:
            found = [m for m in found if m.thread_ts == thread_ts]
        if top_level:
            found = [m for m in found if m.thread_ts is None]
        return sorted(found, key=lambda m: float(m.ts))

    def message(self, channel: str, ts: str) -> Message:
        with self._lock:
            return self.messages[(channel, ts)]

    def ephemerals_for(self, user: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.ephemerals if e["user"] == user]

    def wait_for(self, predicate: Callable[[], Any], *, timeout_sec: float = 10.0, what: str = "condition") -> Any:
        """Poll ``predicate`` until it returns something truthy (which is returned)."""
        deadline = time.monotonic() + timeout_sec
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; calls: "
                                     f"{[(c.method, c.error) for c in self.calls[-15:]]}")
            time.sleep(0.02)

    # -- the API ------------------------------------------------------------------------------------------------

    def handle(self, method: str, params: dict[str, Any], token: str | None) -> tuple[int, dict[str, Any], dict]:
        """Answer one call: ``(HTTP status, JSON body, extra headers)``."""
        FakeSlack.methods_seen.add(method)
        call = Call(method, params, token)
        with self._lock:
            self.calls.append(call)
            failure = self._take_failure(method)
        if failure is not None and failure.after:
            status, body, headers = self._answer(call, method, params, token)
            if failure.reset:
                call.error = "connection_reset_after"
                raise ConnectionResetError
            time.sleep(failure.stall_sec)
            return status, body, headers
        if failure is not None:
            call.status, call.error = failure.status, failure.error or f"http_{failure.status}"
            if failure.reset:
                call.error = "connection_reset"
                raise ConnectionResetError
            headers = {"Retry-After": str(failure.retry_after_sec)} if failure.status == 429 else {}
            return failure.status, {"ok": False, "error": failure.error or "internal_error"}, headers
        return self._answer(call, method, params, token)

    def _answer(self, call: Call, method: str, params: dict[str, Any], token: str | None) -> tuple[int, dict, dict]:
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != expected:
            call.error = "invalid_auth" if token else "not_authed"
            return 200, {"ok": False, "error": call.error}, {}
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            call.error = "unknown_method"
            return 200, {"ok": False, "error": "unknown_method"}, {}
        with self._lock:
            body = handler(params)
        if not body.get("ok"):
            call.error = body.get("error")
        return 200, body, {}

    def _take_failure(self, method: str) -> Failure | None:
        queue = self._failures.get(method) or []
        if not queue:
            return None
        failure = queue[0]
        if failure.times is not None:
            failure.times -= 1
            if failure.times <= 0:
                queue.pop(0)
        return failure

    def _ts(self) -> str:
        return f"{int(time.time())}.{next(self._seq):06d}"

    def _resolve(self, channel: str | None) -> str | None:
        if not channel:
            return None
        if channel.startswith("#"):
            return self.channels.get(channel[1:])
        if channel[0] in "UW":
            return "D" + channel[1:]
        if channel in self.channels.values() or channel.startswith("D"):
            return channel
        return None

    def _auth_test(self, p: dict) -> dict:
        return {"ok": True, "url": "https://example-workspace.slack.com/", "team": "Example", "user": "hazel",
                "team_id": "T0000000001", "user_id": "U0000000BOT", "bot_id": "B0000000BOT"}

    def _chat_postMessage(self, p: dict) -> dict:
        channel = self._resolve(p.get("channel"))
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        problem = self._message_problem(p)
        if problem:
            return problem
        thread_ts = p.get("thread_ts")
        if thread_ts and (channel, thread_ts) not in self.messages:
            return {"ok": False, "error": "thread_not_found"}
        ts = self._ts()
        metadata = _json(p.get("metadata")) if p.get("metadata") is not None else None
        self.messages[(channel, ts)] = Message(channel, ts, p.get("text"), _blocks(p), thread_ts, metadata)
        return {"ok": True, "channel": channel, "ts": ts,
                "message": {"type": "message", "text": p.get("text"), "ts": ts, "bot_id": "B0000000BOT"}}

    def _page(self, p: dict, found: list[Message], key: str = "messages") -> dict:
        """One page of ``found`` (``limit``, ``cursor``: an offset), each message as Slack lists it."""
        start = int(p.get("cursor") or 0)
        limit = int(p.get("limit") or 100)
        oldest = float(p.get("oldest") or 0)
        found = [m for m in found if float(m.ts) > oldest]
        page = found[start:start + limit]
        metadata = str(p.get("include_all_metadata")).lower() in ("1", "true")
        out = []
        for m in page:
            item = {"type": "message", "ts": m.ts, "text": m.text, "bot_id": "B0000000BOT"}
            if m.thread_ts:
                item["thread_ts"] = m.thread_ts
            if metadata and m.metadata is not None:
                item["metadata"] = m.metadata
            out.append(item)
        more = start + limit < len(found)
        return {"ok": True, key: out, "has_more": more,
                "response_metadata": {"next_cursor": str(start + limit) if more else ""}}

    def _conversations_history(self, p: dict) -> dict:
        channel = p.get("channel")
        if channel not in self.channels.values() and not str(channel).startswith("D"):
            return {"ok": False, "error": "channel_not_found"}
        top = [m for (c, _), m in self.messages.items() if c == channel and m.thread_ts is None]
        return self._page(p, sorted(top, key=lambda m: -float(m.ts)))  # newest first, as Slack lists them

    def _conversations_replies(self, p: dict) -> dict:
        channel, ts = p.get("channel"), p.get("ts")
        if (channel, ts) not in self.messages:
            return {"ok": False, "error": "thread_not_found"}
        thread = [m for (c, t), m in self.messages.items() if c == channel and (t == ts or m.thread_ts == ts)]
        return self._page(p, sorted(thread, key=lambda m: float(m.ts)))  # the parent, then replies, oldest first

    def _conversations_list(self, p: dict) -> dict:
        channels = [{"id": cid, "name": name, "is_channel": True} for name, cid in self.channels.items()]
        start = int(p.get("cursor") or 0)
        limit = int(p.get("limit") or 100)
        more = start + limit < len(channels)
        return {"ok": True, "channels": channels[start:start + limit],
                "response_metadata": {"next_cursor": str(start + limit) if more else ""}}

    def _chat_update(self, p: dict) -> dict:
        key = (p.get("channel"), p.get("ts"))
        message = self.messages.get(key)  # type: ignore[arg-type]
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        problem = self._message_problem(p)
        if problem:
            return problem
        message.versions.append({"text": message.text, "blocks": message.blocks})
        message.text, message.blocks = p.get("text"), _blocks(p)
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": message.text}

    def _chat_postEphemeral(self, p: dict) -> dict:
        channel = self._resolve(p.get("channel"))
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        if not p.get("user"):
            return {"ok": False, "error": "user_not_found"}
        problem = self._message_problem(p)
        if problem:
            return problem
        ts = self._ts()
        self.ephemerals.append({"channel": channel, "user": p["user"], "text": p.get("text"),
                                "blocks": _blocks(p), "ts": ts})
        return {"ok": True, "message_ts": ts}

    def _views_open(self, p: dict) -> dict:
        trigger = p.get("trigger_id")
        issued = self._triggers.get(trigger or "")
        if issued is None:
            return {"ok": False, "error": "invalid_trigger_id"}
        if trigger in self._used_triggers:
            return {"ok": False, "error": "exchanged_trigger_id"}
        if time.monotonic() - issued > self.trigger_ttl_sec:
            return {"ok": False, "error": "expired_trigger_id"}
        view = _json(p.get("view"))
        problems = view_problems(view)
        if problems:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": problems}}
        self._used_triggers.add(trigger)  # type: ignore[arg-type]
        stored = {**view, "id": f"V{next(self._seq):010d}", "hash": f"{time.time():.6f}.hash",
                  "state": {"values": {}}, "trigger_id": trigger}
        self.views.append(stored)
        return {"ok": True, "view": stored}

    def _views_publish(self, p: dict) -> dict:
        view = _json(p.get("view"))
        if not p.get("user_id"):
            return {"ok": False, "error": "invalid_arguments"}
        problems = view_problems(view)
        if problems:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": problems}}
        self.homes[p["user_id"]] = view
        return {"ok": True, "view": {**view, "id": f"V{next(self._seq):010d}"}}

    def _users_info(self, p: dict) -> dict:
        """``users.info`` as Slack answers it with ``users:read.email``: ``profile.email`` when the user has one."""
        user = p.get("user")
        if not user or not str(user).startswith(("U", "W")):
            return {"ok": False, "error": "user_not_found"}
        profile = {"real_name": str(user), "display_name": str(user)}
        if user in self.emails:
            profile["email"] = self.emails[user]
        return {"ok": True, "user": {"id": user, "name": str(user).lower(), "profile": profile}}

    def _usergroups_users_list(self, p: dict) -> dict:
        group = p.get("usergroup")
        if group not in self.usergroups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(self.usergroups[group])}

    def _files_getUploadURLExternal(self, p: dict) -> dict:
        if not p.get("filename") or not str(p.get("length") or "").isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        fid = f"F{next(self._seq):010d}"
        self.files[fid] = {"filename": p["filename"], "length": int(p["length"]), "content": None}
        return {"ok": True, "upload_url": f"{self.url}/upload/{fid}", "file_id": fid}

    def upload(self, fid: str, data: bytes) -> tuple[int, str]:
        with self._lock:
            FakeSlack.methods_seen.add("upload")
            file = self.files.get(fid)
            if file is None:
                return 404, "not found"
            if len(data) != file["length"]:
                return 400, f"length {len(data)} != declared {file['length']}"
            file["content"] = data
            return 200, f"OK - {len(data)}"

    def _files_completeUploadExternal(self, p: dict) -> dict:
        entries = _json(p.get("files")) or []
        shared = []
        for entry in entries:
            file = self.files.get(entry.get("id"))
            if file is None or file["content"] is None:
                return {"ok": False, "error": "file_not_found"}
            channel = self._resolve(p.get("channel_id")) if p.get("channel_id") else None
            if p.get("channel_id") and channel is None:
                return {"ok": False, "error": "channel_not_found"}
            if p.get("thread_ts") and (channel, p["thread_ts"]) not in self.messages:
                return {"ok": False, "error": "thread_not_found"}
            file.update(title=entry.get("title"), channel=channel, thread_ts=p.get("thread_ts"),
                        initial_comment=p.get("initial_comment"))
            shared.append({"id": entry["id"], "title": entry.get("title"), "name": file["filename"]})
        return {"ok": True, "files": shared}

    def _apps_connections_open(self, p: dict) -> dict:
        if self.socket_url is None:
            return {"ok": False, "error": "socket_mode_not_enabled"}
        return {"ok": True, "url": self.socket_url}

    def _message_problem(self, p: dict) -> dict | None:
        blocks = _blocks(p)
        if not p.get("text") and not blocks:
            return {"ok": False, "error": "no_text"}
        if len(p.get("text") or "") > 40000:
            return {"ok": False, "error": "msg_too_long"}
        if p.get("blocks") is not None and not isinstance(blocks, list):
            return {"ok": False, "error": "invalid_blocks_format"}
        problems = block_problems(blocks, surface="message")
        if problems:
            return {"ok": False, "error": "invalid_blocks", "errors": problems}
        if sum(len(t) for t in _texts(blocks)) > 13000:
            return {"ok": False, "error": "msg_blocks_too_long"}
        return None


# -- Slack's limits ------------------------------------------------------------------------------------------------

def _texts(value: Any) -> list[str]:
    if isinstance(value, dict):
        out = [value["text"]] if isinstance(value.get("text"), str) else []
        for k, v in value.items():
            if k != "text" or not isinstance(v, str):
                out += _texts(v)
        return out
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def _text_problem(obj: Any, where: str, limit: int, *, plain_only: bool = False) -> list[str]:
    if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
        return [f"{where}: must be a text object"]
    if plain_only and obj["type"] != "plain_text":
        return [f"{where}: must be plain_text"]
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        return [f"{where}: must be more than 0 characters"]
    if len(text) > limit:
        return [f"{where}: must be less than {limit + 1} characters"]
    return []


def _element_problems(e: Any, where: str, surface: str) -> list[str]:
    if not isinstance(e, dict):
        return [f"{where}: must be an object"]
    out: list[str] = []
    if len(str(e.get("action_id", ""))) > 255:
        out.append(f"{where}/action_id: must be less than 256 characters")
    kind = e.get("type")
    if kind == "button":
        out += _text_problem(e.get("text"), f"{where}/text", 75, plain_only=True)
        if len(str(e.get("value", ""))) > 2000:
            out.append(f"{where}/value: must be less than 2001 characters")
        if e.get("style") not in (None, "primary", "danger"):
            out.append(f"{where}/style: must be primary or danger")
        confirm = e.get("confirm")
        if confirm is not None:
            out += _text_problem(confirm.get("title"), f"{where}/confirm/title", 100, plain_only=True)
            out += _text_problem(confirm.get("text"), f"{where}/confirm/text", 300)
            out += _text_problem(confirm.get("confirm"), f"{where}/confirm/confirm", 30, plain_only=True)
            out += _text_problem(confirm.get("deny"), f"{where}/confirm/deny", 30, plain_only=True)
    elif kind == "plain_text_input":
        if surface == "message":
            out.append(f"{where}: inputs are not allowed in messages")
        max_length = e.get("max_length", 3000)
        if not isinstance(max_length, int) or max_length > 3000:
            out.append(f"{where}/max_length: must be at most 3000")
        if len(e.get("initial_value") or "") > min(max_length if isinstance(max_length, int) else 3000, 3000):
            out.append(f"{where}/initial_value: must be less than {max_length + 1} characters")
        if e.get("placeholder") is not None:
            out += _text_problem(e["placeholder"], f"{where}/placeholder", 150, plain_only=True)
    elif kind == "static_select":
        options = e.get("options") or []
        if not 1 <= len(options) <= 100:
            out.append(f"{where}/options: must have 1 to 100 items")
        for i, o in enumerate(options):
            out += _text_problem(o.get("text"), f"{where}/options/{i}/text", 75, plain_only=True)
            if not 1 <= len(str(o.get("value", ""))) <= 150:
                out.append(f"{where}/options/{i}/value: must be 1 to 150 characters")
    else:
        out.append(f"{where}/type: unsupported element {kind!r}")
    return out


def block_problems(blocks: Any, *, surface: str) -> list[str]:
    """What Slack would refuse in ``blocks`` on ``surface`` (``message``, ``modal`` or ``home``)."""
    if blocks is None:
        return []
    if not isinstance(blocks, list):
        return ["blocks: must be an array"]
    limit = 50 if surface == "message" else 100
    out = [] if len(blocks) <= limit else [f"blocks: must have no more than {limit} items"]
    ids: set[str] = set()
    for i, b in enumerate(blocks):
        where = f"/blocks/{i}"
        kind = b.get("type") if isinstance(b, dict) else None
        block_id = b.get("block_id") if isinstance(b, dict) else None
        if block_id is not None:
            if len(str(block_id)) > 255:
                out.append(f"{where}/block_id: must be less than 256 characters")
            if block_id in ids:
                out.append(f"{where}/block_id: duplicate block_id {block_id!r}")
            ids.add(block_id)
        if kind == "section":
            if b.get("text") is None and not b.get("fields"):
                out.append(f"{where}: must have text or fields")
            if b.get("text") is not None:
                out += _text_problem(b["text"], f"{where}/text", 3000)
            for j, f in enumerate(b.get("fields") or []):
                out += _text_problem(f, f"{where}/fields/{j}", 2000)
            if len(b.get("fields") or []) > 10:
                out.append(f"{where}/fields: must have no more than 10 items")
            if b.get("accessory") is not None:
                out += _element_problems(b["accessory"], f"{where}/accessory", surface)
        elif kind == "header":
            out += _text_problem(b.get("text"), f"{where}/text", 150, plain_only=True)
        elif kind == "context":
            elements = b.get("elements") or []
            if not 1 <= len(elements) <= 10:
                out.append(f"{where}/elements: must have 1 to 10 items")
            for j, e in enumerate(elements):
                out += _text_problem(e, f"{where}/elements/{j}", 3000)
        elif kind == "actions":
            elements = b.get("elements") or []
            if not 1 <= len(elements) <= 25:
                out.append(f"{where}/elements: must have 1 to 25 items")
            action_ids = [e.get("action_id") for e in elements if isinstance(e, dict)]
            if len(set(action_ids)) != len(action_ids):
                out.append(f"{where}/elements: duplicate action_id")
            for j, e in enumerate(elements):
                out += _element_problems(e, f"{where}/elements/{j}", surface)
        elif kind == "input":
            if surface == "message":
                out.append(f"{where}: input blocks are not allowed in messages")
            out += _text_problem(b.get("label"), f"{where}/label", 2000, plain_only=True)
            if b.get("hint") is not None:
                out += _text_problem(b["hint"], f"{where}/hint", 2000, plain_only=True)
            out += _element_problems(b.get("element"), f"{where}/element", "modal")
        elif kind != "divider":
            out.append(f"{where}/type: unsupported block type {kind!r}")
    return out


def view_problems(view: Any) -> list[str]:
    """What Slack would refuse in a modal or Home tab view (``[ERROR] … [json-pointer:/view…]`` style)."""
    if not isinstance(view, dict) or view.get("type") not in ("modal", "home"):
        return ["[ERROR] view type must be modal or home [json-pointer:/view/type]"]
    out = []
    if view["type"] == "modal":
        out += _text_problem(view.get("title"), "/view/title", 24, plain_only=True)
        for key in ("submit", "close"):
            if view.get(key) is not None:
                out += _text_problem(view[key], f"/view/{key}", 24, plain_only=True)
        has_input = any(isinstance(b, dict) and b.get("type") == "input" for b in view.get("blocks") or [])
        if has_input and view.get("submit") is None:
            out.append("/view/submit: required when the view has input blocks")
    if len(view.get("private_metadata") or "") > 3000:
        out.append("/view/private_metadata: must be less than 3001 characters")
    if len(view.get("callback_id") or "") > 255:
        out.append("/view/callback_id: must be less than 256 characters")
    out += [p.replace("/blocks", "/view/blocks", 1) for p in block_problems(view.get("blocks") or [],
                                                                             surface=view["type"])]
    return [f"[ERROR] {p}" for p in out]


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _blocks(p: dict) -> Any:
    return _json(p.get("blocks")) if p.get("blocks") is not None else []


# -- HTTP ---------------------------------------------------------------------------------------------------------

def _handler_for(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            self._api()

        def do_POST(self) -> None:
            self._api()

        def _api(self) -> None:
            parsed = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if parsed.path.startswith("/upload/"):
                status, text = fake.upload(parsed.path.rsplit("/", 1)[-1], raw)
                self._send(status, text.encode(), "text/plain")
                return
            if parsed.path.startswith("/commands/"):
                with fake._lock:
                    answer = fake.response_status
                    if answer is None:
                        fake.responses.append({**json.loads(raw.decode("utf-8")), "url": fake.url + parsed.path})
                status, text = answer or (200, "ok")
                self._send(status, text.encode(), "text/plain")
                return
            if not parsed.path.startswith("/api/"):
                self._send(404, b"not found", "text/plain")
                return
            method = parsed.path[len("/api/"):]
            params: dict[str, Any] = dict(parse_qsl(parsed.query))
            ctype = self.headers.get("Content-Type") or ""
            if raw and "json" in ctype:
                params.update(json.loads(raw.decode("utf-8")))
            elif raw:
                params.update(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
            auth = self.headers.get("Authorization") or ""
            token = auth[7:] if auth.startswith("Bearer ") else params.pop("token", None)
            try:
                status, body, headers = fake.handle(method, params, token)
            except ConnectionResetError:
                self.close_connection = True
                self.connection.close()
                return
            self._send(status, json.dumps(body).encode(), "application/json; charset=utf-8", headers)

        def _send(self, status: int, data: bytes, ctype: str, headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    return Handler
