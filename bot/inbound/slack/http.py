"""Serving the Bolt app: ``POST /slack/events`` on Hazel's FastAPI app, or Socket Mode.

The route is a thin adapter in the manner of Bolt's own (``slack_bolt.adapter.starlette``), with one
difference: Bolt's sync ``App.dispatch`` runs in the thread pool so that one slow request never blocks the
event loop. Bolt verifies every request's signature and timestamp (401 when either is wrong). A body over
``HAZEL_MAX_BODY_BYTES`` never gets here: the app's ``bot.server.http.BodyLimit`` answers it 413 unread.
"""

from __future__ import annotations

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
        bolt_response = await run_in_threadpool(app.dispatch, bolt_request)
        return to_starlette_response(bolt_response)

    return router


def socket_mode_handler(app: App, app_token: str) -> SocketModeHandler:
    """Bolt's Socket Mode handler (``apps.connections.open`` with the app-level ``xapp-`` token, scope
    ``connections:write``); call ``.connect()`` to start it in the background and ``.close()`` to stop."""
    return SocketModeHandler(app, app_token)
