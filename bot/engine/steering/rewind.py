"""Rewinding: fork a run from an earlier checkpoint (time travel). One transaction.

The rewind settles the pending request (if any) as rewound, records the decision, writes the fork's first
checkpoint (node ``__rewind__``, its parent the chosen checkpoint, stored as the change against it: nothing,
unless the rewind edits the state) on a new branch, and moves the run there: leased to this process when it
executes here, so the first step of the new branch starts from the state already in hand. The abandoned
branch stays in the history.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Callable

from bot.engine import lgraph, permissions
from bot.engine.errors import CheckpointNotFoundError, InvalidDecisionError, MissingRewindTargetError, no_run
from bot.engine.errors import AlreadyDecidedError, EmptyEditError, RunStateError, VersionUnavailableError
from bot.engine.limits import check_text, not_text, refuse_not_text, refuse_unstorable, state_tree
from bot.engine.lgraph_run import label_names
from bot.engine.logcontext import bind_log_context
from bot.engine.reads import missing_checkpoint_in
from bot.engine.steering.core import REWINDABLE, DecisionOutcome, Refused, SteeringCore, now_waits_at, when
from bot.engine.steering.edits import (apply_edits, blank, refuse_empty_edits, refuse_left_out_edits,
                                      refuse_unknown_fields)
from bot.engine.steering.rewind_edits import edits_refusal
from bot.engine.transitions import close_request
from bot.engine.versions import (decode_stored, migrate_tree, point_in, request_point, resolve_workflow,
                                 unknown_step)
from bot.engine.workflow import REWIND_NODE, SteeringPoint, Workflow
from store.models import HAZEL_NODES
from store import DuplicateDecisionError, NewCheckpoint, Tx
from store.codec import is_text
from store.hooks import actor_facts
from store.models import (Action, Actor, CheckpointInfo, Decision, LoadedCheckpoint, RequestStatus, Run,
                          RunStatus, SteeringRequest, past_tense)


class Rewinding(SteeringCore):
    """``rewind``: see the module docstring."""

    @bind_log_context(run_id="run_id", request_id="request_id")
    def rewind(self, run_id: str, actor: Actor, *, to: int | str | None, feedback: str | None = None,
               edits: dict[str, Any] | None = None, request_id: int | None = None,
               delivery_id: str | None = None, claim: bool = False, allow_empty: bool = False,
               expect_head: int | None = None, expect_decision: int | None = None) -> DecisionOutcome:
        """Fork the run from an earlier checkpoint: ``to`` is a sequence number, or a node name (the latest
        checkpoint on the current branch from which that node runs next). ``feedback`` goes to the node that
        runs next (to the steering point's feedback step when the target waits at one); without it, the node
        gets what the target hands it (a feedback or a rejection that routed the run there, as ``retry`` from
        that checkpoint gives it: ``CheckpointInfo.handoff``; a LangGraph run's words are in its state).
        ``edits`` replace state fields (an empty or blank text is refused unless ``allow_empty``, as an edit's:
        ``bot.engine.steering.edits.refuse_empty_edits``); ``claim``: lease the run for the caller
        (``DecisionOutcome.claim``). ``expect_head``: the head checkpoint the caller saw (a run page's); when
        the run's head is another one now (someone rewound it, or it ran on), nothing is written and the
        rewind is refused as a stale decision is (``AlreadyDecidedError``, audited as ``decision.refused``),
        checked in the rewind's transaction with the run locked; None: not checked. Whether ``actor`` may rewind
        is checked first: a person who may not is refused as such (``NotAllowedError``) whether the request
        named (``request_id``) waits or was settled, and whether the run moved on since ``expect_head`` or not.
        ``edits`` also need what an edit needs where they would be shown or past the approval they would pass
        (``bot.engine.steering.rewind_edits``): refused as ``NotAllowedError`` otherwise, audited, nothing
        written.

        Raises:
            RunNotFoundError, CheckpointNotFoundError, NotAllowedError, InvalidDecisionError (also a NUL
            character in the target, the feedback or the edits), AlreadyDecidedError (also: the head is not
            ``expect_head``), RunStateError, VersionUnavailableError.
        """
        feedback = None if feedback is None else feedback.strip()  # (blank: refused once they may, ``_rewind``)
        if delivery_id is not None:
            earlier = self._earlier_delivery(actor.channel, delivery_id)
            if earlier is not None:
                return earlier
        try:
            with self.store.transaction() as tx:
                outcome = self._rewind(tx, run_id, actor, to, feedback, edits, request_id, delivery_id, claim,
                                       allow_empty, expect_head, expect_decision)
        except Refused as refused:
            raise self.not_allowed(refused, actor=actor, action="rewind") from None
        except AlreadyDecidedError as error:  # (the transaction rolled back; the refusal is audited on its own)
            earlier = self._raced_delivery(actor, delivery_id)
            if earlier is not None:
                return earlier
            self.refuse_decided(run_id=run_id, actor=actor, action="rewind", error=error)
            raise
        except RunStateError:  # (the same rewind, sent at once, moved the run first: running its next step)
            earlier = self._raced_delivery(actor, delivery_id)
            if earlier is not None:
                return earlier
            raise
        except DuplicateDecisionError:
            earlier = self._earlier_delivery(actor.channel, delivery_id) if delivery_id else None
            if earlier is not None:
                return earlier
            with self.store.read() as tx:
                pending = tx.requests.latest_for_run(run_id)
                error = self._already(tx, pending)  # type: ignore[arg-type]
            self.refuse_decided(run_id=run_id, actor=actor, action="rewind", error=error)
            raise error from None
        return replace(outcome, claim=self._resumed(run_id, outcome.claim, wanted=claim))

    def _rewind(self, tx: Tx, run_id: str, actor: Actor, to: int | str | None, feedback: str | None,
                edits: dict[str, Any] | None, request_id: int | None, delivery_id: str | None,
                claim: bool, allow_empty: bool, expect_head: int | None = None,
                expect_decision: int | None = None) -> DecisionOutcome:
        seq_to = _seq(to)
        with tx.pipeline():  # PostgreSQL: the run (locked), its pending request, the target and an id at once
            run_later = tx.runs.get_later(run_id, for_update=True)
            pending = tx.requests.pending_for_run_later(run_id)
            target_later = tx.checkpoints.load_later(run_id, seq_to) if seq_to is not None else None
            next_id = tx.decisions.next_id()
        run = run_later.get()
        if run is None:
            raise no_run(run_id)
        request = pending.get() if run.status is RunStatus.WAITING else None
        if request_id is not None and (request is None or request.id != request_id):
            named = self._request_of(tx, run, request_id)  # (another run's: nothing said of it)
            if named.status is not RequestStatus.PENDING:  # settled: said as such to who may rewind there (else
                # refused as not allowed), even while a step executes
                raise self._settled(tx, run, named, actor, Action.REWIND.value,
                                    tail=now_waits_at(run.id, [request] if request else []))
            if request is not None:
                request = named  # another request the run waits on (a LangGraph super-step's): its point decides
        if run.status not in REWINDABLE:
            raise RunStateError(f"run {run.id} is {run.status.value} (executing a step): rewind when it stops")
        if run.lease_token is not None and run.lease_expires_at is not None and run.lease_expires_at > self.clock():
            # cancelled while a process executes its step: the rewind's own would run beside it
            raise RunStateError(f"run {run.id} was cancelled while a step was executing in {run.lease_owner}; that "
                                f"step is still finishing (lease until {when(run.lease_expires_at)}): rewind "
                                "when it has, so that the step does not run twice at once")
        wf = resolve_workflow(self.registry, run)
        if request is not None and request_id is None:  # (several at once: a LangGraph super-step's)
            request = self._rewinding_request(tx, wf, run, request, actor)
        seen = expect_head if expect_head is not None and run.head_seq != expect_head else None  # (moved on)
        if seen is None and expect_decision is not None and tx.decisions.newest_id(run.id) > expect_decision:
            seen = run.head_seq  # (decided since without a checkpoint of its own: a vote, one of parallel requests)
        try:
            reason = self._rewind_refusal(wf, run, request, actor, tx)
        except InvalidDecisionError:  # (where the run waits now allows no rewind: the page is stale first)
            if seen is not None:
                raise self._moved_on(tx, run, seen) from None
            raise
        if reason is not None:  # may they, then how the run moved on (who decided): only for who may rewind it
            raise Refused(reason, run.id, request.id if request else None)
        if seen is not None:
            raise self._moved_on(tx, run, seen)
        # who, may they, then what they sent: a person not allowed is told so (403), whatever the rewind holds
        refuse_unstorable([to, edits], what="the rewind", refuse=InvalidDecisionError)  # (NUL, NaN: none stored)
        if feedback is not None:
            if blank(feedback):  # (characters that print as nothing: a feedback decision refuses them too)
                raise InvalidDecisionError("the feedback is blank: give some text, or no feedback to hand the step "
                                           "what the checkpoint hands it")
            check_text(feedback, max_bytes=self.max_state_bytes, what="the feedback", refuse=InvalidDecisionError)
        target, loaded = self._target(tx, run, to, target_later.get() if target_later is not None else None)
        if loaded is None:
            loaded = tx.checkpoints.load(run.id, target.seq)
            assert loaded is not None
        if isinstance(edits, dict) and edits:  # a rewind's edits need what an edit needs (``rewind_edits``)
            if isinstance(wf, lgraph.LangGraphWorkflow):  # first, fields that are none of the state's: said as
                wf.refuse_unknown_channels(edits)  # such, not as edits past an approval (s19 M2)
            else:
                refuse_unknown_fields(wf, edits)
            reason = edits_refusal(tx, wf, run, target=target, tree=loaded.tree, edits=edits, actor=actor,
                                   people=self.people, pending=request)
            if reason is not None:
                raise Refused(reason, run.id, request.id if request else None)
        tree = loaded.tree
        if target.workflow_version != wf.version:
            if target.workflow_version not in wf.migrations:
                raise VersionUnavailableError(
                    f"checkpoint #{target.seq} of run {run.id} holds v{target.workflow_version} state and "
                    f"{wf.label} declares no migration from it")
            tree = migrate_tree(wf, target.workflow_version, tree, run_id=run.id)
        graph = isinstance(wf, lgraph.LangGraphWorkflow)
        if edits and not allow_empty:  # (a graph's fields are in its own checkpoint: whole fields only)
            try:
                refuse_empty_edits(edits, None if graph else tree)
            except EmptyEditError:  # a value the state model refuses anyway: the model's words (no advice to
                if not graph:  # allow what would fail then)
                    apply_edits(wf, decode_stored(wf, tree), edits)
                raise
        if graph:  # the graph's own state takes the feedback and edits
            tree = wf.fork_tree(tree, feedback=feedback, edits=edits, run_id=run.id, seq=target.seq,
                                earlier=lambda: _takes_values_before(tx, wf, run.id, target.parent_seq))
            if edits:  # the limits an edit's state meets (size, depth), as a native rewind's and an edit's
                tree = state_tree(wf, wf.codec.validate(tree), max_bytes=self.max_state_bytes,
                                  what="the edited state", refuse=InvalidDecisionError)
                wrong = wf.edit_errors(edits)  # then the channels' types, as the input's: stored, a value that
                if wrong:  # does not fit would fail the step that reads it
                    raise InvalidDecisionError(f"invalid edit: {wrong}")
        elif edits:
            edited = apply_edits(wf, decode_stored(wf, tree), edits)
            if not allow_empty:  # (fields of a model left out: reset, unseen: s34 F1)
                refuse_left_out_edits(wf, tree, edits, edited)
            tree = state_tree(wf, edited, max_bytes=self.max_state_bytes, what="the edited state",
                              refuse=InvalidDecisionError, edited=tree)
        refuse_not_text(edits, what="the rewind's edits", refuse=InvalidDecisionError)  # a key (values: above)
        next_node, handoff = target.next_step, None
        if graph:  # a graph that had finished there: a step writes the rewind's values (lgraph.UPDATE_STEP)
            next_node = wf.fork_next(tree, next_node)
        if feedback:
            handoff = {"feedback": feedback, "by": actor.acting_for or actor.label}
            node = wf.nodes.get(next_node) if next_node else None
            if isinstance(node, SteeringPoint):
                next_node = wf.feedback_target(node) or next_node
        elif not graph and target.handoff and next_node == target.next_step:
            handoff = dict(target.handoff)  # the words a decision routed this step with, as a retry gives them
        missing = unknown_step(wf, run.id, next_node)
        if missing is not None:  # (written, it failed at once: s33 F17)
            raise InvalidDecisionError(f"checkpoint #{target.seq}: {missing}")
        payload = {"to": target.seq, "feedback": feedback, "edits": edits or None}
        now = self.clock()
        with tx.pipeline():  # PostgreSQL: the writes in one or two round trips (the request's answer, the rest)
            finish = self._fork(tx, wf, run, request, target, loaded, tree, actor, next_node, handoff, payload,
                                now, next_id.get(), delivery_id, claim, feedback, edits)
        return finish()

    def _fork(self, tx: Tx, wf: Workflow, run: Run, request: SteeringRequest | None, target: CheckpointInfo,
              loaded: LoadedCheckpoint, tree: Any, actor: Actor, next_node: str | None,
              handoff: dict[str, Any] | None, payload: dict[str, Any], now: datetime, decision_id: int | None,
              delivery_id: str | None, claim: bool, feedback: str | None,
              edits: dict[str, Any] | None) -> Callable[[], DecisionOutcome]:
        """Settle the pending request (if any), record the rewind and write the fork; returns what gives the
        outcome once the statements have been answered (after the caller's pipeline).

        Raises:
            AlreadyDecidedError: the request was settled meanwhile; DuplicateDecisionError.
        """
        after = None
        if request is not None:  # lock the request first, as every decision does
            after = close_request(tx, request, now=now, by=actor, action=Action.REWIND.value)
            if after is None:
                raise self._already(tx, tx.requests.get(request.id) or request)
            lgraph.close_siblings(tx, wf, request, now=now, by=actor, action=Action.REWIND.value)
        decision_id = tx.decisions.insert(run_id=run.id, request_id=request.id if request else None,
                                          action=Action.REWIND, actor=actor, payload=payload, now=now,
                                          delivery_id=delivery_id, decision_id=decision_id)
        # the hook reads the run as the rewind found it (README: ``run.status`` before the decision moved it on)
        tx.hooks.emit("run.decided", run_id=run.id, now=now, request=after, decision_id=decision_id,
                      action=Action.REWIND.value, actor=actor_facts(actor), settled=True, payload=payload)
        seq, branch = run.last_seq + 1, run.last_branch + 1
        checkpoint = NewCheckpoint(run_id=run.id, seq=seq, parent_seq=target.seq, branch=branch, step=REWIND_NODE,
                                   next_step=next_node, workflow_version=wf.version, created_at=now,
                                   decision_id=decision_id, handoff=handoff)
        resumed = self._resume_later(tx, run, checkpoint=checkpoint, tree=tree,
                                     parent=tx.checkpoints.position(loaded), claim=claim, now=now, branch=branch,
                                     last_branch=branch, workflow_version=wf.version)
        tx.events.add(action="decision.rewind", actor=actor, now=now, run_id=run.id,
                      request_id=request.id if request else None, to_seq=target.seq, continues_at=next_node,
                      feedback=feedback, edited_fields=sorted(edits) if edits else None)
        decision = Decision(id=decision_id, run_id=run.id, request_id=request.id if request else None,
                            action=Action.REWIND, actor_id=actor.id, actor_name=actor.name, channel=actor.channel,
                            payload=payload, created_at=now, delivery_id=delivery_id, person=actor.who,
                            acting_for=actor.acting_for)

        def outcome() -> DecisionOutcome:
            made = resumed()
            return DecisionOutcome(decision=decision, request=after, settled=True, next_node=next_node,
                                   run_status=RunStatus.RUNNING if made else RunStatus.READY, claim=made)
        return outcome

    @staticmethod
    def _moved_on(tx: Tx, run: Run, seen: int) -> AlreadyDecidedError:
        """The refusal of a rewind sent from a view of ``run`` at head ``seen`` after the run moved on: where
        it is now and the last decision (who, what, when), if any."""
        last = max(tx.decisions.for_run(run.id), key=lambda d: d.id, default=None)
        now = (f"it is still at #{seen}, {run.status.value}" if seen == run.head_seq else
               f"it is now at #{run.head_seq}, {run.status.value}, not #{seen}")
        if last is not None:
            what = past_tense(last.action.value) + (f" to #{last.payload.get('to')}"
                                                    if last.action is Action.REWIND else "")
            now += f"; last {what} by {last.label} at {when(last.created_at)}"
        return AlreadyDecidedError(f"the run changed since this page was loaded ({now}): reload the page",
                                   decided_by=last.label if last else None,
                                   decided_at=last.created_at if last else None,
                                   action=last.action.value if last else None,
                                   decided_by_id=last.actor_id if last else None,
                                   channel=last.channel if last else None, request_id=None, changed=now)

    def _rewinding_request(self, tx: Tx, wf: Workflow, run: Run, newest: SteeringRequest,
                           actor: Actor) -> SteeringRequest:
        """Of the requests a run waits on at once (a LangGraph super-step's interrupts), an older one whose
        point lets ``actor`` rewind, when no request was named; else ``newest`` (its point then decides)."""
        for candidate, point in lgraph.sibling_points(tx, wf, newest):
            if Action.REWIND.value in point.actions and permissions.refusal(
                    point, Action.REWIND.value, actor, run, self.people,
                    escalated=candidate.escalated_at is not None) is None:
                return candidate
        return newest

    def _rewind_refusal(self, wf: Workflow, run: Run, request: SteeringRequest | None, actor: Actor,
                        tx: Tx) -> str | None:
        """Why ``actor`` may not rewind ``run`` (None: they may): the pending request's point decides; with
        nothing pending, any point of the workflow that allows rewinding and lets them. Who started the run may
        rewind it wherever rewinding is allowed, as they may retry or cancel it (``permissions.refusal``), and
        where the workflow has no steering point at all; where it has points and none allows rewinding, nobody
        may (but Hazel itself), the console operator included."""
        if request is not None:
            point = request_point(tx, wf, run, request) or point_in(wf, request.point, run)
            if Action.REWIND.value not in point.actions:
                raise InvalidDecisionError(permissions.not_offered(Action.REWIND.value, point.title, point.actions)
                                           + f", where run {run.id} waits"
                                           + self._rewind_later(tx, wf, run, request, point))
            return permissions.refusal(point, Action.REWIND.value, actor, run, self.people,
                                       escalated=request.escalated_at is not None)
        every = lgraph.points_of_run(tx, wf, run) or wf.steering_points()
        points = [p for p in every if Action.REWIND.value in p.actions]
        if any(permissions.refusal(p, Action.REWIND.value, actor, run, self.people) is None for p in points):
            return None
        if not points and (actor.channel in permissions.HAZEL_ITSELF
                           or (not every and permissions.started_it(run, actor))):
            return None  # (a workflow without steering points: who started the run, as for retry and cancel)
        if not points and every:
            return f"{actor.label} may not rewind run {run.id}: no steering point of {wf.label} allows rewinding"
        return permissions.run_action_refusal(points, "rewind", actor, run, self.people)  # who may, by name

    @staticmethod
    def _rewind_later(tx: Tx, wf: Workflow, run: Run, request: SteeringRequest, point: SteeringPoint) -> str:
        """What to do when the point a run waits at forbids rewinding and another of its points allows it
        (a LangGraph super-step's other interrupt, answered already; a later point of the workflow): answer
        this one first (a run waiting at none is rewound where any point allows it)."""
        points = lgraph.points_of_run(tx, wf, run, request) or wf.steering_points()
        others = [p.title for p in points if p.name != point.name and Action.REWIND.value in p.actions]
        if not others:
            return ""
        return f": answer it first, then rewind (allowed at {', '.join(repr(t) for t in others)})"

    def target_seq(self, run_id: str, to: int | str | None) -> int:
        """The checkpoint a rewind of ``run_id`` to ``to`` would fork from (``rewind``'s ``to``: a number, or a
        node name), without rewinding: what a caller reads the state of before it writes a rewind's edits.

        Raises:
            RunNotFoundError, InvalidDecisionError (no target), CheckpointNotFoundError (a node never reached).
        """
        seq = _seq(to)
        if seq is not None:
            return seq
        with self.store.read() as tx:
            return self._target(tx, self._run(tx, run_id), to, None)[0].seq

    @staticmethod
    def _target(tx: Tx, run: Run, to: int | str | None,
                loaded: LoadedCheckpoint | None) -> tuple[CheckpointInfo, LoadedCheckpoint | None]:
        """The checkpoint ``to`` names: a sequence number (``loaded``: the caller loaded it already, in one
        query for its metadata and its state), or the latest checkpoint on the current branch (else any branch)
        from which node ``to`` runs next, alone or with others in one super-step (``draft`` in ``draft + legal``:
        ``lgraph_run.label_names``; metadata only: the caller loads it).

        Raises:
            MissingRewindTargetError: no target; InvalidDecisionError: a target that is not text;
            CheckpointNotFoundError: none matches (or it was pruned).
        """
        if to is None or (isinstance(to, str) and not to.strip()):
            raise MissingRewindTargetError("rewind needs a target: a checkpoint number or a step name")
        if isinstance(to, str) and not is_text(to):  # (a byte that is not UTF-8 on the command line)
            raise InvalidDecisionError(f"the rewind's target {not_text(to)}")
        seq = _seq(to)
        if seq is not None:  # a numbered target never reads the whole history
            if loaded is not None:
                return loaded.info, loaded
            raise missing_checkpoint_in(tx, run, seq)  # pruned, or never there: the wording of every read
        if isinstance(to, str) and to in HAZEL_NODES:  # Hazel's own steps (a LangGraph fork's ``__update__``) are no node to rewind to
            raise CheckpointNotFoundError(f"{to!r} is a step of Hazel's own, not one of the workflow's: rewind to "
                                          "a node of the workflow, or to a checkpoint by number")
        history = tx.checkpoints.list(run.id)
        by_seq = {cp.seq: cp for cp in history}
        lineage, cursor = [], by_seq.get(run.head_seq)
        while cursor is not None:
            lineage.append(cursor)
            cursor = by_seq.get(cursor.parent_seq) if cursor.parent_seq is not None else None
        for cp in lineage + list(reversed(history)):  # (a LangGraph super-step's next step names its nodes)
            if cp.next_step == to or to in label_names(cp.next_step):
                return cp, None
        steps = sorted({name for cp in history for name in label_names(cp.next_step)} - HAZEL_NODES.keys())
        if len(history) < run.last_seq + 1:
            raise CheckpointNotFoundError(
                f"no kept checkpoint of run {run.id} runs {to!r} next: its history was pruned (kept: "
                + ", ".join(f"#{c.seq}" for c in history[-5:]) + "); rewind to a kept checkpoint by number")
        raise CheckpointNotFoundError(f"run {run.id} never reached {to!r} (known: {', '.join(steps)})")



def _seq(to: int | str | None) -> int | None:
    """The checkpoint number ``to`` names (``7``, ``"7"``, ``"#7"``), or None when it names a node."""
    if isinstance(to, bool):
        return None
    if isinstance(to, int):
        return to
    number = to.strip().lstrip("#") if isinstance(to, str) else ""
    if number.isascii() and number.isdigit():  # (str.isdigit and int take "１" and "²" too: not a number here)
        return int(number)
    return None


def _takes_values_before(tx: Tx, wf: Any, run_id: str, seq: int | None) -> int | None:
    """The nearest checkpoint from ``seq`` back (``seq``, its parent, …) whose graph checkpoint takes a rewind's
    feedback or edits (``lgraph_run.writers_at`` finds no several nodes there: one node wrote it, or the
    input); None when none does. Read only when a rewind with values is refused: one load per checkpoint."""
    while seq is not None:
        loaded = tx.checkpoints.load(run_id, seq)
        if loaded is None:
            return None
        pointer = loaded.tree.get("lg_checkpoint") if isinstance(loaded.tree, dict) else None
        if pointer is None or not lgraph.writers_at(wf.graph, {"configurable": {
                "thread_id": run_id, "checkpoint_ns": "", "checkpoint_id": pointer}}):
            return seq
        seq = loaded.info.parent_seq
    return None
