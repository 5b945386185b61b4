"""Deciding a steering request: approve, edit, reject, feedback (a rewind is ``bot.engine.steering.rewind``).

A decision is ONE transaction: the run (locked on PostgreSQL) and its pending request are read, the workflow
version resolved (a run whose version is gone is migrated first, in the same transaction), the person's
permission checked (a refusal is audited in its own transaction and nothing else changes), the payload
validated (an invalid edit changes nothing), then the request is settled by a conditional UPDATE (or a quorum
vote counted), the decision recorded (unique per person per request, and per channel delivery id), the
checkpoint that applies it written (the edited state, or the SME's words handed to the next step) and the run
moved on: leased to this process when it executes here (the next step then starts at once from the state in
hand), else made ``ready`` for any worker. The database settles every race: of two decisions only one settles
a request, and the loser is told who decided and when. Whether the person may act is checked before whether
the request was settled: a person who may not take the action there is refused as such (``NotAllowedError``,
audited) whether the request waits or was settled (``SteeringCore._settled``).

On PostgreSQL, a decision taken by the process that paused the run (``hazel serve`` with its workers, an
application embedding Hazel) reads nothing: that process kept the run, the request and the checkpoint as its
pause committed them, with an id for the decision (``store.heads``), and the decision's first statement locks
the run, failing unless it is still as kept (``RunRepo.lock_as_known``); its vote or settlement checks the
request. Its statements and COMMIT go in one round trip. When anything is not as kept (another process
decided, rewound or cancelled; the request was escalated and only its backup approvers may decide), nothing is
written and the decision is taken again from the database, as any other.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Callable

from bot.engine import lgraph, permissions
from bot.engine.errors import (
    AlreadyDecidedError,
    HazelError,
    InvalidDecisionError,
    NoPendingRequestError,
    RunStateError,
    no_run,
    quoted,
)
from bot.engine.limits import check_text, refuse_not_text, refuse_unstorable, state_tree
from bot.engine.logcontext import bind_log_context
from bot.engine.steering.core import DecisionOutcome, Refused, SteeringCore
from bot.engine.steering.edits import UNDECLARED, blank, edited_state
from bot.engine.transitions import Asked, close_request, end_run, vote_request_later
from bot.engine.versions import decode_stored, point_in, resolve_workflow, write_migration
from bot.engine.workflow import SteeringPoint, Workflow
from store import ChangedMeanwhileError, DuplicateDecisionError, NewCheckpoint, Tx
from store.hooks import actor_facts
from store.models import (
    Action,
    Actor,
    Decision,
    LoadedCheckpoint,
    RequestStatus,
    Run,
    RunStatus,
    SteeringRequest,
)


_SENT = {Action.FEEDBACK.value: "the feedback", Action.REJECT.value: "the reason", Action.EDIT.value: "the edit"}
"""What a refusal of a decision's text names, by action (``the feedback holds a NUL character …``)."""


class _Stale(Exception):
    """What this process kept of a run from its pause (``Deciding._known``) is no longer so, or was not enough to
    decide on: nothing was written, and the decision is taken again from the database."""


_Known = tuple[Run, SteeringRequest, LoadedCheckpoint, int]
"""A waiting run as this process paused it: the run, its pending request, the checkpoint that request waits at,
and an id for the decision (``store.heads.HeadCache.take_waiting``)."""


