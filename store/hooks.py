"""Notification hook events, written to the outbox in the transaction that causes them.

``HookRepo.emit`` writes one ``hook.event`` outbox row per configured URL (on the URL's own channel,
``hook:<key>``: ``url_channel``), payload ``{"delivery_id", "event"}``: an event exists exactly when its
cause was committed, and is POSTed afterwards by ``bot.ops.hooks.HookSender``, to the configured URL whose
channel the row is on. The URL itself is not stored: it may carry a password, a query token or a token in its
path (a fresh-operator finding, s33 F3; rows written before carry ``"url"``, which is still used). The URLs are the store's
(``Store(hook_urls=...)``, from ``HAZEL_HOOK_URLS``); with none configured, ``emit`` writes nothing and costs
nothing.

The event body::

    {"id": "evt_…", "type": "run.decided", "occurred_at": "2025-01-01T12:00:00+00:00",
     "run": {"id", "workflow", "workflow_version", "status"},
     "request": {"id", "point", "title", "channel", "status", "approvals", "approvals_required",
                 "checkpoint_seq"} | null,
     "data": {…}}
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import TYPE_CHECKING, Any

from store.models import Actor, OutboxKind, SteeringRequest

if TYPE_CHECKING:
    from store import Tx

CHANNEL = "hook"
"""The kind of outbox channel of hook events: each URL's rows are on a channel of its own (``url_channel``)."""


def url_channel(url: str) -> str:
    """The outbox channel of ``url``'s hook events: ``hook:`` and the first 12 hex digits of the URL's SHA-256
    (``hook:3f9a0c…``). The outbox delivers a run's messages to one channel in order, holding later ones back
    while an earlier one waits for its retry: one channel per URL keeps that order for each receiver, and a
    receiver that is down delays no other (on one ``hook`` channel for all URLs, it held back every later
    event of its runs to every URL until its row died, hours later). A digest, not the URL: a URL may carry
    credentials, and the channel is shown wherever the outbox is listed."""
    return f"{CHANNEL}:{hashlib.sha256(url.encode('utf-8')).hexdigest()[:12]}"


def actor_facts(actor: Actor) -> dict[str, str | None]:
    """How an event names who acted: ``{"id", "name", "channel", "person"}``."""
    return {"id": actor.id, "name": actor.name, "channel": actor.channel, "person": actor.person}


class HookRepo:
    """Queues hook events in one transaction (``tx.hooks``)."""

    def __init__(self, tx: "Tx", urls: tuple[str, ...]) -> None:
        self.tx = tx
        self.urls = urls

    def emit(self, event: str, *, run_id: str, now: datetime, request: SteeringRequest | int | None = None,
             **data: Any) -> int:
        """Queue ``event`` about ``run_id`` for every configured URL. ``request``: the steering request it
        concerns (a row or an id). Returns how many rows were written (0 when no hook is configured)."""
        if not self.urls:
            return 0
        run = self.tx.runs.get(run_id)
        if isinstance(request, int):
            request = self.tx.requests.get(request)
        event_id = "evt_" + secrets.token_hex(8)
        body = {
            "id": event_id, "type": event, "occurred_at": now.isoformat(),
            "run": None if run is None else {"id": run.id, "workflow": run.workflow,
                                             "workflow_version": run.workflow_version,
                                             "status": run.status.value},
            "request": None if request is None else {
                "id": request.id, "point": request.point, "title": request.title, "channel": request.channel,
                "status": request.status.value, "approvals": request.approvals,
                "approvals_required": request.approvals_required, "checkpoint_seq": request.checkpoint_seq},
            "data": {k: v for k, v in data.items() if v is not None},
        }
        for i, url in enumerate(self.urls):
            self.tx.outbox.add(channel=url_channel(url), kind=OutboxKind.HOOK_EVENT, now=now, run_id=run_id,
                               request_id=request.id if request is not None else None,
                               payload={"delivery_id": f"{event_id}.{i}", "event": body})
        return len(self.urls)
