"""What deciding, rewinding and the run-level actions share: finding the run and its request, the permission
check with its audited refusal, "already decided by …" answers, and the outcome of a decision.

Every refusal (not allowed, a second vote by the same person, a request someone already decided) is recorded
in the audit log as ``decision.refused`` with the rule that refused it, in its own transaction, so that nothing
else changes. A refusal's record is written only on the refusal's path: a decision taken writes nothing more.

Whether a person may act is answered before whether the request was settled (``_settled``): a person who may
not take an action at a steering point is refused as such (``NotAllowedError``) whether its request waits or
was decided or cancelled, on every channel; only a person who may is told who settled it and when.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable

from bot.engine import permissions
from bot.engine.errors import (
    AlreadyDecidedError,
    HazelError,
    InvalidDecisionError,
    NoPendingRequestError,
    NotAllowedError,
    RunStateError,
    UnaskedPointError,
    VersionUnavailableError,
    no_request,
    quoted,
)
from bot.engine.lgraph import LangGraphWorkflow, pending_siblings
from bot.engine.limits import DEFAULT_MAX_STATE_BYTES
from bot.engine.people import People
from bot.engine.reads import run_in
from bot.engine.registry import Registry
from bot.engine.transitions import Asked
from bot.engine.versions import request_point, resolve_workflow, target_workflow
from bot.engine.workflow import SteeringPoint
from store import ChainPosition, NewCheckpoint, Store, Tx
from store.models import (
    Actor,
    Decision,
    RequestStatus,
    Run,
    RunStatus,
    SteeringRequest,
    claimed_person,
    past_tense,
)

if TYPE_CHECKING:
    from bot.engine.runner import Claim, Runner

REWINDABLE = (RunStatus.WAITING, RunStatus.READY, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.REJECTED,
              RunStatus.CANCELLED)
"""A run can be rewound in any status but ``running`` (a step is executing)."""


def when(ts: datetime | None) -> str:
    """``2026-03-01 09:00 UTC`` (or "earlier")."""
    return ts.strftime("%Y-%m-%d %H:%M UTC") if ts else "earlier"


class Refused(Exception):
    """A permission refusal found inside a decision's or a rewind's transaction: the caller records it
    (``SteeringCore.refuse``) once that transaction rolled back, and raises ``NotAllowedError`` with
    ``reason``. ``request_id``: the request refused (None: a rewind of a run that waits on none)."""

    def __init__(self, reason: str, run_id: str, request_id: int | None) -> None:
        super().__init__(reason)
        self.reason, self.run_id, self.request_id = reason, run_id, request_id


@dataclass(frozen=True)
class DecisionOutcome:
    """What a decision did.

    ``settled``: the request was decided (False: a quorum vote was counted and more are needed).
    ``duplicate``: the same channel delivery was recorded before; nothing new happened.
    ``run_status``: the run's status right after (``ready`` or ``running``: it resumes next).
    ``claim``: when the decision also leased the run for this process (``claim=True``), what the runner needs
    to continue it at once, without reading anything (``Hazel.drive(..., claim=...)``).
    ``still_pending``: the other requests the run still waits on after this decision (a LangGraph super-step's
    other interrupts, oldest first; the run resumes once they are answered too); empty when none.
    """

    decision: Decision
    request: SteeringRequest | None
    settled: bool
    run_status: RunStatus
    next_node: str | None = None
    duplicate: bool = False
    claim: "Claim | None" = None
    still_pending: tuple[SteeringRequest, ...] = ()

    @property
    def run_id(self) -> str:
        return self.decision.run_id

    @property
    def resumes(self) -> bool:
        """True when the run continues executing after this decision."""
        return self.run_status in (RunStatus.READY, RunStatus.RUNNING) and not self.duplicate


def now_waits_at(run_id: str, waiting: list[SteeringRequest]) -> str:
    """``; run R now waits at 'review_plan' (request 9)`` (several: each, by point and id), what follows who
    settled a request a decision named; ``""`` when ``waiting`` is empty."""
    if not waiting:
        return ""
    return f"; run {run_id} now waits at " + ", ".join(f"{r.point!r} (request {r.id})" for r in waiting)


class SteeringCore:
    """The shared state of the steering mixins (``bot.engine.steering.Steering``).

    Args:
        runner: leases runs for this process (a decision that claims the run) and renews their leases.
        on_ready: called with a run id after a commit that made the run ``ready`` (wake a worker).
        on_outbox: called after a commit that wrote outbox rows (wake the deliverer).
        max_state_bytes: the largest state (and decision text) a decision may make (``HAZEL_MAX_STATE_BYTES``,
            ``bot.engine.limits``).
        on_claimed: called with a ``Claim`` the decision made for this process when the caller did not ask to
            drive it itself (the worker pool executes it); None: decisions leave the run ``ready`` instead.
    """

    def __init__(self, store: Store, registry: Registry, people: People, runner: "Runner", *,
                 clock: Callable[[], datetime], on_ready: Callable[[str], None],
                 on_outbox: Callable[[], None], max_state_bytes: int = DEFAULT_MAX_STATE_BYTES) -> None:
        self.store = store
        self.registry = registry
        self.people = people
        self.runner = runner
        self.clock = clock
        self.on_ready = on_ready
        self.on_outbox = on_outbox
        self.max_state_bytes = max_state_bytes
        self.on_claimed: Callable[["Claim"], None] | None = None

    # -- reading --------------------------------------------------------------------------------------------

    _run = staticmethod(run_in)  # the run read in a transaction, else RunNotFoundError (``reads.run_in``)

    def _request(self, tx: Tx, run: Run, request_id: int | None, point: str | None = None, *,
                 actor: Actor | None = None, action: str | None = None) -> SteeringRequest:
        """The pending request a decision applies to: ``request_id``, else the latest at ``point``, else the
        run's pending one. ``actor`` taking ``action``: when the request found is settled, whether they may is
        answered first (``_settled``); without them (a read, not a decision) it is answered with who settled it.

        Raises:
            NoPendingRequestError (UnaskedPointError: ``point`` is one the workflow does not declare, or the run
            never asked at; RequestNotFoundError: ``request_id`` is not one of the run's requests),
            AlreadyDecidedError (the request named was settled: by whom, when), and for ``actor`` on a settled
            request, as ``_settled`` answers: Refused, InvalidDecisionError, VersionUnavailableError.
        """
        if request_id is None and point is not None:
            at_point = tx.requests.latest_at_point(run.id, point)
            if at_point is None:
                raise self._undeclared(run, point) or UnaskedPointError(
                    f"run {run.id} has never asked anything at {point!r}",
                    hint=f"hazel retry {run.id}" if run.status is RunStatus.READY else None)
            request_id = at_point.id
        if request_id is None:
            request = tx.requests.pending_for_run(run.id)
            if request is None:
                last = tx.requests.latest_for_run(run.id)
                failed = ("; it failed: retry it to resume it from its last good checkpoint"
                          if run.status is RunStatus.FAILED else "")
                if last is not None and last.status is not RequestStatus.PENDING:
                    # the run's last request was settled: refused as a decision naming it is (may they, who, how)
                    raise self._settled(tx, run, last, actor, action,
                                        tail=f" (run {run.id} is {run.status.value}, not waiting on a steering "
                                             f"request; its last request was {last.title!r}{failed})")
                raise NoPendingRequestError(f"run {run.id} is {run.status.value}, not waiting on a steering request"
                                            f"{failed}")
            return request
        request = self._request_of(tx, run, request_id)
        if request.status is not RequestStatus.PENDING:
            raise self._settled(tx, run, request, actor, action, tail=self._now_waits(tx, run, request))
        return request

    @staticmethod
    def _now_waits(tx: Tx, run: Run, settled: SteeringRequest) -> str:
        """What follows who settled ``settled``, a request named by its point or id: where the run waits now
        (``; run R now waits at 'review_plan' (request 4)``: after a rewind, the point named may have been
        settled on the old branch while the run waits at another); ``""`` when it waits on nothing."""
        return now_waits_at(run.id, [r for r in tx.requests.pending(run_ids=[run.id]) if r.id != settled.id])

    @staticmethod
    def _request_of(tx: Tx, run: Run, request_id: int) -> SteeringRequest:
        """Request ``request_id`` of ``run``, whatever its status: the one check that a request a decision (or a
        form, a button) names is one of the run's.

        Raises:
            RequestNotFoundError: no request has that id, or another run's has (nothing is said of that one).
        """
        request = tx.requests.get(request_id)
        if request is None or request.run_id != run.id:
            raise no_request(run.id, request_id)
        return request

    def _undeclared(self, run: Run, point: str) -> UnaskedPointError | None:
        """The refusal of a decision naming ``point`` when the run's workflow (its pinned version, and the one it
        continues on) declares no steering point of that name; None when one does, or when that is not known
        here (a LangGraph graph's points come with its interrupts; a version that is not deployed)."""
        pinned, target = self.registry.find(run.workflow, run.workflow_version), target_workflow(self.registry, run)
        known = [wf for wf in (pinned, target if target is not pinned else None)
                 if wf is not None and not isinstance(wf, LangGraphWorkflow)]
        if not known or any(isinstance(wf.nodes.get(point), SteeringPoint) for wf in known):
            return None
        names = list(dict.fromkeys(p.name for wf in known for p in wf.steering_points()))
        return UnaskedPointError(f"workflow {known[0].label} has no steering point {quoted(point)} (its steering "
                                 f"points: {', '.join(names) or 'none'})")

    def _settled(self, tx: Tx, run: Run, request: SteeringRequest, actor: Actor | None, action: str | None, *,
                 tail: str = "") -> Exception:
        """The answer to ``actor`` taking ``action`` on ``request``, which is no longer pending (decided or
        cancelled): whether they may comes first, as on a pending request, so that the answer to a person who
        may not act there does not depend on whether the request still waits. In order:

        - ``InvalidDecisionError``: the request's steering point does not offer ``action``;
        - ``Refused``: ``actor`` may not take it there (``permissions.refusal``, the one check a pending
          request's decision makes: the point's approvers and per-action permissions, its backup approvers when
          the request's row says it was escalated, the self-approval ban against who started the run, the
          console acting for someone). The caller records it as a permission refusal and raises
          ``NotAllowedError``;
        - ``AlreadyDecidedError`` (``_already``, with ``tail``): they may, and are told who settled it, when, how.

        The point is the one the request was asked at, in the version the run continues on (a LangGraph run's
        from the checkpoint it was asked at). When it is not known here (that version is not deployed, or no
        longer has the point), whether anyone may act there is not known either, and nobody is told who settled
        it: ``VersionUnavailableError``, as a decision on a pending request of such a run is answered. Hazel
        itself (a timeout, the system) may always act, and without ``actor`` (a read, not a decision) the
        answer is ``_already``'s.
        """
        if actor is None or action is None or actor.channel in permissions.HAZEL_ITSELF:
            return self._already(tx, request, tail=tail)
        try:
            wf = resolve_workflow(self.registry, run)
        except VersionUnavailableError as error:  # (not deployed here: who may act there is not known)
            return error
        point = request_point(tx, wf, run, request)
        if point is None:  # who may act there is not known here either
            lost = ("the checkpoint it was asked at is no longer kept" if isinstance(wf, LangGraphWorkflow)
                    else f"{wf.label} has no steering point {request.point!r}")
            return VersionUnavailableError(f"who may decide request {request.id} of run {run.id} at "
                                           f"{request.point!r} is not known here: {lost}")
        if action not in point.actions:
            return InvalidDecisionError(permissions.not_offered(action, point.title, point.actions))
        reason = permissions.refusal(point, action, actor, run, self.people,
                                     escalated=request.escalated_at is not None)
        if reason is not None:
            return Refused(reason, run.id, request.id)
        return self._already(tx, request, tail=tail)

    def refuse_settled(self, *, run: Run, request: SteeringRequest, action: str, actor: Actor) -> HazelError:
        """The answer to ``actor`` taking ``action`` on ``request``, which is no longer pending, outside a
        decision's transaction (before a form opens: ``Hazel.check``), as ``_settled`` gives it; a person who
        may not act there gets ``NotAllowedError``, recorded in the audit log as a decision's refusal is."""
        with self.store.read() as tx:
            answer = self._settled(tx, run, request, actor, action)
        if isinstance(answer, Refused):
            return self.not_allowed(answer, actor=actor, action=action)
        assert isinstance(answer, HazelError)
        return answer

    @staticmethod
    def _already(tx: Tx, request: SteeringRequest, *, tail: str = "") -> AlreadyDecidedError:
        """The answer to a decision on a request that is no longer pending: who settled it, when, how (then
        ``tail``)."""
        if request.status is RequestStatus.CANCELLED:
            return AlreadyDecidedError(f"this request was cancelled ({when(request.decided_at)}, "
                                       f"by {request.decided_by or 'Hazel'}){tail}", decided_by=request.decided_by,
                                       decided_at=request.decided_at, action="cancel", request_id=request.id)
        winner = next((d for d in reversed(tx.decisions.for_request(request.id, request.run_id))
                       if d.action.value == request.decided_action), None)
        by = request.decided_by or "someone"
        person = claimed_person(winner.person) if winner is not None else None
        if person and person != by and not by.endswith(f" for {person}"):
            # the person, beside the identity they used (a token, a Slack or Jira account)
            by = f"{person} ({by})"
        return AlreadyDecidedError(f"already {past_tense(request.decided_action)} by {by} at "
                                   f"{when(request.decided_at)}{tail}", decided_by=request.decided_by,
                                   decided_at=request.decided_at, action=request.decided_action,
                                   decided_by_id=winner.actor_id if winner else None,
                                   channel=winner.channel if winner else None, request_id=request.id)

    # -- permissions -----------------------------------------------------------------------------------------

    def refuse(self, *, run_id: str | None, request_id: int | None, actor: Actor, action: str, reason: str,
               **detail: object) -> None:
        """Record a refused attempt in the audit log (its own transaction; nothing else changes)."""
        with self.store.transaction() as tx:
            tx.events.add(action="decision.refused", actor=actor, now=self.clock(), run_id=run_id,
                          request_id=request_id, attempted=action, reason=reason, **detail)

    def not_allowed(self, refused: Refused, *, actor: Actor, action: str) -> NotAllowedError:
        """Record ``refused`` (found inside a transaction that then rolled back) in the audit log, and return the
        ``NotAllowedError`` to raise."""
        self.refuse(run_id=refused.run_id, request_id=refused.request_id, actor=actor, action=action,
                    reason=refused.reason)
        return NotAllowedError(refused.reason)

    def refuse_decided(self, *, run_id: str, actor: Actor, action: str, error: AlreadyDecidedError) -> None:
        """Record ``error``, the refusal of a decision on a request that was settled first (by someone else,
        or by a rewind, a cancel, a timeout), as ``decision.refused`` with the rule "already decided". Hazel's
        own timeout that finds the request decided is not an attempt anyone made: it is not recorded."""
        if actor.channel == "timeout":
            return
        self.refuse(run_id=run_id, request_id=error.request_id, actor=actor, action=action, reason=error.message,
                    rule="already decided", decided_by=error.decided_by)

    def _second_vote(self, tx: Tx, request: SteeringRequest, actor: Actor, action: str) -> AlreadyDecidedError:
        """The refusal of a second decision by the same person on one request (audited by the caller)."""
        earlier = tx.decisions.by_person(request.id, actor.who)
        current = tx.requests.get(request.id)
        if earlier is None:
            return AlreadyDecidedError(f"{actor.label} already decided this request", decided_by=actor.label,
                                       decided_at=None, action=None, decided_by_id=actor.id, channel=actor.channel,
                                       request_id=request.id)
        through = f"{earlier.channel} ({earlier.actor_id})"
        if earlier.acting_for and earlier.channel == "console":
            through = f"the console (operator {earlier.actor_id} for {earlier.acting_for})"
        elif earlier.acting_for:  # a person link (``hazel link --for``): channel web, the operator who made it
            through = f"a link made by operator {earlier.actor_id} (for {earlier.acting_for})"
        counted = (f"; {current.approvals} of {current.approvals_required} approvals so far"
                   if current is not None and current.approvals_required > 1 else "")
        return AlreadyDecidedError(
            f"{claimed_person(earlier.person) or earlier.label} already {past_tense(earlier.action.value)} this "
            f"request through {through} at {when(earlier.created_at)}: one person has one vote, whichever channel "
            f"they use{counted}",
            decided_by=earlier.label, decided_at=earlier.created_at, action=earlier.action.value,
            decided_by_id=earlier.actor_id, channel=earlier.channel, own=True, request_id=request.id)

    def _earlier_delivery(self, channel: str, delivery_id: str) -> DecisionOutcome | None:
        """The outcome of a decision this channel delivery already made (Slack's and Jira's retries), with
        what the run still waits on as it is now (a settled request's pending siblings, as the first answer
        gave them) and the step the decision's checkpoint continued at (``next_node``, as the first answer
        gave it: a rewind's fork, a settling decision's checkpoint; None when it wrote none or it was
        pruned)."""
        with self.store.read() as tx:
            earlier = tx.decisions.by_delivery(channel, delivery_id)
            if earlier is None:
                return None
            run = tx.runs.get(earlier.run_id)
            request = tx.requests.get(earlier.request_id) if earlier.request_id else None
            settled = request is None or (request.status is not RequestStatus.PENDING
                                          and self._settled_by(tx, request, earlier))
            still: tuple[SteeringRequest, ...] = ()
            if request is not None and run is not None:  # ([] for a native workflow: no query)
                still = tuple(pending_siblings(tx, target_workflow(self.registry, run), request))
            written = tx.checkpoints.of_decision(earlier.run_id, earlier.id) if settled else None
        return DecisionOutcome(decision=earlier, request=request, settled=settled,
                               run_status=run.status if run else RunStatus.CANCELLED, duplicate=True,
                               still_pending=still, next_node=written.next_step if written else None)

    @staticmethod
    def _settled_by(tx: Tx, request: SteeringRequest, decision: Decision) -> bool:
        """Whether ``decision`` is the one that settled ``request`` (which is no longer pending): the last of
        the request's decisions with the action it was settled by. A quorum vote answered again (its delivery
        retried) says ``settled`` as its first answer did, not as the request is now: another person's vote
        that settled it later is not this one."""
        if request.decided_action != decision.action.value:
            return False
        same = [d.id for d in tx.decisions.for_request(request.id, request.run_id) if d.action is decision.action]
        return bool(same) and same[-1] == decision.id

    def _raced_delivery(self, actor: Actor, delivery_id: str | None) -> DecisionOutcome | None:
        """After a decision with ``delivery_id`` failed because the request was no longer pending or the run
        had moved (``NoPendingRequestError``, ``AlreadyDecidedError``, ``RunStateError``): the outcome of the
        same delivery when it was the one that got there first (the same retry sent at once, which committed
        while this one waited for the run's lock), as ``_earlier_delivery`` gives it; None otherwise, and
        the caller raises its error."""
        return self._earlier_delivery(actor.channel, delivery_id) if delivery_id is not None else None

    # -- resuming ---------------------------------------------------------------------------------------------

    def _resume(self, tx: Tx, run: Run, *, checkpoint: NewCheckpoint, tree: Any, parent: ChainPosition | None,
                claim: bool, now: datetime, asked: Asked | None = None, **values: Any) -> "Claim | None":
        """Write the checkpoint a decision or rewind resumes from and move the run onto it, in the caller's
        transaction: leased for this process (``claim``, or when a worker pool here takes claims), else
        ``ready`` for any worker (with ``NOTIFY``). ``values``: more run columns to set; ``asked``: the run's
        latest steering request, when the caller knows it (kept in the claim's head). Returns the claim.

        Raises:
            RunStateError: the run moved meanwhile (its status is no longer ``run.status``).
        """
        return self._resume_later(tx, run, checkpoint=checkpoint, tree=tree, parent=parent, claim=claim, now=now,
                                  asked=asked, **values)()

    def _resume_later(self, tx: Tx, run: Run, *, checkpoint: NewCheckpoint, tree: Any,
                      parent: ChainPosition | None, claim: bool, now: datetime, asked: Asked | None = None,
                      **values: Any) -> "Callable[[], Claim | None]":
        """``_resume`` with the run's move checked when the returned function is called (after a
        ``tx.pipeline()``: no round trip of its own); that call raises ``RunStateError``."""
        from bot.engine.runner import Claim, Head

        position = tx.checkpoints.write(checkpoint, tree, parent)
        leased = claim or self.on_claimed is not None
        lease = {}
        if leased:
            lease = dict(status=RunStatus.RUNNING, lease_owner=self.runner.owner, lease_token=secrets.token_hex(8),
                         lease_expires_at=now + timedelta(seconds=self.runner.lease_sec))
        moved = {"head_seq": checkpoint.seq, "last_seq": checkpoint.seq, "attempt": 0, "wake_at": None,
                 "error": None, "error_traceback": None, "status": RunStatus.READY, **values, **lease}
        moved_later = tx.runs.transition_later(run.id, from_statuses=[run.status], now=now, **moved)
        if not leased:
            tx.notify_ready(run.id)  # (sent at commit; a rollback takes it back)

        def made() -> "Claim | None":
            if not moved_later.get():
                raise RunStateError(f"run {run.id} changed meanwhile; look at it again and try again",
                                    hint=f"hazel show {run.id}")
            if not leased:
                return None
            leased_run = run.model_copy(update={**moved, "updated_at": now})
            return Claim(leased_run, Head(position, checkpoint.next_step, checkpoint.handoff, checkpoint.branch,
                                         asked))
        return made

    def _resumed(self, run_id: str, claim: "Claim | None", *, wanted: bool) -> "Claim | None":
        """After the commit: hand a claim the caller did not ask for to this process's workers, or wake
        workers for a ready run. Returns the claim the caller asked for."""
        self.on_outbox()
        if claim is None:
            self.on_ready(run_id)
            return None
        if wanted:
            return claim
        assert self.on_claimed is not None
        self.on_claimed(claim)
        return None