class Deciding(SteeringCore):
    """``decide``: see the module docstring."""

    @bind_log_context(run_id="run_id", request_id="request_id")
    def decide(self, run_id: str, action: str | Action, actor: Actor, *, payload: dict[str, Any] | None = None,
               request_id: int | None = None, point: str | None = None, delivery_id: str | None = None,
               claim: bool = False) -> DecisionOutcome:
        """Take ``action`` on the run's pending steering request, or on request ``request_id``, or on the run's
        latest request at steering point ``point`` (so that a decision meant for one request never lands on the
        next one: a settled request is refused with who decided and when, to a person who may take ``action``
        there; a person who may not is refused as not allowed, as on a pending request). ``claim``: lease the
        run for the caller, who continues it (``DecisionOutcome.claim``).

        ``payload``: edit ``{"value": v}`` / ``{"text": str}`` / ``{"entries": {key: str}}`` (see
        ``bot.engine.steering.edits``); reject ``{"reason": str}``; feedback ``{"text": str}``; rewind
        ``{"to": seq or node name, "feedback": str?, "edits": {field: v}?, "allow_empty": bool?}``.

        Raises:
            RunNotFoundError, NoPendingRequestError, NotAllowedError, InvalidDecisionError (also a NUL
            character or a number that is not finite anywhere in the payload:
            ``bot.engine.limits.refuse_unstorable``), AlreadyDecidedError,
            VersionUnavailableError, RunStateError.
        """
        try:
            action = Action(action).value
        except ValueError:
            raise InvalidDecisionError(f"unknown action {quoted(action)} (one of: "
                                       f"{', '.join(a.value for a in Action)})") from None
        payload = dict(payload or {})
        if delivery_id is not None:
            earlier = self._earlier_delivery(actor.channel, delivery_id)
            if earlier is not None:
                return earlier
        if action == Action.REWIND.value:
            return self.rewind(run_id, actor, to=payload.get("to"), feedback=payload.get("feedback"),
                               edits=payload.get("edits"), request_id=request_id, delivery_id=delivery_id,
                               claim=claim, allow_empty=payload.get("allow_empty") is True)
        known = self._known(run_id, request_id, point)
        try:
            try:
                with self.store.transaction() as tx:
                    outcome = self._decide(tx, run_id, action, actor, payload, request_id, point, delivery_id,
                                           claim, known)
            except _Stale:  # what this process kept of the run no longer holds: read it
                with self.store.transaction() as tx:
                    outcome = self._decide(tx, run_id, action, actor, payload, request_id, point, delivery_id,
                                           claim)
        except Refused as refused:
            raise self.not_allowed(refused, actor=actor, action=action) from None
        except AlreadyDecidedError as error:  # (the transaction rolled back; the refusal is audited on its own)
            earlier = self._raced_delivery(actor, delivery_id)
            if earlier is not None:
                return earlier
            self.refuse_decided(run_id=run_id, actor=actor, action=action, error=error)
            raise
        except (NoPendingRequestError, RunStateError):
            earlier = self._raced_delivery(actor, delivery_id)
            if earlier is not None:
                return earlier
            raise
        except DuplicateDecisionError as exc:
            return self._duplicate(exc, run_id, action, actor, request_id, point, delivery_id)
        if not outcome.resumes:
            self.on_outbox()
            return outcome
        return replace(outcome, claim=self._resumed(run_id, outcome.claim, wanted=claim))

    def _decide(self, tx: Tx, run_id: str, action: str, actor: Actor, payload: dict[str, Any],
                request_id: int | None, point_name: str | None, delivery_id: str | None,
                claim: bool, known: _Known | None = None) -> DecisionOutcome:
        """The decision in ``tx``: read, checked, written (see the module docstring). ``known``: what this
        process kept of the run from its pause (``_known``): nothing is read, the writes check it.

        Raises:
            _Stale: ``known`` was given and the run or its request is not as kept (nothing written).
        """
        if known is None:
            run, request, head, decision_id = self._read(tx, run_id, request_id, point_name, actor, action)
            if run.status.ended:  # (a request left pending on an ended run must not bring it back)
                raise RunStateError(f"run {run.id} is {run.status.value}; nothing to decide",
                                    hint=f"hazel show {run.id}")
            wf, run, request = self._current(tx, run, request)
            if head is None or head.info.seq != request.checkpoint_seq:
                head = tx.checkpoints.load(run.id, request.checkpoint_seq)
                assert head is not None, f"run {run.id} has no checkpoint #{request.checkpoint_seq}"
            try:
                finish = self._send(tx, wf, run, request, head, action, actor, payload, point_name, decision_id,
                                    delivery_id, claim)
            except ChangedMeanwhileError:  # (cannot happen while every writer of a request locks its run first)
                raise self._changed(run, request) from None
            return finish()
        run, request, head, decision_id = known
        try:  # decided on what was kept: the database says whether it still holds, else it is read
            wf = resolve_workflow(self.registry, run)
            if wf.version != run.workflow_version or isinstance(wf, lgraph.LangGraphWorkflow):
                raise _Stale
            finish = self._send(tx, wf, run, request, head, action, actor, payload, point_name, decision_id,
                                delivery_id, claim, as_kept=True)
        except (Refused, HazelError, ChangedMeanwhileError):
            raise _Stale from None
        return finish()  # (committed: what it raises is the decision's answer)

    def _send(self, tx: Tx, wf: Workflow, run: Run, request: SteeringRequest, head: LoadedCheckpoint, action: str,
              actor: Actor, payload: dict[str, Any], point_name: str | None, decision_id: int | None,
              delivery_id: str | None, claim: bool, *, as_kept: bool = False) -> Callable[[], DecisionOutcome]:
        """Check the decision (``_checked``) and send its writes (``_write``), committed with them on
        PostgreSQL; returns what gives the outcome once they are answered. ``as_kept``: ``run`` and ``request``
        are as this process kept them (``_known``): the run is locked first and checked as kept.

        Raises:
            Refused, InvalidDecisionError, AlreadyDecidedError, ChangedMeanwhileError (a guarded write changed
            no row: nothing written), DuplicateDecisionError.
        """
        point, new_tree, payload = self._checked(tx, wf, run, request, head, action, actor, payload, point_name)
        # PostgreSQL: the writes and the COMMIT in one round trip, the vote and the run's move checked by the
        # database (a graph's decision reads its siblings' requests: committed when the transaction ends)
        locked = None
        with tx.pipeline(commit=not isinstance(wf, lgraph.LangGraphWorkflow)):
            if as_kept:  # first, as every decision locks the run first: still as kept, or fail
                locked = tx.runs.lock_as_known(run)
            finish = self._write(tx, wf, point, run, request, head, action, actor, payload, new_tree,
                                 decision_id, delivery_id, claim, as_kept=as_kept)
        if locked is None:
            return finish

        def outcome() -> DecisionOutcome:
            locked.get()  # (committed: it locked the run as kept; its answer read, its cursor closed)
            return finish()
        return outcome

    def _checked(self, tx: Tx, wf: Workflow, run: Run, request: SteeringRequest, head: LoadedCheckpoint,
                 action: str, actor: Actor, payload: dict[str, Any],
                 point_name: str | None) -> tuple[SteeringPoint, Any, dict[str, Any]]:
        """May ``actor`` take ``action`` on ``request``, and is ``payload`` valid: ``(its steering point, the new
        state tree or None, the payload as recorded)``.

        Raises:
            InvalidDecisionError, Refused, DuplicateDecisionError (a vote of this person already counted).
        """
        point = point_in(wf, request.point, run, tree=head.tree)
        if action not in point.actions:
            raise InvalidDecisionError(permissions.not_offered(action, point.title, point.actions)
                                       + self._allowed_elsewhere(tx, wf, run, request, action, point_name))
        reason = permissions.refusal(point, action, actor, run, self.people,
                                     escalated=request.escalated_at is not None)
        if reason is not None:
            raise Refused(reason, run.id, request.id)
        # who, may they, then what they sent: a person not allowed is told so (403), whatever the payload holds;
        # a person whose vote a quorum already counted is told so (409, ``_duplicate``), whatever they send now
        if request.approvals and tx.decisions.by_person(request.id, actor.who) is not None:
            raise DuplicateDecisionError("one person has one vote", by_delivery=False)
        what = _SENT.get(action, "the decision")  # (the noun the other checks of that text use: s20 L4)
        refuse_unstorable(payload, what=what, refuse=InvalidDecisionError)  # (NUL, NaN: no database stores them)
        sent = payload
        new_tree, payload = self._validate(wf, point, head.tree, action, payload)
        refuse_not_text(sent, what=what, refuse=InvalidDecisionError)  # a key (a value: named above)
        return point, new_tree, payload

    def _known(self, run_id: str, request_id: int | None, point_name: str | None) -> _Known | None:
        """What this process kept of ``run_id`` when it paused it (``store.heads.HeadCache.take_waiting``: the
        run, its request, the checkpoint it waits at, an id for the decision), when the decision is aimed at
        that request; None otherwise (then they are read)."""
        kept = self.store.heads.take_waiting(run_id)
        if kept is None:
            return None
        request = kept[1]
        if (request_id is not None and request_id != request.id) or (
                point_name is not None and point_name != request.point):
            return None
        return kept

    def _changed(self, run: Run, request: SteeringRequest) -> Exception:
        """What a decision whose guarded writes found the run or its request changed behind its lock answers
        (nothing was written): who settled the request meanwhile, read anew (its transaction failed), else that
        the run moved."""
        with self.store.read() as tx:
            now = tx.requests.get(request.id)
            if now is not None and now.status is not RequestStatus.PENDING:
                return self._already(tx, now)
        return RunStateError(f"run {run.id} changed meanwhile; look at it again and try again",
                             hint=f"hazel show {run.id}")

    @staticmethod
    def _allowed_elsewhere(tx: Tx, wf: Workflow, run: Run, request: SteeringRequest, action: str,
                           named: str | None) -> str:
        """When the run waits on other requests too (a LangGraph super-step's) and ``action`` was not aimed at
        a point (``--at``): ``; run R also waits at 'legal', where it is allowed: --at legal``; else ``""``."""
        if named is not None:
            return ""
        for other, there in lgraph.sibling_points(tx, wf, request):
            if action in there.actions:
                return f"; run {run.id} also waits at {other.point!r}, where it is allowed: --at {other.point}"
        return ""

    def _read(self, tx: Tx, run_id: str, request_id: int | None, point_name: str | None, actor: Actor,
              action: str) -> tuple[Run, SteeringRequest, LoadedCheckpoint | None, int | None]:
        """The run (locked on PostgreSQL), its request, the head checkpoint when the request is the run's
        pending one, and an id for the decision (PostgreSQL, read with the run): on PostgreSQL one round trip
        for the four. The checkpoint is not read when this process committed it and still holds it
        (``store.heads``: the run paused here); None when the caller must load it (another request's, or not
        held after all). A request that is settled answers ``actor``'s ``action`` as ``SteeringCore._settled``
        does: whether they may first, then who settled it.

        Raises:
            RunNotFoundError, NoPendingRequestError, AlreadyDecidedError, Refused, InvalidDecisionError,
            VersionUnavailableError.
        """
        pending = head = None
        held = self.store.heads.held(run_id)
        with tx.pipeline():
            run_later = tx.runs.get_for_decision_later(run_id)  # (with an id for the decision: PostgreSQL)
            if request_id is None and point_name is None:  # the common case: the run's pending request
                pending = tx.requests.pending_for_run_later(run_id)
                if held is None:
                    head = tx.checkpoints.load_later(run_id, None)
        run, next_id = run_later.get()
        if run is None:
            raise no_run(run_id)
        request = pending.get() if pending is not None else None
        if request is None:
            request = self._request(tx, run, request_id, point_name, actor=actor, action=action)
        if held is not None:
            return run, request, self.store.heads.get(run_id, request.checkpoint_seq), next_id
        return run, request, head.get() if head is not None else None, next_id

    def _write(self, tx: Tx, wf: Workflow, point: SteeringPoint, run: Run, request: SteeringRequest,
               head: LoadedCheckpoint, action: str, actor: Actor, payload: dict[str, Any], new_tree: Any,
               decision_id: int | None, delivery_id: str | None, claim: bool,
               as_kept: bool = False) -> Callable[[], DecisionOutcome]:
        """Settle the request (or count the vote), record the decision and move the run on; returns what
        gives the outcome once the statements have been answered (after the caller's pipeline). ``as_kept``:
        ``request`` is as this process kept it (``_known``): a settlement too is refused when a vote was
        counted since (the vote is, always), so that the id kept for the request's first decision is its first
        decision's, and its time comes after every earlier decision's.

        Raises:
            AlreadyDecidedError: the request was settled meanwhile (the returned function raises it when the
                run moved); DuplicateDecisionError.
        """
        now = self.clock()
        # The request row is locked first: every decision on it queues here, in one order. A timeout's
        # approval settles the request whatever its quorum (bot.engine.timeouts).
        answer = None
        if action == Action.APPROVE.value and actor.channel != "timeout":  # (PostgreSQL: its answer read at the end)
            after, answer = vote_request_later(tx, request, now=now, by=actor)
        else:
            after = close_request(tx, request, now=now, by=actor, action=action, as_read=as_kept)
            if after is None and as_kept:  # (read nothing more here: the decision is taken again)
                raise _Stale
            if after is None:
                raise self._already(tx, tx.requests.get(request.id) or request)
        finish = self._writes(tx, wf, point, run, request, after, head, action, actor, payload, new_tree,
                              decision_id, delivery_id, claim, now)
        if answer is None:
            return finish

        def voted() -> DecisionOutcome:
            counted = answer.get()
            if counted is None:  # (cannot happen while deciders lock the run first: rolled back if it does)
                raise self._already(tx, tx.requests.get(request.id) or request)
            if _voted(counted) != _voted(after):  # (its message's fields may have moved meanwhile: delivery)
                raise RuntimeError(f"request #{request.id}: the vote left it {_voted(counted)}, not {_voted(after)}")
            return replace(finish(), request=counted)
        return voted

    def _writes(self, tx: Tx, wf: Workflow, point: SteeringPoint, run: Run, request: SteeringRequest,
                after: SteeringRequest, head: LoadedCheckpoint, action: str, actor: Actor, payload: dict[str, Any],
                new_tree: Any, decision_id: int | None, delivery_id: str | None, claim: bool,
                now: datetime) -> Callable[[], DecisionOutcome]:
        """``_write`` once the request is settled or voted on (``after``): the decision, its audit event and
        hook, and the run moved on."""
        decision_id = tx.decisions.insert(run_id=run.id, request_id=request.id, action=Action(action), actor=actor,
                                          payload=payload, now=now, delivery_id=delivery_id,
                                          decision_id=decision_id)
        settled = after.status is RequestStatus.DECIDED
        tx.events.add(action=f"decision.{action}", actor=actor, now=now, run_id=run.id, request_id=request.id,
                      point=point.name, **_audit_detail(action, payload, after))
        tx.hooks.emit("run.decided", run_id=run.id, now=now, request=after, decision_id=decision_id, action=action,
                      actor=actor_facts(actor), settled=settled, payload=payload)
        decision = Decision(id=decision_id, run_id=run.id, request_id=request.id, action=Action(action),
                            actor_id=actor.id, actor_name=actor.name, channel=actor.channel, payload=payload,
                            created_at=now, delivery_id=delivery_id, person=actor.who, acting_for=actor.acting_for)
        if not settled:  # a vote: the request waits for more, and so do a graph's other interrupts (s32 F4)
            others = tuple(lgraph.pending_siblings(tx, wf, request))
            return lambda: DecisionOutcome(decision=decision, request=after, settled=False,
                                           run_status=RunStatus.WAITING, still_pending=others)
        if isinstance(wf, lgraph.LangGraphWorkflow):  # a graph's interrupts: resumed once all are answered
            routed = wf.route_decision(tx, run=run, request=request, tree=head.tree, action=action, actor=actor,
                                       payload=payload)
            if routed is None:  # other requests of the same super-step are pending: the run keeps waiting
                others = tuple(lgraph.pending_siblings(tx, wf, request))
                return lambda: DecisionOutcome(decision=decision, request=after, settled=True,
                                               run_status=RunStatus.WAITING, still_pending=others)
            next_node, status, handoff, new_tree = routed
        else:
            next_node, status, handoff = _route(wf, point, action, actor, payload)
        seq = run.last_seq + 1
        checkpoint = NewCheckpoint(run_id=run.id, seq=seq, parent_seq=request.checkpoint_seq,
                                   branch=head.info.branch, step=point.name, next_step=next_node,
                                   workflow_version=wf.version, created_at=now, decision_id=decision_id,
                                   handoff=handoff)
        tree = new_tree if new_tree is not None else head.tree
        if status is RunStatus.READY:
            resumed = self._resume_later(tx, run, checkpoint=checkpoint, tree=tree,
                                         parent=tx.checkpoints.position(head), claim=claim, now=now,
                                         asked=Asked(request.id, request.channel))

            def outcome() -> DecisionOutcome:
                made = resumed()
                return DecisionOutcome(decision=decision, request=after, settled=True, next_node=next_node,
                                       run_status=RunStatus.RUNNING if made else RunStatus.READY, claim=made)
            return outcome
        tx.checkpoints.write(checkpoint, tree, tx.checkpoints.position(head))
        moved = tx.runs.transition_later(run.id, from_statuses=[RunStatus.WAITING], now=now, head_seq=seq,
                                         last_seq=seq, status=status, attempt=0, wake_at=None)
        end_run(tx, run_id=run.id, status=status, now=now, by=actor, request_id=request.id,
                reason=payload.get("reason"))

        def ended() -> DecisionOutcome:
            if not moved.get():  # (the transaction rolls back what end_run queued)
                raise AlreadyDecidedError(f"run {run.id} is no longer waiting", decided_by=None, decided_at=None,
                                          action=None, request_id=request.id)
            return DecisionOutcome(decision=decision, request=after, settled=True, run_status=status,
                                   next_node=next_node)
        return ended

    def _current(self, tx: Tx, run: Run, request: SteeringRequest) -> tuple[Workflow, Run, SteeringRequest]:
        """The definition a waiting run is decided on; when its version is gone and the latest declares a
        migration from it, the run is migrated first (in this transaction) and the request moved onto the
        migrated checkpoint.

        Raises:
            VersionUnavailableError: no version to continue on; nothing changes.
        """
        wf = resolve_workflow(self.registry, run)
        if wf.version == run.workflow_version:
            return wf, run, request
        point_in(wf, request.point, run)
        now = self.clock()
        seq = write_migration(tx, run=run, target=wf, parent_seq=request.checkpoint_seq, now=now)
        tx.runs.transition(run.id, from_statuses=[run.status], now=now, head_seq=seq, last_seq=seq,
                           workflow_version=wf.version)
        tx.requests.repoint(request.id, seq)
        moved = tx.requests.get(request.id)
        assert moved is not None
        return wf, self._run(tx, run.id), moved

    def _validate(self, wf: Workflow, point: SteeringPoint, tree: Any, action: str,
                  payload: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """``(new state tree or None, the payload as recorded)``.

        Raises:
            InvalidDecisionError: a reject without reason, feedback without text, an invalid edit.
        """
        if action == Action.REJECT.value:
            reason = str(payload.get("reason") or "").strip()
            if blank(reason):  # (a text of characters that print as nothing reads as none in the history)
                raise InvalidDecisionError("a rejection needs a reason")
            return None, {"reason": check_text(reason, max_bytes=self.max_state_bytes, what="the reason",
                                               refuse=InvalidDecisionError)}
        if action == Action.FEEDBACK.value:
            text = str(payload.get("text") or "").strip()
            if blank(text):
                raise InvalidDecisionError("feedback needs some text")
            return None, {"text": check_text(text, max_bytes=self.max_state_bytes, what="the feedback",
                                             refuse=InvalidDecisionError)}
        if action == Action.EDIT.value:
            shown = tree.get(point.show) if point.show and isinstance(tree, dict) else tree
            entry_blank = wf.declared_entries().get(point.show, UNDECLARED) if point.show else UNDECLARED
            value, state = edited_state(wf, decode_stored(wf, tree), shown, point.show, payload,
                                        entry_blank=entry_blank)
            if isinstance(wf, lgraph.LangGraphWorkflow):  # refused while the request waits: recorded, the node's
                big = lgraph.int64_problem(value, where=(point.show,) if point.show else ())  # write would fail
                if big is not None:  # at every attempt (a fresh-user finding: the run failed, retry could not help)
                    raise InvalidDecisionError(f"invalid edit: {big}")
            return state_tree(wf, state, max_bytes=self.max_state_bytes, what="the edited state",
                              refuse=InvalidDecisionError, edited=tree), {"value": value}
        return None, {}

    def _duplicate(self, exc: DuplicateDecisionError, run_id: str, action: str, actor: Actor,
                   request_id: int | None, point: str | None, delivery_id: str | None) -> DecisionOutcome:
        """A unique key refused the decision: the same delivery again (its first outcome), or the same
        person deciding twice (refused, audited, naming the earlier vote), or a request someone else settled
        (refused, audited as already decided).

        Raises:
            AlreadyDecidedError: the request was settled by someone else meanwhile, or this person decided it.
        """
        if delivery_id is not None:  # whichever key refused it: a retry sent at once meets its own first vote
            earlier = self._earlier_delivery(actor.channel, delivery_id)
            if earlier is not None:
                return earlier
        with self.store.read() as tx:
            run = self._run(tx, run_id)
            request = (tx.requests.get(request_id) if request_id is not None else
                       tx.requests.latest_at_point(run.id, point) if point is not None else
                       tx.requests.latest_for_run(run.id))
            assert request is not None
            mine = tx.decisions.by_person(request.id, actor.who)
            settled = mine is None and request.status is not RequestStatus.PENDING
            error = self._already(tx, request) if settled else self._second_vote(tx, request, actor, action)
        if settled:
            self.refuse_decided(run_id=run.id, actor=actor, action=action, error=error)
            raise error from None
        self.refuse(run_id=run_id, request_id=request.id, actor=actor, action=action, reason=str(error),
                    rule="one vote per person", earlier_decision=mine.id if mine else None)
        raise error from None


def _route(wf: Workflow, point: SteeringPoint, action: str, actor: Actor,
           payload: dict[str, Any]) -> tuple[str | None, RunStatus, dict[str, Any] | None]:
    """Where a settling decision sends the run: ``(next node, run status, handoff to that node)``."""
    handoff: dict[str, Any] | None = None
    if action in (Action.APPROVE.value, Action.EDIT.value):
        next_node = wf.next_of(point.name)
        if action == Action.EDIT.value and point.approvals_required > 1:
            next_node = point.name  # with a quorum, the edited version is asked again
    elif action == Action.REJECT.value:
        next_node = point.on_reject
        handoff = {"rejection": payload["reason"], "by": actor.acting_for or actor.label}
    else:
        next_node = wf.feedback_target(point)
        handoff = {"feedback": payload["text"], "by": actor.acting_for or actor.label}
    status = RunStatus.READY if next_node else (
        RunStatus.REJECTED if action == Action.REJECT.value else RunStatus.COMPLETED)
    return next_node, status, handoff


def _voted(request: SteeringRequest) -> tuple[Any, ...]:
    """What a vote decides of a request (``RequestRepo.vote_later``'s prediction is checked on these)."""
    return (request.status, request.approvals, request.decided_at, request.decided_by, request.decided_action)


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

