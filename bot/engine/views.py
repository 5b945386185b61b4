"""What channels render: a steering request as it is now (``RequestView``), a run's progress
(``ProgressView``), what a person may do on a request (``Access``), and the requests waiting on a person.

Views are read from the store in one read transaction each; permissions come from ``bot.engine.permissions``
so that a button shown is a button that works, and a refusal shown is the one the engine would give.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from bot.engine import permissions
from bot.engine.choices import rewind_choices
from bot.engine.lgraph import pending_siblings
from bot.engine.people import People
from bot.engine.versions import asked_at, request_point
from bot.engine.workflow import SteeringPoint, Workflow
from store import Store, Tx
from store.models import (
    NODES_JOIN,
    Actor,
    Approvers,
    Decision,
    Delivery,
    OutboxKind,
    OutboxMessage,
    ProgressView,
    RequestStatus,
    RequestView,
    Run,
    SteeringRequest,
    Vote,
    node_names,
    past_tense,
)
from store.waiting import UNKNOWN_KEY, Place

DECIDING = ("approve", "edit", "reject")
"""Actions that make a request "waiting on you" (App Home, ``/hazel runs``)."""
HISTORY_IN_VIEW = 100
"""Checkpoints a request view carries (newest first), read with the request; a rewind's choices
(``RequestView.rewind``) come from them when the run has no more, else from all its checkpoints."""


@dataclass(frozen=True)
class Access:
    """What ``actor`` may do on one steering request now.

    ``allowed``: the actions they may take (in the point's order); ``refused``: for every other action of
    the point, why not (not an approver, self-approval, their vote is already in, the request is settled:
    that last one only for an action they may take there);
    ``earlier``: this person's decision on the request, when they took one (one person, one vote).
    """

    request: SteeringRequest
    allowed: tuple[str, ...]
    refused: dict[str, str]
    earlier: Decision | None = None

    def may(self, action: str) -> bool:
        return action in self.allowed

    @property
    def may_decide(self) -> bool:
        """True when they may approve, edit or reject (the request waits on them)."""
        return any(a in self.allowed for a in DECIDING)

    @property
    def waits_on(self) -> bool:
        """True when the request waits on them ("waiting on you", the DMs Slack sends approvers): they may
        decide it and, when the point offers approve, they may approve it (the starter of a run under a
        self-approval ban may still reject, but the request waits on someone else)."""
        offers_approve = "approve" in self.allowed or "approve" in self.refused
        return self.may_decide and (not offers_approve or self.may("approve"))


class Views:
    """Builds views from ``store`` with the definition each run continues on (``target``: ``Run -> Workflow |
    None``, ``versions.target_workflow``)."""

    def __init__(self, store: Store, target: Callable[[Run], Workflow | None], people: People) -> None:
        self.store = store
        self.target = target
        self.people = people

    def point_of(self, tx: Tx, run: Run, request: SteeringRequest) -> SteeringPoint | None:
        """The steering point ``request`` waits at, in the version ``run`` continues on (None: not deployed)."""
        return request_point(tx, self.target(run), run, request)

    def request_view(self, tx: Tx, request_id: int | None, *, reminder: bool = False,
                     escalation: bool = False, run_id: str | None = None) -> RequestView | None:
        """The request as it is now (None if it no longer exists). ``run_id``: the run it belongs to, when the
        caller knows it (an outbox message's): the request, its run, its decisions and the run's newest
        checkpoints are then read together (``Tx.pipeline``: one round trip on PostgreSQL instead of four),
        the state it asked about after."""
        if request_id is None:
            return None
        if run_id is not None:
            with tx.pipeline():
                asked = (tx.requests.get_later(request_id), tx.runs.get_later(run_id),
                         tx.decisions.for_request_later(request_id, run_id),
                         tx.checkpoints.list_later(run_id, newest=HISTORY_IN_VIEW))
            request, run, decisions, checkpoints = (later.get() for later in asked)  # (each read: none left open)
            if request is not None and request.run_id != run_id:  # (not the caller's run after all)
                return self.request_view(tx, request_id, reminder=reminder, escalation=escalation)
        else:
            request = tx.requests.get(request_id)
            run = tx.runs.get(request.run_id) if request is not None else None
        if request is None or run is None:
            return None
        if run_id is None:
            decisions = tx.decisions.for_request(request.id, request.run_id)
            checkpoints = tx.checkpoints.list(run.id, newest=HISTORY_IN_VIEW)
        wf = self.target(run)  # the version a decision on it is made on (a run to migrate: the new one)
        point, tree, _ = asked_at(wf, run, request, tx.checkpoints.load(run.id, request.checkpoint_seq))
        tree = {} if tree is None else tree
        show = getattr(point, "show", None)
        shown = tree.get(show) if show and isinstance(tree, dict) else tree
        actions = tuple(getattr(point, "actions", ("approve", "reject")))
        rewind = None
        if "rewind" in actions:  # (a long run: every checkpoint read, to offer #0 and where each step starts)
            history = checkpoints if len(checkpoints) < HISTORY_IN_VIEW else tx.checkpoints.list(run.id)
            rewind = rewind_choices(history, head_seq=run.head_seq)
        return RequestView(
            request=request, run=run, workflow=run.workflow, workflow_version=run.workflow_version,
            point=request.point, show=show, shown_value=shown,  # (a run to migrate: v2's title, s33 F9)
            title=point.title if point is not None and wf is not None and wf.version != run.workflow_version
            else request.title,
            actions=actions,
            approvers=permissions.shown_approvers(getattr(point, "approvers", None) or Approvers(), self.people,
                                                  request.channel),
            escalate_to=permissions.shown_approvers(point.escalate_to, self.people, request.channel)
            if getattr(point, "escalate_to", None) is not None else None,
            escalate_channel=getattr(point, "escalate_channel", None), point_known=point is not None,
            notify_approvers=bool(getattr(point, "notify_approvers", False)),
            options=dict(getattr(point, "options", {}) or {}),
            decisions=tuple(decisions),
            checkpoints=tuple(checkpoints), rewind=rewind,
            reminder=reminder, escalation=escalation,
            still_pending=tuple(pending_siblings(tx, wf, request)) if request.status is not RequestStatus.PENDING
            else (),
            **self._waiting_for(point, request, run, decisions),
        )

    def _waiting_for(self, point: SteeringPoint | None, request: SteeringRequest, run: Run,
                     decisions: list[Decision]) -> dict[str, Approvers | bool | None]:
        """``waiting_for`` and ``nobody_left`` of a request's view (``permissions.still_deciding``): who can
        still move pending ``request``, given the votes in (``decisions``) and the self-approval ban; nothing
        for a settled request or an unknown point."""
        if point is None or request.status is not RequestStatus.PENDING:
            return {}
        lists = permissions.approvers_of(point, escalated=request.escalated_at is not None)
        voted = {d.person or self.people.person_of(d.channel, d.actor_id) for d in decisions
                 if d.channel not in permissions.HAZEL_ITSELF}
        starter = None if point.allow_self_approval else (
            run.started_by_person or self.people.person_of(run.started_via, run.started_by))
        left = permissions.still_deciding(lists, self.people, request.channel, voted=voted, starter=starter)
        others = (permissions.still_deciding([point.approvers], self.people, request.channel, voted=set(),
                                             starter=starter) if starter else None)
        return {"waiting_for": left, "nobody_left": left is None, "not_starter": others or None}

    def progress_view(self, tx: Tx, message: OutboxMessage) -> ProgressView | None:
        """A ``run.progress`` outbox message as channels render it (None: the run is gone)."""
        if not message.run_id:
            return None
        with tx.pipeline():  # (PostgreSQL: one round trip for the run and its requests)
            asked = (tx.runs.get_later(message.run_id),
                     tx.requests.get_later(message.request_id) if message.request_id else None,
                     tx.requests.get_later(message.payload["next_request_id"])
                     if message.payload.get("next_request_id") else None)
        run, request, next_request = (later.get() if later is not None else None for later in asked)
        if run is None:
            return None
        payload = dict(message.payload)
        event = payload.pop("event", "waiting")
        steps = tuple(payload.pop("steps", ()) or ())
        paused = tuple(payload.pop("paused", ()) or ())
        if paused and steps:  # the super-step that asked: only its nodes that did not pause are done
            rest = [name for name in node_names(steps[-1]) if name not in paused]
            steps = (*steps[:-1], *([NODES_JOIN.join(rest)] if rest else []))
        payload.pop("next_request_id", None)
        return ProgressView(
            run=run, workflow=run.workflow, event=event, steps=steps, paused=paused, facts=payload,
            request=request, next_request=next_request,
        )

    def outbox_view(self, tx: Tx, message: OutboxMessage) -> RequestView | ProgressView | None:
        """What a channel needs to deliver ``message`` (None: its run or request is gone), with its
        ``delivery`` (the message's key and attempt: a channel makes a retried post idempotent with them) and,
        for a ``request.vote``, the vote as it was counted (``RequestView.vote``, from the message's payload)."""
        view: RequestView | ProgressView | None
        if message.kind == OutboxKind.RUN_PROGRESS.value:
            view = self.progress_view(tx, message)
        else:
            view = self.request_view(tx, message.request_id, reminder=message.kind == OutboxKind.REMINDER.value,
                                     escalation=message.kind == OutboxKind.ESCALATION.value,
                                     run_id=message.run_id)
        if view is None:
            return None
        key = f"{message.run_id}/{message.id}" if message.run_id else f"outbox/{message.id}"
        update: dict[str, object] = {"delivery": Delivery(key=key, attempt=message.attempts,
                                                          queued_at=message.created_at)}
        if message.kind == OutboxKind.REQUEST_VOTE.value and isinstance(view, RequestView):
            update["vote"] = Vote.from_payload(message.payload)
        if message.kind == OutboxKind.REQUEST_CLOSED.value and isinstance(view, RequestView):
            update.update(settled_by_id=message.payload.get("by_id"),
                          settled_by_channel=message.payload.get("by_channel"))
        return view.model_copy(update=update)

    def access(self, tx: Tx, request: SteeringRequest, run: Run, actor: Actor) -> Access:
        """What ``actor`` may do on ``request`` (see ``Access``)."""
        point = self.point_of(tx, run, request)
        if point is None:
            return Access(request, (), {a: "the run's workflow version is not deployed here" for a in DECIDING})
        reasons = permissions.reasons(point, actor, run, self.people, escalated=request.escalated_at is not None)
        if request.status is not RequestStatus.PENDING:  # why not: may they first, then who settled it
            why = f"this request was already {past_tense(request.decided_action)} by {request.decided_by}"
            return Access(request, (), {a: reasons.get(a) or why for a in point.actions})
        mine = tx.decisions.by_person(request.id, actor.who)
        allowed, refused = [], {}
        for action in point.actions:
            why = reasons.get(action)
            if why is None and mine is not None and action != "rewind":
                why = (f"{mine.person} already {past_tense(mine.action.value)} this request: one person has one "
                       "vote")
            if why is None:
                allowed.append(action)
            else:
                refused[action] = why
        return Access(request, tuple(allowed), refused, mine)

    def waiting_on(self, actor: Actor, *, limit: int = 50, scan: int = 500,
                   anyone: bool = False) -> list[RequestView]:
        """Pending requests ``actor`` may decide, oldest first (ties by id), at most ``limit``: those on a Slack
        channel, and those that name approvers (anyone may decide an approver-less console request, which is
        nobody's in particular); ``anyone``: every request ``actor`` may decide, approver-less ones included
        (the run pages' "waiting on me", which offers their buttons). ``scan``: most requests read per page.

        Its cost follows where requests wait and what it returns, not how many are pending (``store.waiting``):
        the distinct places pending requests wait at (workflow, version, steering point, permission key,
        channel) come from a skip scan of an index, each with its oldest request; whether ``actor`` may decide
        there at all (an approver, or a backup approver of escalated requests only) is decided once per place,
        on that request; then only the pending requests of the places left are read, oldest first, a page at a
        time, and each is checked as ``access`` checks it (``Access.waits_on``: the self-approval ban, a vote
        already in), until
        ``limit`` are found or none are left."""
        out: list[RequestView] = []
        with self.store.read() as tx:
            chosen = [p for p in (self._place_for(tx, place, request, run, actor, anyone)
                                  for place, request, run in tx.requests.pending_places()) if p is not None]
            after, page = None, max(1, min(scan, max(limit, 20)))
            while chosen and len(out) < limit:
                rows = tx.requests.pending_at(chosen, after=after, limit=page)
                for request, run in rows:
                    if self._waits_on(tx, request, run, actor, anyone):
                        view = self.request_view(tx, request.id)
                        if view is not None:
                            out.append(view)
                    if len(out) >= limit:
                        break
                if len(rows) < page:
                    break
                after, page = (rows[-1][0].created_at, rows[-1][0].id), min(scan, page * 2)
        return out

    def _waits_on(self, tx: Tx, request: SteeringRequest, run: Run, actor: Actor, anyone: bool) -> bool:
        """Whether pending ``request`` is one ``waiting_on`` lists for ``actor``."""
        point = self.point_of(tx, run, request)
        return _listed(point, request.channel, anyone) and self.access(tx, request, run, actor).waits_on

    def _place_for(self, tx: Tx, place: Place, request: SteeringRequest, run: Run, actor: Actor,
                   anyone: bool) -> Place | None:
        """``place`` (escalated requests only, when only backup approvers include ``actor``) if ``actor`` may
        decide some request there, judged on ``request`` (the oldest there); None: no request there waits on
        them. A place whose requests may differ (an unknown point key; a run whose version is not the one its
        request names) is kept whole: each of its requests is checked on its own."""
        if place.point_key == UNKNOWN_KEY or (run.workflow, run.workflow_version) != (place.workflow,
                                                                                       place.workflow_version):
            return place
        point = self.point_of(tx, run, request)
        if not _listed(point, place.channel, anyone):
            return None
        if self._may_decide_at(point, actor, escalated=False):
            return place
        if point.escalate_to is not None and self._may_decide_at(point, actor, escalated=True):
            return replace(place, escalated_only=True)
        return None

    def _may_decide_at(self, point: SteeringPoint, actor: Actor, *, escalated: bool) -> bool:
        """Whether ``actor`` may approve, edit or reject at ``point`` on a run they did not start, before
        voting (what ``access`` allows on top of that only narrows it)."""
        return any(permissions.refusal(point, a, actor, None, self.people, escalated=escalated) is None
                   for a in DECIDING)


def _listed(point: SteeringPoint | None, channel: str, anyone: bool) -> bool:
    """Whether a request at ``point`` on ``channel`` is one "waiting on me" lists for whoever may decide it:
    on a Slack channel, or at a point naming approvers (an approver-less console request is nobody's in
    particular), or any with ``anyone``."""
    return point is not None and (anyone or channel.startswith("slack") or not point.approvers.empty)
