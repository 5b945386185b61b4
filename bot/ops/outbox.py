"""Delivering the outbox: notifications committed with the transaction that caused them, sent afterwards.

Each due message is claimed with a short lease, rendered from the store as it is at delivery time, and
handed to its channel. A process claims only the messages of channels it has (Slack and Jira when their
settings are set, the console always): a message for ``slack:…`` in a process without the Slack settings
stays pending for a process that has them (``hazel serve`` / ``hazel worker``), and is only shown on this
process's console (``Deliverer._show_elsewhere``), so that a CLI command run in a shell without them never
consumes it. Success marks it sent (and stores where a request was posted); a ``DeliveryError``
schedules another attempt with exponential backoff (honouring the channel's ``retry_after_sec``); a
``PermanentDeliveryError``, or running out of attempts, marks it dead: visible in ``hazel outbox`` and the
audit log, and re-queued by ``hazel outbox retry``. A reminder or escalation that is stale when its turn
comes (its request settled, or, for a reminder, a later reminder or escalation of the request queued behind
it: the channel was down) is marked superseded instead of sent (``Deliverer._superseded``). A steering request
stays pending whatever happens to its message, so it can always be answered from the CLI.
"""

from __future__ import annotations

import logging
import random
import threading
from datetime import timedelta
from typing import Callable, Collection

from bot.engine import Hazel
from bot.engine import bind_log_context, error_line, is_transient, log_error
from bot.ops.logs import log_failure
from integrations.base import Channel, DeliveryError, PermanentDeliveryError
from store import Tx
from store.models import SYSTEM, OutboxKind, OutboxMessage, ProgressView, RequestStatus, past_tense

log = logging.getLogger("hazel.outbox")


class ChannelRouter:
    """Finds the channel for a channel string (``console``, ``slack:#x``, ``jira:KEY``). A channel that is
    not configured falls back to ``fallback`` (the console) with a warning: there its messages are only shown,
    never marked sent (see ``Deliverer``)."""

    def __init__(self, channels: dict[str, Channel], fallback: Channel) -> None:
        self.channels = channels
        self.fallback = fallback
        self._warned: set[str] = set()

    def kinds(self) -> list[str]:
        """The kinds of channel this process delivers to (``console``, and ``slack`` / ``jira`` when set up)."""
        return sorted(self.channels)

    def lacks_some(self) -> bool:
        """Whether a kind of channel a workflow may name (``slack``, ``jira``) is not set up here."""
        return not {"slack", "jira"} <= self.channels.keys()

    def for_name(self, channel: str) -> Channel:
        kind = channel.split(":", 1)[0]
        found = self.channels.get(kind)
        if found is not None:
            return found
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("channel %r is not configured (no %s settings): shown on the console instead; its "
                        "notifications stay pending for a process that has the settings (hazel serve or "
                        "worker)", channel, kind.capitalize())
        return self.fallback


