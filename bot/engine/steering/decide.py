"""Decisions: the one path every channel (CLI, Slack, Jira, REST, timeouts) takes to steer a run.

A decision is checked (run, pending request, allowed action, permissions, a valid edit), then recorded in ONE
transaction: the decision row (unique per person per request, and per channel delivery id), the conditional
settle of the request (``WHERE status = 'pending'``), the checkpoint that applies it (the edited state, or
the SME's words handed to the next step), the run's new head and status, the audit event and the outbox
notifications. The database settles every race: of two decisions only one settles a request, and the loser
gets ``AlreadyDecidedError`` naming who decided and when.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from bot.ops import hooks
from bot.engine import permissions
from bot.engine.errors import (
    AlreadyDecidedError,
    CheckpointNotFoundError,
    InvalidDecisionError,
    NoPendingRequestError,
    NotAllowedError,
    RunNotFoundError,
    RunStateError,
    VersionUnavailableError,
)
from bot.ops.logs import bind_log_context
from bot.engine.registry import Registry
from bot.engine.transitions import progress
from bot.engine.versions import migrate_tree, point_in, resolve_workflow, write_migration
from bot.engine.workflow import REWIND_NODE, SteeringPoint, Workflow
from store import DuplicateDecisionError, NewCheckpoint, Store, Tx
from store.models import Action, Actor, Decision, RequestStatus, Run, RunStatus, SteeringRequest

log = logging.getLogger("hazel.steering")
PAST_TENSE = {"approve": "approved", "edit": "edited", "reject": "rejected", "feedback": "answered with feedback",
              "rewind": "rewound", "cancel": "cancelled"}
REWINDABLE = (RunStatus.WAITING, RunStatus.READY, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.REJECTED,
              RunStatus.CANCELLED)


@dataclass(frozen=True)
class DecisionOutcome:
    """What a decision did.

    ``settled``: the request was decided (False: a quorum vote was counted and more are needed).
    ``duplicate``: the same channel delivery was recorded before; nothing new happened.
    ``run_status``: the run's status right after (``ready`` means it resumes next).
    """

    decision: Decision
    request: SteeringRequest | None
    settled: bool
    run_status: RunStatus
    next_node: str | None = None
    duplicate: bool = False

    @property
    def run_id(self) -> str:
        return self.decision.run_id


def format_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err.get("loc", ())) or "value"
        parts.append(f"{loc}: {err.get('msg')}")
    return "; ".join(parts)


def when(ts: datetime | None) -> str:
    return ts.strftime("%Y-%m-%d %H:%M UTC") if ts else "earlier"


class Steering:
    """Records decisions, rewinds, retries and cancellations.

    Args:
        on_ready: called with a run id after a commit that made the run ``ready`` (wake a worker).
        on_outbox: called after a commit that wrote outbox rows (wake the deliverer).
    """

    def __init__(self, store: Store, registry: Registry, *, clock: Callable[[], datetime],
                 on_ready: Callable[[str], None], on_outbox: Callable[[], None]) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.on_ready = on_ready
        self.on_outbox = on_outbox

    # -- reading --------------------------------------------------------------------------------------------

    def _run(self, tx: Tx, run_id: str) -> Run:
        run = tx.runs.get(run_id)
        if run is None:
            raise RunNotFoundError(f"no run {run_id!r}")
        return run

    def _request(self, tx: Tx, run: Run, request_id: int | None, point: str | None = None) -> SteeringRequest:
        if request_id is None and point is not None:
            at_point = tx.requests.latest_at_point(run.id, point)
            if at_point is None:
                raise NoPendingRequestError(f"run {run.id} has never asked anything at {point!r}")
            request_id = at_point.id
        if request_id is None:
            request = tx.requests.pending_for_run(run.id)
            if request is None:
                last = tx.requests.latest_for_run(run.id)
                tail = ""
                if last is not None and last.decided_at is not None:
                    tail = (f" (its last request, {last.title!r}, was {PAST_TENSE.get(last.decided_action or '', 'closed')}"
                            f" by {last.decided_by or 'Hazel'} at {when(last.decided_at)})")
                raise NoPendingRequestError(
                    f"run {run.id} is {run.status.value}, not waiting on a steering request{tail}")
            return request
        request = tx.requests.get(request_id)
        if request is None or request.run_id != run.id:
            raise NoPendingRequestError(f"run {run.id} has no steering request {request_id}")
        if request.status is not RequestStatus.PENDING:
            raise self._already(tx, request)
        return request

    def request_for(self, run_id: str, *, request_id: int | None = None,
                    point: str | None = None) -> SteeringRequest:
        """The pending request a decision would apply to (see ``decide`` for ``request_id`` and ``point``).

        Raises:
            RunNotFoundError, NoPendingRequestError, AlreadyDecidedError (with who and when).
        """
        with self.store.read() as tx:
            return self._request(tx, self._run(tx, run_id), request_id, point)

    @staticmethod
    def _already(tx: Tx, request: SteeringRequest) -> AlreadyDecidedError:
        if request.status is RequestStatus.CANCELLED:
            return AlreadyDecidedError(f"this request was cancelled ({when(request.decided_at)}, "
                                       f"by {request.decided_by or 'Hazel'})", decided_by=request.decided_by,
                                       decided_at=request.decided_at, action="cancel")
        winner = None
        for d in reversed(tx.decisions.for_request(request.id)):
            if d.action.value == request.decided_action:
                winner = d
                break
        verb = PAST_TENSE.get(request.decided_action or "", "decided")
        by = request.decided_by or "someone"
        return AlreadyDecidedError(f"already {verb} by {by} at {when(request.decided_at)}",
                                   decided_by=request.decided_by, decided_at=request.decided_at,
                                   action=request.decided_action, decided_by_id=winner.actor_id if winner else None,
                                   channel=winner.channel if winner else None)

    # -- permissions -----------------------------------------------------------------------------------------

    def refuse(self, *, run_id: str | None, request_id: int | None, actor: Actor, action: str, reason: str) -> None:
        """Record a refused attempt in the audit log (its own transaction; nothing else changes)."""
        with self.store.transaction() as tx:
            tx.events.add(action="decision.refused", actor=actor, now=self.clock(), run_id=run_id,
                          request_id=request_id, attempted=action, reason=reason)

    def _check(self, point: SteeringPoint, action: str, actor: Actor, run: Run, request: SteeringRequest) -> None:
        if action not in point.actions:
            raise InvalidDecisionError(f"{action!r} is not allowed at {point.title!r} "
                                       f"(allowed: {', '.join(point.actions)})")
        try:
            permissions.check(point, action, actor, run, escalated=request.escalated_at is not None)
        except NotAllowedError as exc:
            self.refuse(run_id=run.id, request_id=request.id, actor=actor, action=action, reason=str(exc))
            raise

    # -- deciding --------------------------------------------------------------------------------------------

    @bind_log_context(run_id="run_id", request_id="request_id")
    def decide(self, run_id: str, action: str | Action, actor: Actor, *, payload: dict[str, Any] | None = None,
               request_id: int | None = None, point: str | None = None,
               delivery_id: str | None = None) -> DecisionOutcome:
        """Take ``action`` on the run's pending steering request, or on request ``request_id``, or on the run's
        latest request at steering point ``point`` (so that a decision meant for one request never lands on the
        next one: a decided request is refused with who decided and when).

        ``payload``: edit ``{"value": new value of the shown field}``; reject ``{"reason": str}``;
        feedback ``{"text": str}``; rewind ``{"to": seq or node name, "feedback": str?, "edits": {field: v}?}``.

        Raises:
            RunNotFoundError, NoPendingRequestError, NotAllowedError, InvalidDecisionError,
            AlreadyDecidedError, VersionUnavailableError.
        """
        action = Action(action).value if not isinstance(action, Action) else action.value
        payload = dict(payload or {})
        if delivery_id is not None:
            earlier = self._earlier_delivery(actor.channel, delivery_id)
            if earlier is not None:
                return earlier
        if action == Action.REWIND.value:
            return self.rewind(run_id, actor, to=payload.get("to"), feedback=payload.get("feedback"),
                               edits=payload.get("edits"), request_id=request_id, delivery_id=delivery_id)
        with self.store.read() as tx:
            run = self._run(tx, run_id)
            request = self._request(tx, run, request_id, point)
        wf, run, request = self._current(run, request)
        point = point_in(wf, request.point, run)
        self._check(point, action, actor, run, request)
        with self.store.read() as tx:
            new_state, payload = self._validate(tx, wf, point, run, request, action, payload)
        return self._record(run, request, wf, point, action, actor, payload, new_state, delivery_id)

    def _current(self, run: Run, request: SteeringRequest) -> tuple[Workflow, Run, SteeringRequest]:
        """The definition a waiting run is decided on; when its version is gone and the latest declares a
        migration from it, the run is migrated first (one transaction) and the request moved onto the
        migrated checkpoint.

        Raises:
            VersionUnavailableError: no version to continue on; nothing changes.
        """
        wf = resolve_workflow(self.registry, run)
        if wf.version == run.workflow_version:
            return wf, run, request
        point_in(wf, request.point, run)
        now = self.clock()
        with self.store.transaction() as tx:
            current = tx.runs.get(run.id, for_update=True)
            assert current is not None
            if (current.last_seq, current.workflow_version, current.status) != (
                    run.last_seq, run.workflow_version, run.status):
                raise RunStateError(f"run {run.id} changed meanwhile; try again")
            seq = write_migration(tx, run=current, target=wf, parent_seq=request.checkpoint_seq, now=now)
            tx.runs.transition(run.id, from_statuses=[run.status], now=now, head_seq=seq, last_seq=seq,
                               workflow_version=wf.version)
            tx.requests.repoint(request.id, seq)
            run = self._run(tx, run.id)
            moved = tx.requests.get(request.id)
        assert moved is not None
        return wf, run, moved

    def _earlier_delivery(self, channel: str, delivery_id: str) -> DecisionOutcome | None:
        with self.store.read() as tx:
            earlier = tx.decisions.by_delivery(channel, delivery_id)
            if earlier is None:
                return None
            run = tx.runs.get(earlier.run_id)
            request = tx.requests.get(earlier.request_id) if earlier.request_id else None
        return DecisionOutcome(decision=earlier, request=request, settled=request is None or
                               request.status is not RequestStatus.PENDING,
                               run_status=run.status if run else RunStatus.CANCELLED, duplicate=True)

    def _validate(self, tx: Tx, wf: Workflow, point: SteeringPoint, run: Run, request: SteeringRequest,
                  action: str, payload: dict[str, Any]) -> tuple[BaseModel | None, dict[str, Any]]:
        if action == Action.REJECT.value:
            reason = str(payload.get("reason") or "").strip()
            if not reason:
                raise InvalidDecisionError("a rejection needs a reason")
            return None, {"reason": reason}
        if action == Action.FEEDBACK.value:
            text = str(payload.get("text") or "").strip()
            if not text:
                raise InvalidDecisionError("feedback needs some text")
            return None, {"text": text}
        if action == Action.EDIT.value:
            if "value" not in payload:
                raise InvalidDecisionError("an edit needs the new value of the shown field")
            head = tx.checkpoints.load(run.id, request.checkpoint_seq)
            assert head is not None
            state = wf.codec.decode(head.tree)
            return apply_edit(wf, state, point.show, payload["value"]), {"value": payload["value"]}
        return None, {}

    def _record(self, run: Run, request: SteeringRequest, wf: Workflow, point: SteeringPoint, action: str,
                actor: Actor, payload: dict[str, Any], new_state: BaseModel | None,
                delivery_id: str | None) -> DecisionOutcome:
        now = self.clock()
        try:
            with self.store.transaction() as tx:
                # The request row is locked first: every decision on it queues here, in one order.
                # A timeout's approval settles the request whatever its quorum (bot.ops.timers).
                if action == Action.APPROVE.value and actor.channel != "timeout":
                    after = tx.requests.vote(request.id, now=now, actor=actor.label)
                else:
                    after = tx.requests.settle(request.id, now=now, actor=actor.label, action=action)
                if after is None:
                    raise self._already(tx, tx.requests.get(request.id))
                decision_id = tx.decisions.insert(run_id=run.id, request_id=request.id, action=Action(action),
                                                  actor_id=actor.id, actor_name=actor.name, channel=actor.channel,
                                                  payload=payload, now=now, delivery_id=delivery_id)
                tx.events.add(action=f"decision.{action}", actor=actor, now=now, run_id=run.id,
                              request_id=request.id, point=point.name, **_audit_detail(action, payload, after))
                hooks.emit(tx, "run.decided", run_id=run.id, now=now, request=after, decision_id=decision_id,
                           action=action, actor=hooks.actor_facts(actor),
                           settled=after.status is RequestStatus.DECIDED, payload=payload)
                settled = after.status is RequestStatus.DECIDED
                next_node, status = None, RunStatus.WAITING
                if settled:  # the request's own update is queued before any "run ended" progress
                    tx.outbox.add(channel=request.channel, kind="request.closed", now=now, run_id=run.id,
                                  request_id=request.id, payload={"decision_id": decision_id})
                    next_node, status = self._apply(tx, run, request, wf, point, action, actor, payload, new_state,
                                                    decision_id, now)
                    if status is RunStatus.READY:
                        tx.notify_ready(run.id)
                elif action == Action.APPROVE.value:
                    tx.outbox.add(channel=request.channel, kind="request.vote", now=now, run_id=run.id,
                                  request_id=request.id, payload={"decision_id": decision_id})
                decision = tx.decisions.get(decision_id)
        except DuplicateDecisionError as exc:
            if exc.by_delivery and delivery_id is not None:
                earlier = self._earlier_delivery(actor.channel, delivery_id)
                if earlier is not None:
                    return earlier
            with self.store.read() as tx:
                mine = tx.decisions.by_actor(request.id, actor.channel, actor.id)
                current = tx.requests.get(request.id)
                if current is not None and current.status is not RequestStatus.PENDING:
                    raise self._already(tx, current) from None
            raise AlreadyDecidedError(
                f"you already {PAST_TENSE.get(mine.action.value, 'decided') if mine else 'decided'} this request at "
                f"{when(mine.created_at if mine else None)}"
                + (f"; {current.approvals} of {current.approvals_required} approvals so far" if current else ""),
                decided_by=actor.label, decided_at=mine.created_at if mine else None,
                action=mine.action.value if mine else None, decided_by_id=actor.id, channel=actor.channel,
            ) from None
        self.on_outbox()
        if status is RunStatus.READY:
            self.on_ready(run.id)
        assert decision is not None
        return DecisionOutcome(decision=decision, request=after, settled=settled, run_status=status,
                               next_node=next_node)

    def _apply(self, tx: Tx, run: Run, request: SteeringRequest, wf: Workflow, point: SteeringPoint, action: str,
               actor: Actor, payload: dict[str, Any], new_state: BaseModel | None, decision_id: int,
               now: datetime) -> tuple[str | None, RunStatus]:
        """Write the checkpoint that applies a settling decision and move the run on. Returns
        ``(next node, run status)``."""
        handoff: dict[str, Any] | None = None
        if action in (Action.APPROVE.value, Action.EDIT.value):
            next_node = wf.next_of(point.name)
            if action == Action.EDIT.value and point.approvals_required > 1:
                next_node = point.name  # with a quorum, the edited version is asked again
        elif action == Action.REJECT.value:
            next_node = point.on_reject
            handoff = {"rejection": payload["reason"], "by": actor.label}
        else:
            next_node = wf.feedback_target(point)
            handoff = {"feedback": payload["text"], "by": actor.label}
        status = RunStatus.READY if next_node else (
            RunStatus.REJECTED if action == Action.REJECT.value else RunStatus.COMPLETED)
        head = tx.checkpoints.load(run.id, request.checkpoint_seq)
        assert head is not None
        tree = wf.codec.encode(new_state) if new_state is not None else head.tree
        seq = self._next_seq(tx, run.id)
        moved = tx.runs.transition(run.id, from_statuses=[RunStatus.WAITING], now=now, head_seq=seq,
                                   last_seq=seq, status=status, attempt=0, wake_at=None)
        if not moved:
            raise RunStateError(f"run {run.id} is no longer waiting")
        tx.checkpoints.write(NewCheckpoint(
            run_id=run.id, seq=seq, parent_seq=request.checkpoint_seq, branch=head.info.branch, step=point.name,
            next_step=next_node, workflow_version=wf.version, created_at=now, decision_id=decision_id,
            handoff=handoff), tree, tx.checkpoints.position(head))
        if status is not RunStatus.READY:
            progress(tx, run_id=run.id, now=now, event=status.value, by=actor.label,
                     reason=payload.get("reason"))
        return next_node, status

    @staticmethod
    def _next_seq(tx: Tx, run_id: str) -> int:
        run = tx.runs.get(run_id, for_update=True)
        assert run is not None
        return run.last_seq + 1

    # -- rewind ------------------------------------------------------------------------------------------------

    @bind_log_context(run_id="run_id", request_id="request_id")
    def rewind(self, run_id: str, actor: Actor, *, to: int | str | None, feedback: str | None = None,
               edits: dict[str, Any] | None = None, request_id: int | None = None,
               delivery_id: str | None = None) -> DecisionOutcome:
        """Fork the run from an earlier checkpoint: ``to`` is a sequence number, or a node name (the latest
        checkpoint on the current branch from which that node runs next). The abandoned branch stays in the
        history; the pending request (if any) is settled as rewound; ``feedback`` goes to the node that runs
        next (to the steering point's feedback step when the target waits at one); ``edits`` replace state
        fields. One transaction.

        Raises:
            RunNotFoundError, CheckpointNotFoundError, NotAllowedError, InvalidDecisionError,
            AlreadyDecidedError, RunStateError.
        """
        feedback = (feedback or "").strip() or None
        with self.store.read() as tx:
            run = self._run(tx, run_id)
            if run.status not in REWINDABLE:
                raise RunStateError(f"run {run.id} is {run.status.value} (executing a step): rewind when it stops")
            wf = resolve_workflow(self.registry, run)
            request = tx.requests.pending_for_run(run.id) if run.status is RunStatus.WAITING else None
            if request_id is not None and (request is None or request.id != request_id):
                stale = tx.requests.get(request_id)
                if stale is not None and stale.status is not RequestStatus.PENDING:
                    raise self._already(tx, stale)
            self._check_rewind(wf, run, request, actor)
            target = self._target(tx, run, to)
            loaded = tx.checkpoints.load(run.id, target.seq)
            assert loaded is not None
            tree = loaded.tree
            if target.workflow_version != wf.version:
                if target.workflow_version not in wf.migrations:
                    raise VersionUnavailableError(
                        f"checkpoint #{target.seq} of run {run.id} holds v{target.workflow_version} state and "
                        f"{wf.label} declares no migration from it")
                tree = migrate_tree(wf, target.workflow_version, tree, run_id=run.id)
            state = wf.codec.decode(tree)
            if edits:
                state = apply_edits(wf, state, edits)
        next_node, handoff = target.next_step, None
        if feedback:
            handoff = {"feedback": feedback, "by": actor.label}
            node = wf.nodes.get(next_node) if next_node else None
            if isinstance(node, SteeringPoint):
                next_node = wf.feedback_target(node) or next_node
        payload = {"to": target.seq, "feedback": feedback, "edits": edits or None}
        now = self.clock()
        try:
            with self.store.transaction() as tx:
                after = None
                if request is not None:  # lock the request first, as every decision does
                    after = tx.requests.settle(request.id, now=now, actor=actor.label, action=Action.REWIND.value)
                    if after is None:
                        raise self._already(tx, tx.requests.get(request.id))
                decision_id = tx.decisions.insert(run_id=run.id, request_id=request.id if request else None,
                                                  action=Action.REWIND, actor_id=actor.id, actor_name=actor.name,
                                                  channel=actor.channel, payload=payload, now=now,
                                                  delivery_id=delivery_id)
                if request is not None:
                    tx.outbox.add(channel=request.channel, kind="request.closed", now=now, run_id=run.id,
                                  request_id=request.id, payload={"decision_id": decision_id})
                current = tx.runs.get(run.id, for_update=True)
                assert current is not None
                seq, branch = current.last_seq + 1, current.last_branch + 1
                if current.last_seq != run.last_seq or not tx.runs.transition(
                        run.id, from_statuses=[run.status], now=now, head_seq=seq, last_seq=seq, branch=branch,
                        last_branch=branch, status=RunStatus.READY, attempt=0, wake_at=None, error=None,
                        error_traceback=None, workflow_version=wf.version):
                    raise RunStateError(f"run {run.id} changed while rewinding (now {current.status.value}); "
                                        "look at `hazel history` and try again")
                tx.checkpoints.write(NewCheckpoint(
                    run_id=run.id, seq=seq, parent_seq=target.seq, branch=branch, step=REWIND_NODE,
                    next_step=next_node, workflow_version=wf.version, created_at=now, decision_id=decision_id,
                    handoff=handoff), wf.codec.encode(state), None)  # a snapshot: the new branch's loads
                # start here instead of replaying the old chain (a rewind is rare; its loads are not)
                tx.notify_ready(run.id)
                tx.events.add(action="decision.rewind", actor=actor, now=now, run_id=run.id,
                              request_id=request.id if request else None, to_seq=target.seq,
                              continues_at=next_node,
                              feedback=feedback, edited_fields=sorted(edits) if edits else None)
                hooks.emit(tx, "run.decided", run_id=run.id, now=now, request=after, decision_id=decision_id,
                           action=Action.REWIND.value, actor=hooks.actor_facts(actor), settled=True, payload=payload)
                decision = tx.decisions.get(decision_id)
        except DuplicateDecisionError:
            earlier = self._earlier_delivery(actor.channel, delivery_id) if delivery_id else None
            if earlier is not None:
                return earlier
            with self.store.read() as tx:
                raise self._already(tx, tx.requests.get(request.id)) from None  # type: ignore[union-attr]
        self.on_outbox()
        self.on_ready(run.id)
        assert decision is not None
        return DecisionOutcome(decision=decision, request=after, settled=True, run_status=RunStatus.READY,
                               next_node=next_node)

    def _check_rewind(self, wf: Workflow, run: Run, request: SteeringRequest | None, actor: Actor) -> None:
        if request is not None:
            self._check(point_in(wf, request.point, run), Action.REWIND.value, actor, run, request)
            return
        points = [p for p in wf.steering_points() if Action.REWIND.value in p.actions]
        for point in points:
            try:
                permissions.check(point, Action.REWIND.value, actor, run)
                return
            except NotAllowedError:
                continue
        if actor.channel in ("console", "system") and not points:
            return
        reason = f"{actor.label} may not rewind run {run.id}: no steering point of {wf.label} lets them"
        self.refuse(run_id=run.id, request_id=None, actor=actor, action="rewind", reason=reason)
        raise NotAllowedError(reason)

    @staticmethod
    def _target(tx: Tx, run: Run, to: int | str | None):  # noqa: ANN205
        if to is None or (isinstance(to, str) and not to.strip()):
            raise InvalidDecisionError("rewind needs a target: a checkpoint number or a step name")
        if isinstance(to, int) or (isinstance(to, str) and to.strip().lstrip("#").isdigit()):
            seq = int(str(to).strip().lstrip("#"))
            cp = tx.checkpoints.info(run.id, seq)  # one row: a numbered target never reads the whole history
            if cp is not None:
                return cp
            if 0 <= seq <= run.last_seq:  # it existed: its history was pruned
                kept = ", ".join(f"#{c.seq}" for c in tx.checkpoints.list(run.id, newest=5))
                raise CheckpointNotFoundError(f"checkpoint #{seq} of run {run.id} was pruned (kept: {kept})")
            raise CheckpointNotFoundError(f"run {run.id} has no checkpoint #{seq} (it has #0..#{run.last_seq})")
        history = tx.checkpoints.list(run.id)
        by_seq = {cp.seq: cp for cp in history}
        lineage, cursor = [], by_seq.get(run.head_seq)
        while cursor is not None:
            lineage.append(cursor)
            cursor = by_seq.get(cursor.parent_seq) if cursor.parent_seq is not None else None
        for cp in lineage + list(reversed(history)):
            if cp.next_step == to:
                return cp
        steps = sorted({cp.next_step for cp in history if cp.next_step})
        if len(history) < run.last_seq + 1:
            raise CheckpointNotFoundError(
                f"no kept checkpoint of run {run.id} runs {to!r} next: its history was pruned (kept: "
                + ", ".join(f"#{c.seq}" for c in history[-5:]) + "); rewind to a kept checkpoint by number")
        raise CheckpointNotFoundError(f"run {run.id} never reached {to!r} (known: {', '.join(steps)})")

    # -- run-level actions ------------------------------------------------------------------------------------

    @bind_log_context(run_id="run_id")
    def retry(self, run_id: str, actor: Actor) -> Run:
        """Queue a ``failed`` run again from its last good checkpoint (attempts start over). A run that is
        already ``ready`` is returned as it is.

        Raises:
            RunNotFoundError, RunStateError (not failed), NotAllowedError.
        """
        run = self._check_run_action(run_id, actor, "retry")
        if run.status is RunStatus.READY:
            return run
        now = self.clock()
        with self.store.transaction() as tx:
            if not tx.runs.transition(run.id, from_statuses=[RunStatus.FAILED], now=now, status=RunStatus.READY,
                                      attempt=0, wake_at=None):
                current = self._run(tx, run_id)
                raise RunStateError(f"run {run.id} is {current.status.value}; only failed runs can be retried")
            tx.events.add(action="run.retried", actor=actor, now=now, run_id=run.id, from_seq=run.head_seq)
            tx.notify_ready(run.id)
            after = self._run(tx, run_id)
        self.on_ready(run_id)
        return after

    @bind_log_context(run_id="run_id")
    def cancel(self, run_id: str, actor: Actor, *, reason: str | None = None) -> Run:
        """Cancel a run that has not ended; its pending request is closed. A step executing now finishes,
        but its result is discarded (the worker's fenced write fails).

        Raises:
            RunNotFoundError, RunStateError (already ended), NotAllowedError.
        """
        run = self._check_run_action(run_id, actor, "cancel")
        now = self.clock()
        with self.store.transaction() as tx:
            if not tx.runs.transition(run.id, from_statuses=[RunStatus.READY, RunStatus.RUNNING, RunStatus.WAITING,
                                                             RunStatus.FAILED],
                                      now=now, status=RunStatus.CANCELLED, lease_owner=None, lease_token=None,
                                      lease_expires_at=None, wake_at=None):
                current = self._run(tx, run_id)
                raise RunStateError(f"run {run.id} is {current.status.value}; nothing to cancel")
            request = tx.requests.pending_for_run(run.id)
            if request is not None:
                tx.requests.settle(request.id, now=now, actor=actor.label, action="cancel",
                                   status=RequestStatus.CANCELLED)
                tx.outbox.add(channel=request.channel, kind="request.closed", now=now, run_id=run.id,
                              request_id=request.id, payload={"cancelled": True})
            tx.events.add(action="run.cancelled", actor=actor, now=now, run_id=run.id, reason=reason)
            progress(tx, run_id=run.id, now=now, event="cancelled", by=actor.label, reason=reason)
            after = self._run(tx, run_id)
        self.on_outbox()
        return after

    def _check_run_action(self, run_id: str, actor: Actor, verb: str) -> Run:
        """Retry and cancel may be done by the person who started the run, the console operator, or an
        approver of the pending request's point (of any point when nothing is pending).

        Raises:
            RunNotFoundError, NotAllowedError (recorded in the audit log).
        """
        with self.store.read() as tx:
            run = self._run(tx, run_id)
            if actor.channel in ("console", "system") or (run.started_by == actor.id
                                                         and run.started_via == actor.channel):
                return run
            wf = self.registry.find(run.workflow, run.workflow_version)
            request = tx.requests.pending_for_run(run.id)
        if wf is not None:
            points = [wf.point(request.point)] if request is not None else wf.steering_points()
            if any(permissions.is_approver(p.approvers, actor) for p in points):
                return run
        reason = f"{actor.label} may not {verb} run {run.id}: only who started it or its approvers may"
        self.refuse(run_id=run.id, request_id=request.id if request else None, actor=actor, action=verb,
                    reason=reason)
        raise NotAllowedError(reason)


def apply_edit(wf: Workflow, state: BaseModel, field: str | None, value: Any) -> BaseModel:
    """The state with ``field`` (None: the whole state) replaced by ``value``, validated.

    Raises:
        InvalidDecisionError: the new value fails the state model's validation (message from pydantic).
    """
    if field is None:
        data = value
    else:
        data = {**state.model_dump(), field: value}
    try:
        return wf.codec.validate(data)
    except ValidationError as exc:
        raise InvalidDecisionError(f"invalid edit: {format_validation_error(exc)}") from None


def apply_edits(wf: Workflow, state: BaseModel, edits: dict[str, Any]) -> BaseModel:
    unknown = [k for k in edits if k not in wf.state.model_fields]
    if unknown:
        raise InvalidDecisionError(f"invalid edit: {wf.state.__name__} has no field {', '.join(unknown)}")
    try:
        return wf.codec.validate({**state.model_dump(), **edits})
    except ValidationError as exc:
        raise InvalidDecisionError(f"invalid edit: {format_validation_error(exc)}") from None


def _audit_detail(action: str, payload: dict[str, Any], request: SteeringRequest) -> dict[str, Any]:
    detail: dict[str, Any] = {}
    if action == Action.REJECT.value:
        detail["reason"] = payload["reason"]
    elif action == Action.FEEDBACK.value:
        detail["text"] = payload["text"]
    elif action == Action.EDIT.value:
        detail["edited"] = True
    if request.approvals_required > 1:
        detail["approvals"] = f"{request.approvals}/{request.approvals_required}"
    return detail
