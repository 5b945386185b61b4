"""The Slack Web API client Hazel uses, and how its failures map to delivery errors.

Retries are slack_sdk's own handlers (https://docs.slack.dev/tools/python-slack-sdk/web#retryhandler):
``RateLimitErrorRetryHandler`` waits out a 429's ``Retry-After``; ``ServerErrorRetryHandler`` retries 500 and
503; ``ConnectionErrorRetryHandler`` retries connection resets and URL errors. A ``chat.postMessage`` whose
outcome is unknown (a 5xx, a connection dropped after the request was sent) is not retried blindly: Slack may
have posted it, and ``SlackChannel`` looks for it before posting again (``PostOnce``). What still fails after those
becomes a ``DeliveryError`` (the outbox retries later, honouring ``Retry-After``) or, for errors that retrying
cannot fix, a ``PermanentDeliveryError``.
"""

from __future__ import annotations

import random
import socket
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator
from slack_sdk.http_retry.jitter import Jitter

from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from integrations.base import DeliveryError, PermanentDeliveryError

SLACK_API_URL = "https://slack.com/api/"

PERMANENT_ERRORS = frozenset({
    "invalid_blocks", "invalid_blocks_format", "msg_too_long", "msg_blocks_too_long", "no_text",
    "too_many_attachments", "invalid_arguments", "invalid_form_data", "invalid_json", "message_not_found",
    "cant_update_message", "edit_window_closed",
})
"""Slack ``error`` codes that retrying the same call cannot fix: the message is refused, or the one to update
is gone (https://docs.slack.dev/reference/methods/chat.postMessage#errors, .../chat.update#errors)."""


class ScaledJitter(Jitter):
    """Jitter proportional to the backoff (x1 to x1.5) instead of slack_sdk's default of up to one extra
    second, so that short backoffs stay short."""

    def recalculate(self, duration: float) -> float:
        return duration * random.uniform(1.0, 1.5)


def never_sent(error: Exception | None) -> bool:
    """True when ``error`` shows the request never reached Slack (the connection was refused or the host
    not found), so that sending it again cannot post anything twice."""
    reason = getattr(error, "reason", None) if isinstance(error, URLError) else error
    return isinstance(reason, (ConnectionRefusedError, socket.gaierror))


def _posts(request: HttpRequest) -> bool:
    return request.url.rstrip("/").endswith("/chat.postMessage")


class PostOnceConnectionErrorRetryHandler(ConnectionErrorRetryHandler):
    """``ConnectionErrorRetryHandler`` that does not send a ``chat.postMessage`` again after a connection
    failure that may have come after Slack received it (a reset, a dropped answer): only a refused connection."""

    def _can_retry(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                   error: Exception | None = None) -> bool:
        if _posts(request) and not never_sent(error):
            return False
        return super()._can_retry(state=state, request=request, response=response, error=error)


class PostOnceServerErrorRetryHandler(ServerErrorRetryHandler):
    """``ServerErrorRetryHandler`` that does not send a ``chat.postMessage`` again after a 5xx (Slack may
    have posted it before failing); the outbox retries it, looking for it first."""

    def _can_retry(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                   error: Exception | None = None) -> bool:
        if _posts(request):
            return False
        return super()._can_retry(state=state, request=request, response=response, error=error)


def make_client(token: str, *, base_url: str = SLACK_API_URL, timeout_sec: int = 10, max_retries: int = 2,
                backoff_sec: float = 0.5) -> WebClient:
    """A ``WebClient`` on ``base_url`` (``HAZEL_SLACK_API_URL``) with the three retry handlers, each retrying
    up to ``max_retries`` times; 5xx and connection retries wait ``backoff_sec * 2**n`` plus jitter, a 429 waits
    its ``Retry-After``. A ``chat.postMessage`` is retried here only after a 429 or a refused connection
    (``PostOnce…RetryHandler``)."""
    if not base_url.endswith("/"):
        base_url += "/"
    backoff = BackoffRetryIntervalCalculator(backoff_factor=backoff_sec, jitter=ScaledJitter())
    return WebClient(token=token, base_url=base_url, timeout=timeout_sec, retry_handlers=[
        RateLimitErrorRetryHandler(max_retry_count=max_retries),
        PostOnceServerErrorRetryHandler(max_retry_count=max_retries, interval_calculator=backoff),
        PostOnceConnectionErrorRetryHandler(max_retry_count=max_retries, interval_calculator=backoff),
    ])


def delivery_error(exc: Exception, what: str) -> DeliveryError:
    """The delivery error for a failed Web API call ``what`` (e.g. ``"chat.postMessage to #x"``).

    A 429 carries its ``Retry-After`` (seconds); message-content errors are permanent; everything else
    (5xx, network, ``channel_not_found`` until the bot is invited, ``invalid_auth`` until the token is fixed)
    is retried by the outbox.
    """
    if isinstance(exc, SlackApiError):
        response = exc.response
        code = response.get("error") if isinstance(response.data, dict) else None
        if code is not None and not isinstance(code, str):  # (not Slack's: a proxy's or a gateway's object)
            import json

            code = json.dumps(code, default=str)[:300]
        status = response.status_code
        detail = f"{what}: Slack answered {status} {code or ''}".rstrip()
        if isinstance(response.data, dict) and response.data.get("errors"):
            detail += f" {response.data['errors']}"
        if status == 429:
            retry_after = _retry_after(response.headers)
            return DeliveryError(detail + " (rate limited)", retry_after_sec=retry_after)
        if code in PERMANENT_ERRORS:
            return PermanentDeliveryError(detail)
        return DeliveryError(detail)
    if isinstance(exc, (SlackClientError, URLError, OSError)):
        return DeliveryError(f"{what}: {type(exc).__name__}: {exc}")
    return DeliveryError(f"{what}: {type(exc).__name__}: {exc}")


def _retry_after(headers: dict) -> float | None:
    for key, value in (headers or {}).items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return float(raw)
            except (TypeError, ValueError):
                return None
    return None
