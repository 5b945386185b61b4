"""Delivering the outbox: notifications committed with the transaction that caused them, sent afterwards.

Each due message is claimed with a short lease, rendered from the store as it is at delivery time, and
handed to its channel. Success marks it sent (and stores where a request was posted); a ``DeliveryError``
schedules another attempt with exponential backoff (honouring the channel's ``retry_after_sec``); a
``PermanentDeliveryError``, or running out of attempts, marks it dead: visible in ``hazel outbox`` and the
audit log, and re-queued by ``hazel outbox retry``. A steering request stays pending whatever happens to
its message, so it can always be answered from the CLI.
"""

from __future__ import annotations

import logging
import random
import threading
from datetime import datetime, timedelta
from typing import Callable

from bot.ops.logs import bind_log_context
from bot.engine.transitions import SYSTEM
from bot.engine.workflow import Workflow
from integrations.base import Channel, DeliveryError, PermanentDeliveryError
from store import Store, Tx
from store.models import Approvers, OutboxMessage, ProgressView, RequestView

log = logging.getLogger("hazel.outbox")


class ChannelRouter:
    """Finds the channel for a channel string (``console``, ``slack:#x``, ``jira:KEY``). A channel that is
    not configured falls back to ``fallback`` (the console) with a warning, so that nothing is lost."""

    def __init__(self, channels: dict[str, Channel], fallback: Channel) -> None:
        self.channels = channels
        self.fallback = fallback
        self._warned: set[str] = set()

    def for_name(self, channel: str) -> Channel:
        kind = channel.split(":", 1)[0]
        found = self.channels.get(kind)
        if found is not None:
            return found
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("channel %r is not configured (no %s settings): using the console instead", channel,
                        kind.capitalize())
        return self.fallback


