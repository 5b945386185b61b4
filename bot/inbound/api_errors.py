"""The REST API's one error shape, ``{"error": {"type": "<error class>", "message": "…"}}``, for Hazel's errors
and for the framework's own (unknown route, method not allowed, a body that is not JSON, not UTF-8 or nested
too deeply, a failed validation, a body over the size limit, an unexpected failure).

Status of each (the README's REST API section documents the same table):

    401 AuthenticationError            no or unknown bearer token
    403 NotAllowedError                this caller may not do this here
    404 RunNotFoundError, CheckpointNotFoundError, RequestNotFoundError (a request id that is not the run's),
        NotFound (no such endpoint)
    405 MethodNotAllowed               (the ``Allow`` header lists the methods)
    409 AlreadyDecidedError, NoPendingRequestError, RunStateError, VersionUnavailableError,
        AmbiguousRunIdError            (a shortened run id that starts several runs' ids)
    413 PayloadTooLargeError           the body is over HAZEL_MAX_BODY_BYTES (``bot.server.http``)
    422 InvalidRequestError            the body is not JSON, not UTF-8, nested too deeply, or fails validation
        InvalidDecisionError, InvalidInputError, UnknownWorkflowError, IdempotencyKeyReusedError
    500 InternalError                  an unexpected failure (logged with its traceback, a database error in it
                                       by its first line: ``bot.ops.logs``; the answer has none)
    503 ApiDisabledError               no token is configured
        DatabaseUnavailableError       the database cannot be reached (``Retry-After`` says when to try again;
                                       the answer names no host, port or credentials)
        SchemaNotReadyError            the schema is older than this process needs (``/healthz``'s words)

Messages are Hazel's own, for the person who called: they never name a console command (``HazelError.message``
leaves the console's hint out) and never echo a long input back.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

from bot.engine import (
    AlreadyDecidedError,
    AmbiguousRunIdError,
    CheckpointNotFoundError,
    EmptyEditError,
    HazelError,
    InvalidDecisionError,
    InvalidInputError,
    MissingEditValueError,
    MissingRewindTargetError,
    NoPendingRequestError,
    NotAllowedError,
    RequestNotFoundError,
    RunNotFoundError,
    RunStateError,
    UnknownWorkflowError,
    VersionUnavailableError,
    error_line,
    is_transient,
    transient_error_classes,
)
from store.errors import SchemaNotReadyError
from store.models import plain_mentions
from bot.engine.limits import not_text
from bot.inbound.api_models import DECISION_ACTIONS, ErrorBody

log = logging.getLogger("hazel.api")

STATUS_OF: tuple[tuple[type[HazelError], int], ...] = (
    (AmbiguousRunIdError, 409),
    (RunNotFoundError, 404),
    (CheckpointNotFoundError, 404),
    (NotAllowedError, 403),
    (AlreadyDecidedError, 409),
    (RequestNotFoundError, 404),
    (NoPendingRequestError, 409),
    (RunStateError, 409),
    (VersionUnavailableError, 409),
    (InvalidDecisionError, 422),
    (InvalidInputError, 422),
    (UnknownWorkflowError, 422),
)
"""HTTP status of each error (first match); any other ``HazelError`` answers 400."""

DATABASE_RETRY_AFTER_SEC = 5
"""The ``Retry-After`` (seconds) of a 503 ``DatabaseUnavailableError``."""


LOC_MAX_CHARS = 40
"""Characters of one part of a validation error's location (a key the caller sent) quoted in the message."""


