"""The HTTP app served by ``hazel serve`` (FastAPI on uvicorn): health, metrics, and the routers of the REST
API and of each configured channel, behind one request body limit and one error shape."""

from __future__ import annotations

import html
import json
from typing import Iterable
from urllib.parse import quote

from fastapi import APIRouter, FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.engine import Hazel
from bot.inbound.api_errors import error_body, install_error_handlers
from bot.inbound.forms import is_form
from bot.inbound.health import health_router
from bot.ops.metrics import HazelMetrics

LIMIT_SETTING = "HAZEL_MAX_BODY_BYTES"


def create_app(hazel: Hazel, *, routers: Iterable[APIRouter] = (), max_body_bytes: int | None = None) -> FastAPI:
    """The app: ``GET /healthz``, ``GET /metrics`` (``bot.ops.metrics``) plus ``routers`` (Slack events, the
    Jira webhook, the REST API).

    Every request's body is at most ``max_body_bytes`` (default ``HAZEL_MAX_BODY_BYTES`` of ``hazel``'s
    settings; ``BodyLimit``), and every error answers ``{"error": {"type", "message"}}``
    (``bot.inbound.api_errors``)."""
    app = FastAPI(title="Hazel", summary="Durable agent runs steered by humans", version="0.1.0")
    app.state.hazel = hazel
    app.include_router(health_router(hazel))
    app.state.metrics = HazelMetrics(hazel)
    app.include_router(app.state.metrics.router())
    for router in routers:
        app.include_router(router)
    install_error_handlers(app)
    limit = max_body_bytes if max_body_bytes is not None else hazel.settings.max_body_bytes
    app.add_middleware(BodyLimit, max_bytes=limit)
    return app


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 (``PayloadTooLargeError``, naming the
    limit and ``HAZEL_MAX_BODY_BYTES``, ``Connection: close``) before the app sees any of it, so nothing is
    parsed or written.

    A ``Content-Length`` over the limit is refused before the body is read; a chunked body (no length) is
    counted as it arrives and refused at the first byte past the limit. A body within the limit is read whole
    here (every endpoint reads its body whole anyway) and handed to the app in one message.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, send, f"the request body is {declared:,} bytes; the limit is "
                                            f"{self.max_bytes:,}")
            return
        chunks: list[bytes] = []
        size, first = 0, None
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect: the client left; the app hears it
                first = message
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, send, f"the request body is over the limit of {self.max_bytes:,} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        pending: list[Message] = [first or {"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, send: Send, message: str) -> None:
        """413: in the API's JSON shape, or, for a run page's form (a browser's URL-encoded POST outside the API,
        Slack and Jira endpoints), a page saying so with a link back (a browser showed the bare JSON)."""
        if _page_form(scope):
            body, kind = _too_long_page(message, scope.get("path", "")).encode(), b"text/html; charset=utf-8"
        else:
            body = json.dumps(error_body("PayloadTooLargeError", f"{message} ({LIMIT_SETTING})"),
                              ensure_ascii=False, separators=(",", ":")).encode()  # (as Starlette's JSONResponse)
            kind = b"application/json"
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


_NOT_PAGES = ("/api/", "/slack/", "/jira/")


def _page_form(scope: Scope) -> bool:
    """Whether the request is a browser's form posted to a page (``bot.inbound.web``)."""
    path = scope.get("path", "")
    if scope.get("method") != "POST" or path.startswith(_NOT_PAGES):
        return False
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return is_form(value.decode("latin-1"))
    return False


def _too_long_page(message: str, path: str) -> str:
    """The page a form over the body limit gets: what was refused, why, what to do (a text of non-ASCII
    characters takes three bytes a byte once URL-encoded), and a link back to the run the form was on."""
    parts = path.split("/")
    run = parts[2] if len(parts) > 2 and parts[1] == "runs" else ""
    back, where = (f"/runs/{quote(run, safe='')}", "the run") if run else ("/runs", "the runs")
    text = html.escape(f"{message} ({LIMIT_SETTING}); nothing was done. A browser sends each byte of a character "
                       f"outside ASCII as three (URL-encoded): go back and shorten the text, or send it with the "
                       f"CLI or the REST API")
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Too long · Hazel</title>"
            f"</head><body><h1>Too long</h1><p>{text}</p><p><a href=\"{html.escape(back)}\">Back to {where}</a></p>"
            "</body></html>")


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
