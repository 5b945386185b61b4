"""Serving the Bolt app: ``POST /slack/events`` on Hazel's FastAPI app (Socket Mode: ``bot.inbound.slack.socket_mode``).

The route is a thin adapter in the manner of Bolt's own (``slack_bolt.adapter.starlette``), with one
difference: Bolt's sync ``App.dispatch`` runs in the thread pool so that one slow request never blocks the
event loop. Bolt verifies every request's signature and timestamp (401 when either is wrong); the route checks
the signature first too, with Bolt's verifier, so that an unsigned request is 401 before its body's shape is
judged (400 ``malformed Slack request: <why>``), and refuses (401) a timestamp that is not an integer or a
signature that is not ASCII, which that verifier raises on (a 500). A signed form body that percent-decodes
to bytes that are not UTF-8 (Bolt would read ``%FF`` as U+FFFD) reaches no listener: ``not_utf8_answer``. A
body over ``HAZEL_MAX_BODY_BYTES`` never gets here: the app's ``bot.server.http.BodyLimit`` answers it 413
unread.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request, Response
from slack_bolt import App, BoltContext, BoltRequest
from slack_bolt.request.internals import build_context
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_sdk.signature import SignatureVerifier
from starlette.concurrency import run_in_threadpool

from bot.inbound import forms
from integrations.slack import blocks as B
from integrations.slack import modals as M

EVENTS_PATH = "/slack/events"
ACTION_IDS = frozenset(B.ACTION_PREFIX + action for action in B.BUTTON_LABELS)
"""The ``action_id`` of every button Hazel posts (``hazel_approve``, …; ``blocks.button``): the only ones a
``block_actions`` payload may carry (``interactions.BUTTON`` listens to these)."""
TIMESTAMP, SIGNATURE = "x-slack-request-timestamp", "x-slack-signature"


def slack_router(app: App, signing_secret: str | None = None) -> APIRouter:
    """``POST /slack/events``: events, interactivity (buttons, modals) and the ``/hazel`` command.

    With ``signing_secret`` (the app's, ``SLACK_SIGNING_SECRET``) a request's signature is checked first, with
    the verifier Bolt uses (slack_sdk's ``SignatureVerifier``), so that an unsigned request is answered 401
    whatever its body holds, before its shape is judged (a 400 would tell an unsigned sender what Hazel
    reads); Bolt checks it again in ``dispatch``. A body that is not UTF-8 cannot be verified as text (the
    verifier decodes it) and is answered 400: nothing acts on it either way."""
    router = APIRouter(tags=["slack"])
    verifier = SignatureVerifier(signing_secret) if signing_secret else None

    @router.post(EVENTS_PATH, include_in_schema=False)
    async def slack_events(req: Request) -> Response:
        timestamps, signatures = req.headers.getlist(TIMESTAMP), req.headers.getlist(SIGNATURE)
        if not verifiable(timestamps, signatures):
            return _unsigned()
        body = await req.body()
        if verifier is not None:
            try:
                unsigned = not verifier.is_valid(body, timestamps[-1] if timestamps else "0",
                                                 signatures[-1] if signatures else "")
            except UnicodeDecodeError:
                unsigned = False  # (not UTF-8: cannot be verified as text; answered 400 below, unread)
            if unsigned:
                return _unsigned()
        try:
            bolt_request = to_bolt_request(req, body)
        except (ValueError, AttributeError, TypeError, RecursionError) as exc:  # not UTF-8, not JSON, not an
            return _malformed(unreadable_reason(exc))  # object, nested too deeply: Bolt cannot build its request
        if not isinstance(bolt_request.body, dict):
            return _malformed("the payload is not a JSON object")
        read_as_form = bolt_request.content_type != "application/json" and not bolt_request.raw_body.startswith("{")
        if read_as_form and not bolt_request.body:
            _read_form_without_payload(bolt_request)
        reason = malformed_reason(bolt_request.body)
        if reason is not None:
            return _malformed(reason)
        bad = forms.not_utf8(body) if read_as_form else None  # (Bolt's parse_body reads the others as JSON)
        if bad is not None:
            return not_utf8_answer(bolt_request.body, body, bad)
        bolt_response = await run_in_threadpool(app.dispatch, bolt_request)
        return to_starlette_response(bolt_response)

    return router


def _read_form_without_payload(request: BoltRequest) -> None:
    """Bolt reads a form body holding the word ``payload`` anywhere as an interactivity payload
    (``slack_bolt.request.internals.parse_body``); a slash command whose text says it (``/hazel feedback RUN the
    payload is wrong``) has no ``payload`` field, so Bolt's body was ``{}`` and the command answered 400. Read
    such a form's fields, as Bolt does a form without the word, and build the request's context from them."""
    fields = dict(parse_qsl(request.raw_body, keep_blank_values=True))
    if "payload" in fields or not fields:
        return
    request.body = fields
    request.context = build_context(BoltContext(dict(request.context)), fields)


def not_utf8_answer(payload: dict[str, Any], body: bytes, bad: forms.NotUtf8) -> Response:
    """The answer to a signed form body that is not UTF-8 (``forms.not_utf8``; Bolt would read ``%FF`` as
    U+FFFD), dispatched to no listener so nothing is done: a slash command's is the ephemeral reply Hazel's
    other refusals of a command are (200, ``response_type: ephemeral``); a modal's submission comes back
    under the input holding the byte (``response_action: errors``), as an invalid edit does; anything else
    (a click, whose values are Hazel's own) is ``malformed Slack request: <why>`` (400)."""
    what = f"holds {bad.what}, so nothing was done: send it as UTF-8"
    if payload.get("type") is None and "command" in payload:
        return _json({"response_type": "ephemeral", "text": f"Your command {what}."})
    if payload.get("type") == "view_submission":
        block = _block_not_utf8(body) or next(iter(((payload.get("view") or {}).get("state") or {})
                                                   .get("values") or {}), None)
        if block is not None:
            return _json({"response_action": "errors", "errors": {block: f"This {what}."}})
    return _malformed(str(bad))


def _block_not_utf8(body: bytes) -> str | None:
    """The ``block_id`` of the first input of a ``view_submission`` form body whose value (or selected
    option) holds a byte that is not UTF-8, or None: the ``payload`` field read with ``surrogateescape``,
    so that such a byte is a U+DC80..U+DCFF in it (and not U+FFFD, which a person may have typed)."""
    try:
        fields = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="surrogateescape"))
        values = json.loads(fields.get("payload", "{}"))["view"]["state"]["values"]
        for block_id, inputs in values.items():
            for element in inputs.values():
                texts = (element.get("value"), (element.get("selected_option") or {}).get("value"))
                if any(isinstance(t, str) and any("\udc80" <= c <= "\udcff" for c in t) for t in texts):
                    return block_id
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return None


def _json(answer: dict[str, Any]) -> Response:
    """A 200 JSON answer, as Bolt's ``ack(...)`` writes one."""
    return Response(json.dumps(answer), status_code=200, media_type="application/json;charset=utf-8")


def _unsigned() -> Response:
    """Bolt's answer to a request whose signature is wrong (``RequestVerification._build_error_response``)."""
    return Response(json.dumps({"error": "invalid request"}), status_code=401, media_type="application/json")


def _malformed(reason: str) -> Response:
    return Response(f"malformed Slack request: {reason}", status_code=400, media_type="text/plain")


def verifiable(timestamps: list[str], signatures: list[str]) -> bool:
    """Whether Bolt's verifier can judge these ``X-Slack-Request-Timestamp`` and ``X-Slack-Signature``
    header values (all the request's, in order) without raising. Bolt 1.30's ``RequestVerification`` reads
    the last of each (its headers are a dict), ``"0"`` and ``""`` when absent, and slack_sdk's
    ``SignatureVerifier.is_valid`` calls ``int(timestamp)`` (``ValueError`` for ``abc``, a 500) and
    ``hmac.compare_digest`` on the signature (``TypeError`` for a non-ASCII one). Such a request cannot be
    signed by Slack (https://docs.slack.dev/authentication/verifying-requests-from-slack: the timestamp is
    Unix seconds, the signature ``v0=`` and hex), so it is refused (401) as an unsigned one is. Whether the
    signature is right stays Bolt's to say."""
    try:
        int(timestamps[-1] if timestamps else "0")
    except ValueError:
        return False
    return (signatures[-1] if signatures else "").isascii()


def unreadable_reason(exc: BaseException) -> str:
    """Why Bolt could not build its request from a body (``to_bolt_request`` raised ``exc``): the ``<why>``
    of ``malformed Slack request: <why>``."""
    if isinstance(exc, UnicodeDecodeError):
        return f"the body is not UTF-8 (byte {exc.start})"
    if isinstance(exc, RecursionError):
        return "the payload is nested too deeply to be read as JSON"
    if isinstance(exc, json.JSONDecodeError):
        return f"the payload is not JSON ({exc.msg}, character {exc.pos})"
    return "the payload is not a JSON object, or its team, user, channel or authorizations are not of the " \
           "right kind"


def _text_id(value: Any) -> bool:
    """Whether ``value`` is an id Slack could have sent: text, not empty or only whitespace (a user ``""`` was
    looked up with ``users.info`` and recorded as the actor of a refusal)."""
    return isinstance(value, str) and bool(value.strip())


def malformed_reason(body: dict[str, Any]) -> str | None:
    """Why a signed body is not a Slack payload Hazel can read, or None. A Slack body is a slash command
    (``command``), an ``ssl_check``, or has a ``type`` (Events API envelopes, interactivity payloads); the
    payloads Hazel's listeners read (``block_actions``, ``view_submission``, ``event_callback``) need the parts
    they read, of the right kind (Bolt indexes them before any listener could refuse, e.g. ``actions: "x"`` was
    a TypeError, 500; ``event: "x"`` too): a modal's inputs are objects of input states (an edit input that
    was a string was an AttributeError) and the rewind modal's target a checkpoint number
    (``modals.read_checkpoint``; ``abc`` was a ValueError), and a ``block_actions`` action's ``action_id`` one of
    Hazel's buttons (``ACTION_IDS``; any other was Bolt's 404 ``unhandled request``). Anything else (an event or
    payload type Hazel has no listener for) is answered 404 ``unhandled request`` by Bolt."""
    if not any(k in body for k in ("type", "command", "ssl_check")):
        return "the body is not a Slack payload (no type or command)"
    kind = body.get("type")
    if kind is None and "command" in body:  # (https://docs.slack.dev/interactivity/implementing-slash-commands)
        if not all(_text_id(body.get(k)) for k in ("command", "user_id")) or not all(
                isinstance(body.get(k) or "", str) for k in ("text", "user_name", "trigger_id", "channel_id")):
            return "a slash command without a command and a user_id, or with parts that are not text"
        return None
    if kind == "event_callback":
        return _event_reason(body.get("event"))
    if kind not in ("block_actions", "view_submission"):
        return None
    user = body.get("user")
    if not isinstance(user, dict) or not _text_id(user.get("id")) \
            or not all(isinstance(user.get(k) or "", str) for k in ("name", "username")):
        return "user is not an object with an id (and a name that is text)"
    if kind == "block_actions":
        if not all(isinstance(body.get(k) or {}, dict) for k in ("container", "channel")) \
                or not isinstance((body.get("container") or {}).get("channel_id") or "", str) \
                or not isinstance((body.get("channel") or {}).get("id") or "", str):
            return "container or channel is not an object with a text id"
        actions = body.get("actions")
        if not isinstance(actions, list) or not actions or not all(isinstance(a, dict) for a in actions):
            return "actions is not a list of objects"
        for a in actions:
            if not isinstance(a.get("action_id"), str) or not isinstance(a.get("value", ""), str):
                return "an action has no action_id, or a value that is not text"
            if a["action_id"] not in ACTION_IDS:
                return (f"action_id {a['action_id'][:100]!r} is not one of Hazel's buttons "
                        f"({', '.join(sorted(ACTION_IDS))})")
        return None
    view = body.get("view")
    if not isinstance(view, dict) or not all(isinstance(view.get(k), str) for k in ("id", "type", "callback_id")):
        return "view is not an object with an id, a type and a callback_id"
    state = view.get("state") or {}
    if not isinstance(state, dict) or not isinstance(state.get("values") or {}, dict) \
            or not isinstance(view.get("private_metadata") or "", str):
        return "view.state.values is not an object, or private_metadata is not text"
    for block_id, inputs in (state.get("values") or {}).items():
        reason = _inputs_reason(block_id, inputs)
        if reason is not None:
            return reason
    if view["callback_id"] == M.CALLBACK["rewind"]:
        try:
            M.read_checkpoint(state.get("values") or {}, "target")
        except ValueError as exc:
            return str(exc)
    return None


def _event_reason(event: Any) -> str | None:
    """Why an Events API ``event_callback``'s ``event`` is not one Bolt and Hazel's listener can read
    (https://docs.slack.dev/apis/events-api: ``event`` is an object with a ``type``; ``app_home_opened``
    names the ``user``), or None."""
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return "event is not an object with a type"
    if event["type"] == "app_home_opened" and not isinstance(event.get("user"), str):
        return "the app_home_opened event has no user id"
    return None


def _inputs_reason(block_id: str, inputs: Any) -> str | None:
    """Why ``view.state.values[block_id]`` is not what Slack sends (an object of ``action_id`` → element state,
    a text input's ``value`` text or null, a select's ``selected_option`` an object with a text ``value``:
    https://docs.slack.dev/reference/interaction-payloads/view-interactions-payload), or None."""
    where = f"view.state.values.{block_id[:100]}"
    if not isinstance(inputs, dict) or not all(isinstance(e, dict) for e in inputs.values()):
        return f"{where} is not an object of input states"
    for action_id, element in inputs.items():
        if element.get("value") is not None and not isinstance(element["value"], str):  # (0 was read as "")
            return f"{where}.{action_id[:100]}.value is not text"
        option = element.get("selected_option")
        if option is not None and not (isinstance(option, dict) and isinstance(option.get("value"), str)):
            return f"{where}.{action_id[:100]}.selected_option is not an object with a text value"
    return None
