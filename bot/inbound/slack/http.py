"""Serving the Bolt app: ``POST /slack/events`` on Hazel's FastAPI app, or Socket Mode.

The route is a thin adapter in the manner of Bolt's own (``slack_bolt.adapter.starlette``), with one
difference: Bolt's sync ``App.dispatch`` runs in the thread pool so that one slow request never blocks the
event loop. Bolt verifies every request's signature and timestamp (401 when either is wrong). A body over
``HAZEL_MAX_BODY_BYTES`` never gets here: the app's ``bot.server.http.BodyLimit`` answers it 413 unread.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from starlette.concurrency import run_in_threadpool

EVENTS_PATH = "/slack/events"


def slack_router(app: App) -> APIRouter:
    """``POST /slack/events``: events, interactivity (buttons, modals) and the ``/hazel`` command."""
    router = APIRouter(tags=["slack"])

    @router.post(EVENTS_PATH, include_in_schema=False)
    async def slack_events(req: Request) -> Response:
        body = await req.body()
        try:
            bolt_request = to_bolt_request(req, body)
        except (ValueError, AttributeError, TypeError, RecursionError):  # a payload that is not a JSON object
            bolt_request = None  # (or is nested too deeply to decode): Bolt cannot build its request, nothing acts
        if bolt_request is None or not isinstance(bolt_request.body, dict):
            return Response("malformed Slack request", status_code=400, media_type="text/plain")
        reason = malformed_reason(bolt_request.body)
        if reason is not None:
            return Response(f"malformed Slack request: {reason}", status_code=400, media_type="text/plain")
        bolt_response = await run_in_threadpool(app.dispatch, bolt_request)
        return to_starlette_response(bolt_response)

    return router


def malformed_reason(body: dict[str, Any]) -> str | None:
    """Why a signed body is not a Slack payload Hazel can read, or None. A Slack body is a slash command
    (``command``), an ``ssl_check``, or has a ``type`` (Events API envelopes, interactivity payloads); the
    payloads Hazel's listeners read (``block_actions``, ``view_submission``) need the parts they read, of the
    right kind (Bolt indexes them before any listener could refuse, e.g. ``actions: "x"`` was a TypeError,
    500). Anything else answered 404 ``unhandled request`` from Bolt."""
    if not any(k in body for k in ("type", "command", "ssl_check")):
        return "the body is not a Slack payload (no type or command)"
    kind = body.get("type")
    if kind not in ("block_actions", "view_submission"):
        return None
    user = body.get("user")
    if not isinstance(user, dict) or not isinstance(user.get("id"), str):
        return "user is not an object with an id"
    if kind == "block_actions":
        actions = body.get("actions")
        if not isinstance(actions, list) or not actions or not all(isinstance(a, dict) for a in actions):
            return "actions is not a list of objects"
        for a in actions:
            if not isinstance(a.get("action_id"), str) or not isinstance(a.get("value", ""), str):
                return "an action has no action_id, or a value that is not text"
        return None
    view = body.get("view")
    if not isinstance(view, dict) or not all(isinstance(view.get(k), str) for k in ("id", "type", "callback_id")):
        return "view is not an object with an id, a type and a callback_id"
    state = view.get("state") or {}
    if not isinstance(state, dict) or not isinstance(state.get("values") or {}, dict) \
            or not isinstance(view.get("private_metadata") or "", str):
        return "view.state.values is not an object, or private_metadata is not text"
    return None


def socket_mode_handler(app: App, app_token: str) -> SocketModeHandler:
    """Bolt's Socket Mode handler (``apps.connections.open`` with the app-level ``xapp-`` token, scope
    ``connections:write``); call ``.connect()`` to start it in the background and ``.close()`` to stop."""
    return SocketModeHandler(app, app_token)