class ApiError(Exception):
    """An error answer of the API itself (auth, a reused idempotency key)."""

    def __init__(self, status: int, type_: str, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.type, self.headers = status, type_, headers


def error_body(type_: str, message: str, **extra: Any) -> dict[str, Any]:
    """``{"error": {"type": type_, "message": message, **extra}}`` (None values left out), as JSON."""
    body = {"error": {"type": type_, "message": message, **{k: v for k, v in extra.items() if v is not None}}}
    return ErrorBody.model_validate(body).model_dump(mode="json", exclude_none=True)


def error_response(status: int, type_: str, message: str, *, headers: dict[str, str] | None = None,
                   **extra: Any) -> JSONResponse:
    """The error answer; a lone surrogate quoted in ``message`` (from ``\\udc9b`` in the body) is shown as its
    escape, which JSON's UTF-8 can carry."""
    if not message.isascii():
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse(error_body(type_, message, **extra), status_code=status, headers=headers)


ALLOW_EMPTY = 'send "allow_empty": true in the payload if that is what you mean'
"""What an edit (or a rewind's edits) refused for leaving a field or an entry empty (``EmptyEditError``) is told
after the engine's ``the edit leaves field 'plan' empty: that would replace the value with nothing``: the
``allow_empty`` of the API's ``EditPayload`` and ``RewindPayload``."""

MISSING_EDIT_VALUE = "send payload.value (the new value as JSON) or payload.text (the new value as typed)"
"""What an edit without a new value (``MissingEditValueError``) is told to send: the fields of the API's
``EditPayload``, after the engine's ``an edit needs a new value for field 'plan'``."""


def hazel_error_response(exc: HazelError) -> JSONResponse:
    """A ``HazelError`` with its status (``STATUS_OF``) and its channel-neutral message; an edit without a new
    value is told what the API takes (``MISSING_EDIT_VALUE``), and one that leaves a value empty how to allow it
    (``ALLOW_EMPTY``), as the ``InvalidDecisionError`` each is, and a rewind without a target is answered as one
    too."""
    status = next((code for cls, code in STATUS_OF if isinstance(exc, cls)), 400)
    extra: dict[str, Any] = {}
    if isinstance(exc, AlreadyDecidedError):
        extra = {"decided_by": exc.decided_by, "decided_at": exc.decided_at, "action": exc.action,
                 "channel": exc.channel}
    type_, message = type(exc).__name__, plain_mentions(exc.message)
    if isinstance(exc, MissingEditValueError):  # (the type REST callers know for a refused edit)
        type_, message = InvalidDecisionError.__name__, f"{message}: {MISSING_EDIT_VALUE}"
    elif isinstance(exc, EmptyEditError):  # (likewise; the engine's words say no channel's way to allow it)
        type_, message = InvalidDecisionError.__name__, f"{message}; {ALLOW_EMPTY}"
    elif isinstance(exc, MissingRewindTargetError):  # (likewise for a rewind without ``to``)
        type_ = InvalidDecisionError.__name__
    return error_response(status, type_, message, **extra)


def database_unavailable_response() -> JSONResponse:
    """503 ``DatabaseUnavailableError`` with ``Retry-After: DATABASE_RETRY_AFTER_SEC``: the database cannot be
    reached (``bot.engine.is_transient``). The message names no host, port, path or credentials."""
    return error_response(503, "DatabaseUnavailableError", "the database is unavailable; try again shortly",
                          headers={"Retry-After": str(DATABASE_RETRY_AFTER_SEC)})


_UNION_MEMBERS = frozenset({"int", "constrained-int", "str", "constrained-str", "bool", "float"})
"""The last part of pydantic's error location for one alternative of a union of plain types (``to: int | str``):
left out, the alternatives' messages joined (``payload.to: Input should be a valid integer or a valid string``)."""


def _loc_part(part: object) -> str:
    text = str(part)
    return text if len(text) <= LOC_MAX_CHARS else f"{text[:LOC_MAX_CHARS]}…"


def validation_message(exc: RequestValidationError, body: bytes | None = None) -> str:
    """pydantic's errors on one line (``field: message; other: message``), keys the caller sent cut short.
    ``body``: the raw request body, for a body that is not JSON because it is not UTF-8 (FastAPI's
    ``json.loads`` of bytes reads ``\\xff\\xfe`` as an empty UTF-16 text)."""
    parts = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            if body is not None:
                try:
                    body.decode("utf-8")
                except UnicodeDecodeError as not_utf8:
                    return unreadable_reason(not_utf8)
            return f"the body is not valid JSON ({(err.get('ctx') or {}).get('error', 'decode error')})"
        path = [x for x in err.get("loc", ()) if x not in ("body",)]
        member = bool(path) and path[-1] in _UNION_MEMBERS  # one alternative of `int | str` (rewind's `to`)
        loc = ".".join(_loc_part(x) for x in (path[:-1] if member else path)) or "body"
        msg = err.get("msg")
        if err.get("type") == "string_unicode" and isinstance(err.get("input"), str):  # a lone surrogate: said
            parts.append(f"{loc} {not_text(err['input'])}")  # as the engine says it of any text a person sends
            continue
        if err.get("type") in ("union_tag_invalid", "union_tag_not_found"):  # an unknown or missing `action`:
            ctx = err.get("ctx") or {}  # named, not echoed whole (nor as U+FFFD), nor in pydantic's words
            field = str(ctx.get("discriminator", "")).strip("'") or "action"
            where = f"{loc}.{field}" if loc != "body" else field
            if err["type"] == "union_tag_not_found":
                parts.append(f"{where}: Field required (one of {', '.join(map(repr, DECISION_ACTIONS))})")
                continue
            sent = err.get("input")  # (the object as sent: pydantic's ctx has the tag's lone surrogates as U+FFFD)
            raw = sent.get(field, "") if isinstance(sent, dict) else ctx.get("tag", "")
            if not isinstance(raw, str):  # (5 as 5, not as the text "5"; an object or a list named, not echoed)
                shown = (json.dumps(raw) if raw is None or isinstance(raw, (bool, int, float))
                         else "an object" if isinstance(raw, dict) else "a list")
                parts.append(f"{where}: {_loc_part(shown)} is not one of {ctx.get('expected_tags', '')}")
            elif any(0xD800 <= ord(c) <= 0xDFFF for c in raw):  # (not_text names the first)
                parts.append(f"{where} {not_text(raw)}")
            else:
                parts.append(f"{where}: {_loc_part(json.dumps(raw, ensure_ascii=False))} is not one of "
                             f"{ctx.get('expected_tags', '')}")
            continue
        if loc == "body" and err.get("type") in ("model_attributes_type", "dict_type"):
            msg = f"{msg}: send a JSON object with Content-Type: application/json"
        if member and parts and parts[-1].startswith(f"{loc}: Input should be "):
            parts[-1] += f" or {str(msg).removeprefix('Input should be ')}"  # `to: … a valid integer or a valid string`
            continue
        parts.append(f"{loc}: {msg}")
        if len(parts) == 10:
            break
    return "; ".join(parts) or "invalid request"


def unreadable_reason(cause: BaseException | None) -> str | None:
    """Why a JSON body could not be read, from the error reading it raised: nested too deeply, not UTF-8, not
    JSON; None for any other error. The REST API's 422 and the Jira webhook's 400 say the same."""
    if isinstance(cause, RecursionError):
        return "the body is nested too deeply to be read as JSON"
    if isinstance(cause, UnicodeDecodeError):
        return f"the body is not valid UTF-8 (byte {cause.start}): send JSON in UTF-8"
    if isinstance(cause, json.JSONDecodeError):
        return f"the body is not valid JSON ({cause.msg})"
    if isinstance(cause, ValueError):
        return "the body is not valid JSON"
    return None


def not_utf8_json(body: bytes) -> str | None:
    """Why ``body`` cannot be JSON in UTF-8 (RFC 8259 section 8.1: JSON exchanged between systems is UTF-8),
    before it is parsed: a byte that is not UTF-8, or a NUL byte (JSON has none outside an escape, and UTF-16
    and UTF-32 put one beside every ASCII character); None when it may be."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return unreadable_reason(exc)
    nul = body.find(b"\x00")
    if nul >= 0:
        return f"the body is not JSON in UTF-8 (byte {nul} is NUL, as in UTF-16 or UTF-32): send JSON in UTF-8"
    return None


class UnreadableBodyError(ValueError):
    """A body that is not JSON in UTF-8 or is nested too deeply to read; the message says which."""


def load_json_body(body: bytes) -> Any:
    """``body`` read as JSON in UTF-8 (``json.loads`` of bytes would also take UTF-16 and UTF-32).

    Raises:
        UnreadableBodyError: not UTF-8, not JSON, or nested too deeply (``unreadable_reason``'s message).
    """
    try:
        return json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # (JSONDecodeError and UnicodeDecodeError are ValueErrors)
        raise UnreadableBodyError(unreadable_reason(exc)) from None


def _allowed_methods(request: Request) -> str:
    """The methods the OpenAPI document lists for the request's path (Starlette's ``Allow`` names only those
    of the first route that matched the path), e.g. ``"GET, POST"``; empty if it lists none."""
    methods: set[str] = set()
    for template, operations in request.app.openapi().get("paths", {}).items():
        pattern = "[^/]+".join(re.escape(part) for part in re.split(r"\{[^}]*\}", template))
        if re.fullmatch(pattern, request.url.path):
            methods |= {m.upper() for m in operations}
    return ", ".join(sorted(methods))


def unmatched(request: Request) -> StarletteHTTPException:
    """The error for a request no route took: 405 (with ``Allow``) when the path has routes for other
    methods, else 404."""
    allowed = _allowed_methods(request)
    if allowed:
        return StarletteHTTPException(405, headers={"Allow": allowed})
    return StarletteHTTPException(404)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {}) or None
    if exc.status_code == 404:
        return error_response(404, "NotFound", f"no such endpoint: {request.url.path} (see /openapi.json)",
                              headers=headers)
    if exc.status_code == 405:
        allowed = _allowed_methods(request) or (headers or {}).get("Allow", "")
        headers = {**(headers or {}), "Allow": allowed} if allowed else headers
        return error_response(405, "MethodNotAllowed", f"{request.method} is not allowed on {request.url.path}"
                              + (f" (allowed: {allowed})" if allowed else ""), headers=headers)
    if exc.status_code == 413:
        return error_response(413, "PayloadTooLargeError", str(exc.detail), headers=headers)
    # FastAPI answers a body it could not parse with a bare 400 and keeps the cause
    unreadable = unreadable_reason(exc.__cause__) if exc.status_code == 400 else None
    if unreadable is not None:
        return error_response(422, "InvalidRequestError", unreadable)
    return error_response(exc.status_code, "HTTPError", str(exc.detail), headers=headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(422, "InvalidRequestError", validation_message(exc))


async def _hazel_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HazelError)
    return hazel_error_response(exc)


async def _database_down(request: Request, exc: Exception) -> JSONResponse:
    """An error of ``transient_error_classes``: the database is down (unless it answers and its schema is short
    of this process's: SQLite's "no such column" is an ``OperationalError`` too, which ``is_transient`` tells
    apart; asked only then, so that an outage's answers never wait on another connection)."""
    if not is_transient(exc):
        behind = _schema_behind(request)
        if behind is not None:
            return _schema_not_ready(request, behind)
    log.warning("api: the database is unreachable (%s); answered %s %s with 503", error_line(exc),  # (one line
                request.method, request.url.path)  # per request, not the driver's traceback)
    return database_unavailable_response()


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # (Starlette's ServerErrorMiddleware raises it again after this answer: the server logs the traceback, a
    # database error's SQL statement and parameters left out by the log's formatter, bot.ops.logs.)
    if is_transient(exc):  # raised from an outage's error (its __cause__)
        return database_unavailable_response()
    return error_response(500, "InternalError", "an unexpected error; the server's log has the details")


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """A database error: 503 ``SchemaNotReadyError`` when the schema is older than this process needs (a
    ``hazel db downgrade``, or a database emptied, under it: every call was an opaque 500 and a traceback, while
    ``/healthz`` said why: s24 F6), in ``/healthz``'s words, with ``Retry-After``; anything else raised again, to
    ``_unexpected`` (500, logged with its traceback)."""
    behind = _schema_behind(request)
    if behind is not None:
        return _schema_not_ready(request, behind)
    raise exc  # (to the server's error middleware: ``_unexpected``'s 500, its traceback logged where it happened)


async def _schema_refused(request: Request, exc: Exception) -> JSONResponse:
    """``SchemaNotReadyError`` raised by the engine: a start refused before it wrote anything (``Hazel.start``
    checks the schema's revision in its transaction), the checkpointer of a LangGraph graph; its words are
    ``/healthz``'s."""
    return _schema_not_ready(request, str(exc))


def _schema_behind(request: Request) -> str | None:
    """Why this process cannot work on its database's schema (``Store.health``: one query), or None."""
    hazel = getattr(request.app.state, "hazel", None)
    return hazel.store.health().schema if hazel is not None else None


def _schema_not_ready(request: Request, behind: str) -> JSONResponse:
    log.warning("api: %s; answered %s %s with 503", behind, request.method, request.url.path)
    return error_response(503, "SchemaNotReadyError", behind, headers={"Retry-After": str(DATABASE_RETRY_AFTER_SEC)})


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` in the one shape: the framework's HTTP errors (404, 405, a body FastAPI
    could not parse), validation errors, Hazel's errors raised outside the API's routes, a database that cannot
    be reached (503 ``DatabaseUnavailableError``, ``Retry-After``; ``bot.engine.is_transient``), a schema older
    than this process needs (503 ``SchemaNotReadyError``), and anything unexpected (500, logged)."""
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HazelError, _hazel_error)
    app.add_exception_handler(SchemaNotReadyError, _schema_refused)
    for cls in transient_error_classes(import_drivers=True):  # (one line logged each, not a traceback)
        app.add_exception_handler(cls, _database_down)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(Exception, _unexpected)
