"""The half of the engine's boundary about steering requests and time (``Hazel`` inherits it): what a person
may do on a request, the form pre-check, what waits on a person, request views, the lookup by a channel's
message key, and what the scheduler asks (due requests, firing one, retries' wake-ups)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Callable

from bot.engine import permissions, versions
from bot.engine.errors import (InvalidDecisionError, NoPendingRequestError, NotAllowedError, no_request,
                               not_posted_there)
from store.models import Actor, OutboxKind, OutboxMessage, ProgressView, RequestView, SteeringRequest

if TYPE_CHECKING:
    from bot.engine.steering import Steering
    from bot.engine.registry import Registry
    from bot.engine.timeouts import Fired, Timeouts
    from bot.engine.views import Access, Views
    from store import Store


class Requests:
    """Request and scheduler methods of ``Hazel`` (needs ``store``, ``registry``, ``steering``, ``views``,
    ``timeouts``)."""

    store: "Store"
    registry: "Registry"
    steering: "Steering"
    views: "Views"
    timeouts: "Timeouts"
    clock: Callable[[], datetime]
    _ready: Callable[[str], None]
    _outbox: Callable[[], None]

    def access(self, *, request_id: int, actor: Actor) -> Access:
        """What ``actor`` may do on the request now (to render buttons and refusals).

        Raises:
            NoPendingRequestError: no such request.
        """
        with self.store.read() as tx:
            request = tx.requests.get(request_id)
            run = tx.runs.get(request.run_id) if request is not None else None
            if request is None or run is None:
                raise NoPendingRequestError(f"steering request {request_id} does not exist")
            return self.views.access(tx, request, run, actor)

    def check(self, *, run_id: str, request_id: int, action: str, actor: Actor) -> RequestView:
        """Before a form opens: the view of request ``request_id`` of run ``run_id`` if ``actor`` may take
        ``action`` on it now. The request must be the run's (``request_of``), as for a decision; whether they may
        is answered before whether the request was settled, as the decision itself answers it.

        Raises:
            RunNotFoundError: no such run. RequestNotFoundError: the run has no such request (nothing is
            recorded). InvalidDecisionError: the point does not allow ``action``. NotAllowedError: this person
            may not, whether the request waits or was settled (recorded in the audit log, as the decision itself
            would). AlreadyDecidedError: they may, and it was settled (by whom, when), or their vote is in.
            VersionUnavailableError: the request was settled and who may act at its point is not known here
            (``SteeringCore._settled``).

        For ``rewind``, the view's ``newest_decision`` is the run's newest decision id, read first: a vote (or a
        decision on a request asked beside this one) recorded after it makes the form's rewind refused.
        """
        newest = None
        if action == "rewind":
            with self.store.read() as tx:
                newest = tx.decisions.newest_id(run_id)
        view = self.request_of(run_id=run_id, request_id=request_id)
        if newest is not None:
            view = view.model_copy(update={"newest_decision": newest})
        if view.request.status.value != "pending":
            raise self.steering.refuse_settled(run=view.run, request=view.request, action=action, actor=actor)
        access = self.access(request_id=request_id, actor=actor)
        if access.may(action):
            return view
        if action not in view.actions:
            raise InvalidDecisionError(permissions.not_offered(action, view.title, view.actions))
        if access.earlier is not None and action != "rewind":  # their vote is in: the one refusal of a second
            with self.store.read() as tx:
                error = self.steering._second_vote(tx, view.request, actor, action)
            self.steering.refuse(run_id=view.run.id, request_id=request_id, actor=actor, action=action,
                                 reason=str(error), rule="one vote per person", earlier_decision=access.earlier.id)
            raise error
        reason = access.refused.get(action, "not allowed")
        self.steering.refuse(run_id=view.run.id, request_id=request_id, actor=actor, action=action, reason=reason)
        raise NotAllowedError(reason)

    def waiting_on(self, *, actor: Actor, limit: int = 50, anyone: bool = False) -> list[RequestView]:
        """Pending requests ``actor`` may decide, oldest first (App Home, ``/hazel runs``; ``anyone``: also those
        whose point names no approvers, as the run pages list them)."""
        return self.views.waiting_on(actor, limit=limit, anyone=anyone)

    def request_view(self, *, request_id: int, reminder: bool = False, escalation: bool = False) -> RequestView | None:
        """The request as channels render it now (None: no such request)."""
        with self.store.read() as tx:
            return self.views.request_view(tx, request_id, reminder=reminder, escalation=escalation)

    def request_of(self, *, run_id: str, request_id: int) -> RequestView:
        """Request ``request_id`` of run ``run_id`` as channels render it now, whatever its status: what a
        button or a form that names both (a Slack card's, a modal's ``private_metadata``) acts on. The request
        must be the run's, as a decision's (``decide(run_id=…, request_id=…)``) must: request ids start again
        after a database reset and go back after a restore, so an id alone may name another run's request.

        Raises:
            RunNotFoundError: no run ``run_id``. RequestNotFoundError: the run has no request ``request_id``
            (another run's is not said).
        """
        with self.store.read() as tx:
            run = self.steering._run(tx, run_id)
            self.steering._request_of(tx, run, request_id)
            view = self.views.request_view(tx, request_id, run_id=run.id)
        if view is None:  # (not in one snapshot, which the read is: never None to the caller)
            raise no_request(run_id, request_id)
        return view

    def posted_request(self, *, request_id: int, channel: str | None, ts: str | None) -> RequestView:
        """Request ``request_id`` as channels render it now, when message ``ts`` of conversation ``channel`` is
        one posted for it (``SteeringRequest.posted_in``: its message, an approver's DM, a copy a reminder or an
        escalation posted): what a button of a card an older Hazel posted, whose value named the request only,
        acts on. Its run is the view's; pass it to ``decide`` / ``check``.

        Raises:
            RequestNotFoundError: no request ``request_id`` was posted in that message (none has the id, or it
            was posted elsewhere: the id was handed out again after a database reset or restore; or there is no
            message, e.g. a click in App Home).
        """
        with self.store.read() as tx:
            request = tx.requests.get(request_id)
            if request is None or not request.posted_in(channel, ts):
                raise not_posted_there(request_id)
            view = self.views.request_view(tx, request_id, run_id=request.run_id)
        if view is None:
            raise not_posted_there(request_id)
        return view

    def outbox_view(self, *, message: OutboxMessage) -> RequestView | ProgressView | None:
        """What a channel needs to deliver an outbox message (None: its run or request is gone)."""
        with self.store.read() as tx:
            return self.views.outbox_view(tx, message)

    def request_by_message_key(self, *, key: str, asked_by: datetime | None = None) -> SteeringRequest | None:
        """The latest request a channel posted under ``key`` (a Jira issue id, ``C…:ts`` on Slack); with
        ``asked_by`` (UTC), the latest one asked at or before that time: the one a person acting then saw
        (a Jira comment delivered late answers the version the issue showed when it was written)."""
        with self.store.read() as tx:
            return tx.requests.by_message_key(key, asked_by=asked_by)

    def ask_again(self, *, request_id: int, key: str, actor: Actor, why: str) -> bool:
        """Post the pending request ``request_id`` anew on its channel, its message (posted under message key
        ``key``) being gone: a Jira issue deleted (``actor``: who deleted it; ``why``: what happened, for the
        audit log). In one transaction its message reference is cleared (``RequestRepo.forget_message``), a
        ``request.opened`` message is queued (the channel posts it again: a new issue, whose reminders and
        outcome follow), and ``request.asked_again`` is recorded by ``actor``. The request, its votes and its
        deadlines are unchanged: a deletion decides nothing.

        Returns:
            False, doing nothing, when the request is settled or no longer posted under ``key`` (asked again
            already: the same news delivered twice).
        """
        now = self.clock()
        with self.store.transaction() as tx:
            request = tx.requests.get(request_id)
            if request is None or not tx.requests.forget_message(request_id, key):
                return False
            tx.outbox.add(channel=request.channel, kind=OutboxKind.REQUEST_OPENED, now=now, run_id=request.run_id,
                          request_id=request_id)
            tx.events.add(action="request.asked_again", actor=actor, now=now, run_id=request.run_id,
                          request_id=request_id, reason=why)
        self._outbox()
        return True

    def request_for(self, *, run_id: str, request_id: int | None = None, point: str | None = None) -> SteeringRequest:
        """The pending request a decision would apply to (``decide``'s ``request_id`` and ``point``).

        Raises:
            RunNotFoundError, NoPendingRequestError, AlreadyDecidedError (with who and when).
        """
        with self.store.read() as tx:
            return self.steering._request(tx, self.steering._run(tx, run_id), request_id, point)

    # -- the scheduler -----------------------------------------------------------------------------------

    def due_request_ids(self, *, now: datetime, limit: int = 100) -> list[int]:
        """Pending requests whose reminder, escalation or timeout is due at ``now``, most overdue first: of runs
        whose workflow version this process can execute (``versions.runnable_versions``, as its claims), so
        that a process without it (a rolling deploy) leaves them to one that has it instead of putting them
        off for everyone (a fresh-operator finding, s24: they were looked at again only 10 minutes later)."""
        with self.store.read(snapshot=False) as tx:  # it locks rows (SKIP LOCKED): READ COMMITTED on PostgreSQL
            return tx.timers.due_request_ids(now=now, limit=limit,
                                             runnable=versions.runnable_versions(self.registry))

    def fire_request(self, *, request_id: int, now: datetime) -> Fired:
        """Send what is due on one request (``bot.engine.timeouts``)."""
        return self.timeouts.fire(request_id, now=now)

    def postpone_request(self, *, request_id: int, until: datetime) -> None:
        """Look at a request again at ``until`` (after its firing failed)."""
        self.timeouts.postpone(request_id, until)

    def wake_due_retries(self, *, now: datetime, limit: int = 100) -> list[str]:
        """Wake the workers for each ready run whose retry backoff has ended. Returns their ids."""
        with self.store.read() as tx:
            due = tx.timers.due_retries(now=now, limit=limit)
        for run_id in due:
            self._ready(run_id)
        return due

    def next_due_at(self, *, after: datetime | None = None) -> datetime | None:
        """The earliest moment anything is due: a request's next action or a retry's wake-up; with ``after``,
        the earliest one later than ``after`` (what is due already is left out). None: nothing is."""
        with self.store.read() as tx:
            times = [tx.timers.earliest_request_action(after=after), tx.timers.earliest_retry(after=after)]
        present = [t for t in times if t is not None]
        return min(present) if present else None