class Deliverer:
    """Sends due outbox messages through ``router``.

    Args:
        lookup: ``(workflow name, version) -> Workflow | None``, to render steering points.
        max_attempts: attempts before a message is marked dead.
        backoff_sec, max_backoff_sec: delay after the first failure, doubled each time, capped.
    """

    def __init__(self, store: Store, router: ChannelRouter, lookup: Callable[[str, int], Workflow | None], *,
                 clock: Callable[[], datetime], max_attempts: int = 25, backoff_sec: float = 2.0,
                 max_backoff_sec: float = 600.0, lease_sec: float = 60.0) -> None:
        self.store = store
        self.router = router
        self.lookup = lookup
        self.clock = clock
        self.max_attempts = max_attempts
        self.backoff_sec = backoff_sec
        self.max_backoff_sec = max_backoff_sec
        self.lease_sec = lease_sec
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.senders: dict[str, Callable[[OutboxMessage], None]] = {}
        """Outbox kinds delivered by a plain sender instead of a channel (``hook.event``: ``bot.ops.hooks``). A
        sender raises ``DeliveryError`` / ``PermanentDeliveryError`` like a channel."""

    # -- one pass ----------------------------------------------------------------------------------------

    def deliver_due(self, *, limit: int = 50) -> int:
        """Deliver every due message (up to ``limit`` per batch, until none is due). Returns how many were
        sent."""
        sent = 0
        while True:
            with self.store.transaction() as tx:
                batch = tx.outbox.claim_due(now=self.clock(), lease_sec=self.lease_sec, limit=limit)
            if not batch:
                return sent
            for message in batch:
                sent += self._deliver(message)
            if len(batch) < limit:
                return sent

    @bind_log_context(run_id="message.run_id", request_id="message.request_id")
    def _deliver(self, message: OutboxMessage) -> int:
        sender = self.senders.get(message.kind)
        try:
            ref = sender(message) if sender is not None else self._send(self.router.for_name(message.channel),
                                                                        message)
        except PermanentDeliveryError as exc:
            self._failed(message, exc, permanent=True)
            return 0
        except DeliveryError as exc:
            self._failed(message, exc, permanent=False)
            return 0
        except Exception as exc:  # a bug in a channel must not stop delivery of the rest
            log.exception("outbox message %s (%s) raised", message.id, message.kind)
            self._failed(message, DeliveryError(f"{type(exc).__name__}: {exc}"), permanent=False)
            return 0
        with self.store.transaction() as tx:
            if ref is not None and message.request_id is not None and message.kind == "request.opened":
                tx.requests.set_message_ref(message.request_id, ref)
            tx.outbox.mark_sent(message.id, now=self.clock())
        return 1

    def _send(self, channel: Channel, message: OutboxMessage) -> dict | None:
        with self.store.read() as tx:
            if message.kind == "run.progress":
                view = self.progress_view(tx, message)
                if view is None:
                    return None
                channel.progress(view)
                return None
            view = self.request_view(tx, message.request_id, reminder=message.kind == "reminder",
                                     escalation=message.kind == "escalation")
        if view is None:
            return None
        if message.kind == "request.opened":
            return channel.open_request(view) or {}
        if message.kind in ("request.closed", "request.vote"):
            channel.update_request(view)
            return None
        if message.kind in ("reminder", "escalation"):
            channel.remind(view)
            return None
        raise PermanentDeliveryError(f"unknown outbox kind {message.kind!r}")

    def _failed(self, message: OutboxMessage, exc: DeliveryError, *, permanent: bool) -> None:
        attempts = message.attempts
        dead = permanent or attempts >= self.max_attempts
        delay = exc.retry_after_sec or min(self.max_backoff_sec, self.backoff_sec * 2 ** (attempts - 1))
        delay *= random.uniform(1.0, 1.25)
        retry_at = None if dead else self.clock() + timedelta(seconds=delay)
        log.warning("outbox message %s (%s to %s) failed, attempt %d: %s%s", message.id, message.kind,
                    message.channel, attempts, exc, " (dead)" if dead else f" (retry in {delay:.1f}s)")
        with self.store.transaction() as tx:
            tx.outbox.mark_failed(message.id, error=str(exc), retry_at=retry_at)
            if dead or attempts == 1:
                tx.events.add(action="outbox.dead" if dead else "outbox.failed", actor=SYSTEM, now=self.clock(),
                              run_id=message.run_id, request_id=message.request_id, message_id=message.id,
                              kind=message.kind, channel=message.channel, error=str(exc)[:500])

    # -- views -------------------------------------------------------------------------------------------

    def request_view(self, tx: Tx, request_id: int | None, *, reminder: bool = False,
                     escalation: bool = False) -> RequestView | None:
        """Render data for a request as it is now (None if it no longer exists)."""
        request = tx.requests.get(request_id) if request_id is not None else None
        run = tx.runs.get(request.run_id) if request is not None else None
        if request is None or run is None:
            return None
        wf = self.lookup(run.workflow, run.workflow_version)
        point = wf.nodes.get(request.point) if wf is not None else None
        loaded = tx.checkpoints.load(run.id, request.checkpoint_seq)
        tree = loaded.tree if loaded is not None else {}
        show = getattr(point, "show", None)
        shown = tree.get(show) if show and isinstance(tree, dict) else tree
        history = tx.checkpoints.list(run.id, newest=100)
        return RequestView(
            request=request, run=run, workflow=run.workflow, workflow_version=run.workflow_version,
            point=request.point, title=request.title, show=show, shown_value=shown,
            actions=tuple(getattr(point, "actions", ("approve", "reject"))),
            approvers=getattr(point, "approvers", None) or Approvers(),
            escalate_to=getattr(point, "escalate_to", None),
            escalate_channel=getattr(point, "escalate_channel", None),
            notify_approvers=bool(getattr(point, "notify_approvers", False)),
            options=dict(getattr(point, "options", {}) or {}),
            decisions=tuple(tx.decisions.for_request(request.id)), checkpoints=tuple(history),
            reminder=reminder, escalation=escalation,
        )

    def progress_view(self, tx: Tx, message: OutboxMessage) -> ProgressView | None:
        run = tx.runs.get(message.run_id) if message.run_id else None
        if run is None:
            return None
        payload = dict(message.payload)
        event = payload.pop("event", "waiting")
        steps = tuple(payload.pop("steps", ()) or ())
        next_id = payload.pop("next_request_id", None)
        return ProgressView(
            run=run, workflow=run.workflow, event=event, steps=steps, facts=payload,
            request=tx.requests.get(message.request_id) if message.request_id else None,
            next_request=tx.requests.get(next_id) if next_id else None,
        )

    # -- background loop (hazel serve) ------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def start(self, *, sweep_sec: float = 2.0) -> None:
        """Deliver in a background thread: at once when woken, and every ``sweep_sec`` for retries."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.is_set():
                self._wake.wait(sweep_sec)
                self._wake.clear()
                try:
                    self.deliver_due()
                except Exception:
                    log.exception("outbox delivery pass failed; retrying")
                    self._stop.wait(1.0)

        self._thread = threading.Thread(target=loop, name="hazel-outbox", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

