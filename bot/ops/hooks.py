"""Notification hooks: signed JSON events POSTed to the URLs of ``HAZEL_HOOK_URLS``, through the outbox.

Events (``type``): ``run.waiting`` (a steering request opened), ``run.decided`` (a decision or quorum vote was
recorded, rewinds included), ``run.completed``, ``run.failed``, ``run.rejected``, ``run.cancelled``.

The engine writes one outbox row per URL (channel ``hook:<digest of the URL>``, kind ``hook.event``, payload
``{"delivery_id", "event"}``: no URL, which may hold a secret) in the transaction that causes the event
(``store.hooks``), so an event exists exactly when what caused it was committed; the sender finds the URL
among ``HAZEL_HOOK_URLS`` by the row's channel. The deliverer sends each row with ``HookSender``; a failure is
retried with the outbox's backoff, and a row that runs out of attempts is ``dead`` (``hazel outbox``,
``hazel outbox retry``).

A delivery is ``POST <url>`` with the event as its JSON body and the headers
``X-Hazel-Event: <type>``, ``X-Hazel-Delivery: <delivery id>`` (the same on every retry of that row: dedupe on
it) and ``X-Hazel-Signature: sha256=<hex HMAC-SHA256(HAZEL_HOOK_SECRET, raw body)>``. Any 2xx answer is
success; 408, 409, 425, 429 and 5xx (and network errors) are retried (``Retry-After`` honoured); any other
status is permanent (the row is dead at once). The body::

    {"id": "evt_…", "type": "run.decided", "occurred_at": "2025-01-01T12:00:00+00:00",
     "run": {"id": "ab12cd34ef56", "workflow": "migration-plan", "workflow_version": 1, "status": "ready"},
     "request": {"id": 7, "point": "review_plan", "title": "…", "channel": "slack:#x", "status": "decided",
                 "approvals": 1, "approvals_required": 1, "checkpoint_seq": 1} | null,
     "data": {…}}

``data``: waiting ``{"steps": [...]}``; decided ``{"decision_id", "action", "actor": {"id", "name",
"channel", "person"}, "settled", "payload"}``; completed ``{"steps"}``; failed ``{"error", "step"}``; rejected and
cancelled ``{"by", "reason"}``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from bot.settings import Settings, path_shown
from integrations.base import DeliveryError, PermanentDeliveryError
from store.models import OutboxKind, OutboxMessage

if TYPE_CHECKING:
    import ssl

    import httpx  # imported where a hook is sent: a command that sends none does not load it

log = logging.getLogger("hazel.hooks")

KIND = OutboxKind.HOOK_EVENT.value
SIGNATURE_HEADER = "X-Hazel-Signature"
EVENT_HEADER = "X-Hazel-Event"
DELIVERY_HEADER = "X-Hazel-Delivery"
RETRIED_STATUSES = frozenset({408, 409, 425, 429})


def sign(secret: str, body: bytes) -> str:
    """The ``X-Hazel-Signature`` value for ``body``: ``sha256=<hex HMAC-SHA256(secret, body)>``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str | None) -> bool:
    """True when ``signature`` is ``sign(secret, body)`` (constant-time comparison), for receivers."""
    return signature is not None and hmac.compare_digest(sign(secret, body), signature)


@dataclass
class HookSender:
    """Delivers one ``hook.event`` outbox row (see the module docstring for the request)."""

    settings: Settings

    def send(self, message: OutboxMessage) -> None:
        """POST the row's event to its URL.

        Raises:
            DeliveryError: network error, timeout, 408/409/425/429/5xx (``retry_after_sec`` from
                ``Retry-After``), or no ``HAZEL_HOOK_SECRET`` in this process.
            PermanentDeliveryError: any other non-2xx answer, or a malformed row.
        """
        import httpx

        url, event = message.payload.get("url") or urls_by_channel(self.settings).get(message.channel), \
            message.payload.get("event")
        if not isinstance(event, dict):
            raise PermanentDeliveryError("malformed hook.event row: no event")
        if not isinstance(url, str):  # (a URL taken out of HAZEL_HOOK_URLS since, or not in this process's)
            raise DeliveryError(f"hook {message.channel}: no URL of HAZEL_HOOK_URLS in this process is this "
                                "channel's (it was changed or removed since the event was queued)")
        if self.settings.hook_secret is None:
            raise DeliveryError("HAZEL_HOOK_SECRET is not set in this process: cannot sign hook events")
        body = json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Hazel-Hooks/1",
            EVENT_HEADER: str(event.get("type", "")),
            DELIVERY_HEADER: str(message.payload.get("delivery_id") or message.id),
            SIGNATURE_HEADER: sign(self.settings.hook_secret.get_secret_value(), body),
        }
        where = url_shown(url)
        try:
            response = httpx.post(url, content=body, headers=headers, timeout=self.settings.hook_timeout_sec,
                                  follow_redirects=False, verify=tls_context())
        except httpx.HTTPError as exc:
            raise DeliveryError(f"hook {where}: {type(exc).__name__}") from None
        if response.is_success:
            return
        status = response.status_code
        if status in RETRIED_STATUSES or status >= 500:
            raise DeliveryError(f"hook {where} answered {status}", retry_after_sec=_retry_after(response))
        raise PermanentDeliveryError(f"hook {where} answered {status}")


@lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """The TLS context every hook request verifies its server with: httpx's default (certifi's certificates,
    or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set), built once per process. Built anew for each request,
    as ``httpx.post`` does by default, it loaded the certificate bundle again: 17-20 ms of CPU per hook sent
    on the 2-core VM."""
    import httpx

    return httpx.create_ssl_context()


def shown_message(message: OutboxMessage, settings: Settings) -> OutboxMessage:
    """``message`` fit to print (``hazel outbox --json``): a hook event's URL (its row's, for a row written
    before rows left it out, else the one of ``settings``' ``HAZEL_HOOK_URLS`` whose channel it is; None when
    none is) as ``url_shown`` gives it, as the table, the logs and the audit log name it, in
    ``payload["url"]``; any other message as it is."""
    if message.kind != KIND:
        return message
    url = message.payload.get("url") or urls_by_channel(settings).get(message.channel)
    return message.model_copy(update={"payload": {**message.payload,
                                                  "url": url_shown(url) if isinstance(url, str) else None}})


def urls_by_channel(settings: Settings) -> dict[str, str]:
    """``HAZEL_HOOK_URLS`` by the outbox channel of each (``store.hooks.url_channel``: ``hook:3f9a0c…``)."""
    from store.hooks import url_channel

    return {url_channel(url): url for url in settings.hook_url_list}


def url_shown(url: str) -> str:
    """The scheme, host and path of ``url``: never its query or credentials, which may carry secrets, nor a
    path segment that looks like a token (``bot.settings.path_shown``):
    ``https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/…``."""
    parsed = urlparse(url)
    try:
        port = f":{parsed.port}" if parsed.port else ""
    except ValueError:  # a malformed port: show none
        port = ""
    return f"{parsed.scheme}://{parsed.hostname or '?'}{port}{path_shown(parsed.path)}"


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: use our own backoff
        return None