class Deliverer:
    """Sends the due outbox messages of ``hazel``'s store through ``router``, rendering each from
    ``Hazel.outbox_view`` as the store is at delivery time. It wakes whenever the engine commits outbox rows.

    Args:
        max_attempts: attempts before a message is marked dead.
        backoff_sec, max_backoff_sec: delay after the first failure, doubled each time, capped.
        lease_sec: how long a claimed message is left alone before another deliverer may send it again.
    """

    def __init__(self, hazel: Hazel, router: ChannelRouter, *, max_attempts: int = 25, backoff_sec: float = 2.0,
                 max_backoff_sec: float = 600.0, lease_sec: float = 60.0) -> None:
        self.hazel = hazel
        self.store = hazel.store
        self.router = router
        self.clock = hazel.clock
        self.max_attempts = max_attempts
        self.backoff_sec = backoff_sec
        self.max_backoff_sec = max_backoff_sec
        self.lease_sec = lease_sec
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._followed_up = False
        """Set when a delivery queued another message that is due at once (``_follow_up``), or a message was
        superseded (``_superseded``: the one it held back is due): the pass goes on."""
        self._since = self.clock() - timedelta(seconds=1)
        self._shown_upto = 0
        """``_show_elsewhere`` shows messages written since this deliverer was made, with an id above this one."""
        self.senders: dict[str, Callable[[OutboxMessage], None]] = {}
        """Outbox kinds delivered by a plain sender instead of a channel (``hook.event``: ``bot.ops.hooks``). A
        sender raises ``DeliveryError`` / ``PermanentDeliveryError`` like a channel."""
        self.sender_channels: dict[str, frozenset[str]] = {}
        """For a kind of ``senders`` whose rows this process can send only on some channels (``hook.event``:
        the channels of its own ``HAZEL_HOOK_URLS``, ``hook:<digest>``; a row holds no URL), those channels:
        it claims that kind's rows on them only, and leaves the others to a process that has their URLs."""

    def _channels(self) -> list[str]:
        """The channels this process claims rows of: its channels' kinds (``slack`` matches ``slack:…``) and
        the exact channels of ``sender_channels``."""
        return [*self.router.kinds(), *sorted(c for kind, cs in self.sender_channels.items() if kind in self.senders
                                              for c in cs)]

    def _kinds(self) -> list[str]:
        """The outbox kinds this process sends whatever their channel (``senders`` but ``sender_channels``')."""
        return [k for k in self.senders if k not in self.sender_channels]

    # -- one pass ----------------------------------------------------------------------------------------

    def deliver_due(self, *, limit: int = 50, run_ids: Collection[str] | None = None) -> int:
        """Deliver every due message (up to ``limit`` per batch, until none is due); with ``run_ids``, only
        the messages of those runs (what a CLI command's own runs wrote: other runs' messages, and their
        failures, are ``hazel serve``'s and ``hazel worker``'s business). A run's messages to one channel go
        in order (``OutboxRepo.claim_due``): after a batch that sent something it claims again when the batch
        held later messages back. Then show on the console those due for channels this process does not have
        (``_show_elsewhere``), read in the first batch's transaction. Returns how many were sent."""
        sent, elsewhere, first = 0, [], True
        while True:
            with self.store.transaction() as tx:
                if first and self.router.lacks_some():  # (no statement when Slack and Jira are both set up)
                    elsewhere = tx.outbox.due_elsewhere(now=self.clock(), channels=self._channels(),
                                                        kinds=self._kinds(), run_ids=run_ids, after_id=self._shown_upto,
                                                        since=self._since, limit=limit)
                with tx.pipeline(commit=True):  # PostgreSQL: the claim and COMMIT in one round trip
                    claimed = tx.outbox.claim_due_later(now=self.clock(), lease_sec=self.lease_sec, limit=limit,
                                                        run_ids=run_ids, channels=self._channels(),
                                                        kinds=self._kinds())
                batch = claimed.get()  # (SQLite commits when the transaction ends: read before)
            first = False
            if not batch:
                break
            self._followed_up = False
            delivered = sum(self._deliver(message) for message in batch)
            sent += delivered
            # a batch holds one message per run and channel (``claim_due``): one sent may let the next one go
            if len(batch) < limit and not self._followed_up and not (delivered and batch.held_back):
                break
        self._show_elsewhere(elsewhere)
        return sent

    def _show_elsewhere(self, messages: list[OutboxMessage]) -> int:
        """Show ``messages`` (due for channels this process does not have: ``slack:…`` without the Slack
        settings) on the console (the router's fallback), each once per process and only those written since
        it started (``OutboxRepo.due_elsewhere``), without claiming them or marking them sent: they stay pending
        for a process that has the channel. Returns how many were shown; a message that fails to render is
        logged and skipped. (Up to one batch per pass: the next pass shows the rest.)"""
        shown = 0
        for message in messages:
            self._shown_upto = max(self._shown_upto, message.id)
            if message.kind == OutboxKind.HOOK_EVENT.value:  # (no console form: a hook event is a POST, left to
                continue  # a process with the secret and its URL; "unknown outbox kind" was logged for each)
            try:
                self._send(self.router.for_name(message.channel), message)
                shown += 1
            except Exception as exc:
                log_failure(log, f"showing outbox message {message.id} ({message.kind}) on the console", exc)
        return shown

    @bind_log_context(run_id="message.run_id", request_id="message.request_id")
    def _deliver(self, message: OutboxMessage) -> int:
        sender = self.senders.get(message.kind)
        try:
            if sender is None and message.kind in _NOTICES and message.request_id is not None \
                    and self._superseded(message):
                self._followed_up = True  # (the messages it held back may go now: the pass goes on)
                return 0
            ref = sender(message) if sender is not None else self._send(self.router.for_name(message.channel),
                                                                        message)
        except PermanentDeliveryError as exc:
            self._failed(message, exc, permanent=True)
            return 0
        except DeliveryError as exc:
            self._failed(message, exc, permanent=False)
            return 0
        except Exception as exc:  # a bug in a channel must not stop delivery of the rest
            if not is_transient(exc):  # (a database that went away while the message was rendered: the one
                log_error(log, exc, "outbox message %s (%s) raised", message.id, message.kind)  # line of _failed)
            self._failed(message, DeliveryError(error_line(exc)), permanent=False)  # (no SQL, no parameters)
            return 0
        with self.store.transaction() as tx:
            if ref is not None and message.request_id is not None and message.kind == OutboxKind.REQUEST_OPENED:
                tx.requests.set_message_ref(message.request_id, ref)
            elif message.request_id is not None:
                self._follow_up(tx, message, ref)
            with tx.pipeline(commit=True):  # PostgreSQL: the COMMIT goes with it, no round trip of its own
                tx.outbox.mark_sent(message.id, now=self.clock())
        return 1

    def _superseded(self, message: OutboxMessage) -> bool:
        """Whether the reminder or escalation ``message`` (claimed, about to be sent) is not to be sent after all,
        having marked it ``superseded`` (``OutboxStatus``) with the reason in its ``last_error``:

        - its request is settled (decided, or cancelled): nothing to remind anyone of, nobody to escalate to.
          Every pending reminder and escalation of the request on that channel is marked with it.
        - (a reminder) a later reminder or escalation of its request is pending behind it on its channel (one
          that could not be delivered in time: Slack or Jira unreachable, an issue not created yet): that one
          says what this one would, and more recently. This reminder and every other pending reminder of the
          request before that one are marked, so that when the channel comes back the approvers get the latest
          notice, not one per missed slot. An escalation is never superseded by a later reminder.

        Channel-independent (console, Slack, Jira alike). One transaction; a message whose checks pass is left as
        it is (claimed) and sent. A database error propagates (``_deliver`` counts it as a failed attempt)."""
        request_id = message.request_id
        assert request_id is not None
        with self.store.transaction() as tx:
            request = tx.requests.get(request_id)
            if request is None:
                return False  # (gone: the view is None and nothing is sent anyway)
            if request.status is not RequestStatus.PENDING:
                reason = f"request {request_id} was {past_tense(request.settled_action)} before it could be delivered"
                ids = tx.outbox.supersede(request_id=request_id, channel=message.channel, kinds=_NOTICES,
                                          reason=reason)
            elif message.kind == OutboxKind.REMINDER.value:
                later = tx.outbox.later_notice(message)
                if later is None:
                    return False
                reason = f"a later {later.kind} (message {later.id}) was queued before it could be delivered"
                ids = tx.outbox.supersede(request_id=request_id, channel=message.channel,
                                          kinds=(OutboxKind.REMINDER,), reason=reason, before_id=later.id)
            else:
                return False
        if message.id not in ids:  # (not pending any more: changed by someone else, not ours to send)
            return True
        log.info("outbox message%s %s (%s to %s) superseded, not sent: %s", "s" if len(ids) > 1 else "",
                 ", ".join(map(str, ids)), message.kind, message.channel, reason)
        return True

    def _follow_up(self, tx: Tx, message: OutboxMessage, ref: dict | None) -> None:
        """What a delivered message leaves to do for its request, in the transaction that marks it sent.

        - A reminder or escalation that posted copies of the request with its buttons (``ref["copies"]``,
          e.g. Slack DMs or the whole request in an ``escalate_channel``) has them recorded in the request's
          ``message_ref`` (each with ``via``: the channel string it went through), so that the update after a
          decision reaches them; should the request have settled meanwhile (its update may already be
          delivered without them), another ``request.closed`` is queued on ``via`` to update them now.
        - An update (``request.closed`` / ``request.vote``) delivered on the request's own channel is queued
          again, marked ``copies_only``, on each other kind of channel that holds copies (a Jira request
          escalated to a Slack channel), which updates its copies there.
        """
        now = self.clock()
        request_id = message.request_id
        assert request_id is not None
        copies = (ref or {}).get("copies") if message.kind in (OutboxKind.REMINDER.value,
                                                                OutboxKind.ESCALATION.value) else None
        if copies:
            after = tx.requests.add_message_copies(request_id, [{**c, "via": message.channel} for c in copies])
            if after is not None and after.status is not RequestStatus.PENDING:
                tx.outbox.add(channel=message.channel, kind=OutboxKind.REQUEST_CLOSED, now=now,
                              run_id=message.run_id, request_id=request_id, payload={"copies_only": True})
                self._followed_up = True
            return
        if message.kind not in (OutboxKind.REQUEST_CLOSED.value, OutboxKind.REQUEST_VOTE.value) or (
                (message.payload or {}).get("copies_only")):
            return
        request = tx.requests.get(request_id)
        held = (request.message_ref or {}).get("copies") if request is not None else None
        kind = _kind(message.channel)
        elsewhere = {_kind(c["via"]): c["via"] for c in held or () if isinstance(c, dict) and c.get("via")
                     and _kind(c["via"]) != kind}
        for via in elsewhere.values():
            tx.outbox.add(channel=via, kind=OutboxKind(message.kind), now=now, run_id=message.run_id,
                          request_id=request_id, payload={"copies_only": True})
            self._followed_up = True

    def _send(self, channel: Channel, message: OutboxMessage) -> dict | None:
        view = self.hazel.outbox_view(message=message)
        if view is None:
            return None
        kind = message.kind
        if isinstance(view, ProgressView):
            channel.progress(view)
            return None
        if kind == OutboxKind.REQUEST_OPENED.value:
            return channel.open_request(view) or {}
        if kind in (OutboxKind.REQUEST_CLOSED.value, OutboxKind.REQUEST_VOTE.value):
            channel.update_request(view)
            return None
        if kind in (OutboxKind.REMINDER.value, OutboxKind.ESCALATION.value):
            return channel.remind(view)  # {"copies": [...]}: messages it posted with the request's buttons
        raise PermanentDeliveryError(f"unknown outbox kind {kind!r}")

    def _failed(self, message: OutboxMessage, exc: DeliveryError, *, permanent: bool) -> None:
        partial = getattr(exc, "message_ref", None)  # copies a reminder posted before the call that failed
        if isinstance(partial, dict) and partial.get("copies") and message.request_id is not None:
            with self.store.transaction() as tx:
                self._follow_up(tx, message, partial)
        attempts = message.attempts
        dead = permanent or attempts >= self.max_attempts
        delay = exc.retry_after_sec or min(self.max_backoff_sec, self.backoff_sec * 2 ** (attempts - 1))
        delay *= random.uniform(1.0, 1.25)
        retry_at = None if dead else self.clock() + timedelta(seconds=delay)
        error = self.hazel.redact(str(exc))  # (an API's answer may quote the token it was sent: never stored)
        log.warning("outbox message %s (%s to %s) failed, attempt %d: %s%s", message.id, message.kind,
                    message.channel, attempts, error, " (dead)" if dead else f" (retry in {delay:.1f}s)")
        with self.store.transaction() as tx:
            tx.outbox.mark_failed(message.id, error=error, retry_at=retry_at)
            if dead or attempts == 1:
                tx.events.add(action="outbox.dead" if dead else "outbox.failed", actor=SYSTEM, now=self.clock(),
                              run_id=message.run_id, request_id=message.request_id, message_id=message.id,
                              kind=message.kind, channel=message.channel, error=error[:500])

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
                except Exception as exc:
                    log_failure(log, "outbox delivery pass", exc)
                    self._stop.wait(1.0)

        self._thread = threading.Thread(target=loop, name="hazel-outbox", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


_NOTICES = (OutboxKind.REMINDER.value, OutboxKind.ESCALATION.value)
"""The outbox kinds ``Deliverer._superseded`` looks at before sending: reminders and escalations."""


def _kind(channel: str) -> str:
    """``slack`` for ``slack:C0123``, ``jira`` for ``jira:MIG``, ``console`` for ``console``."""
    return channel.split(":", 1)[0]
