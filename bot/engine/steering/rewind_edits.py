"""Who may rewind with edits: a rewind's edits need what an edit needs (one rule, every channel).

A rewind that carries edits (``hazel rewind --set``, REST ``"edits"``) replaces state the run then continues
with, so besides the rewind permission (``Rewinding._rewind_refusal``) it needs the edit permission of the
steering point that vouches for that state (``permissions.refusal`` for ``edit``: the point offers ``edit``,
the person is its approver or ``edit`` is open to anyone, the self-approval ban, the console's ``--as`` rule):

1. **The point ahead.** When the target checkpoint runs a steering point next (``#1 write → review``; on a
   LangGraph run, each node that interrupted at that checkpoint, and each node that runs next and asked before
   in this run: its point is named after it), an edited field it shows (its ``show``; every field when it
   shows the whole state, and always for a LangGraph point, whose value the graph computes from its state) is
   an edit of what it asks about: the person needs ``edit`` there, as ``hazel edit`` at that point would.
2. **The approval behind.** Every other edited field goes into steps before anyone sees it. When the target's
   line (the target, its parent, … back to #0) holds an approval (a checkpoint written by an ``approve`` or
   ``edit`` that settled a request, a timeout's approve included), the nearest one is what the edits would pass
   without a new approval: the person needs ``edit`` at that point, the point must show the field (an edit
   there replaces only what it shows), and a native point's quorum must be one (an edit under a quorum is asked
   again: one person's edits cannot stand for several approvals). A LangGraph point's edit settles its request
   whatever its quorum, and it shows what the graph computes: only its edit permission counts.
3. With neither (no point ahead shows the field, no approval behind the target), the edits change the run's
   input and what steps made of it before anyone approved anything: the rewind permission is enough, as before.

A rewind without edits is not checked here. Refusals name the rule, the point and why (``Refused``: audited
as ``decision.refused`` by the caller, after the transaction rolled back, so nothing is written).
"""

from __future__ import annotations

from typing import Any, Iterable

from bot.engine import lgraph, permissions
from bot.engine.people import People
from bot.engine.steering.core import when
from bot.engine.versions import request_point
from bot.engine.workflow import SteeringPoint, Workflow
from store import Tx
from store.models import (REWIND_NODE, Action, Actor, CheckpointInfo, RequestStatus, Run, SteeringRequest,
                          node_label, node_names, past_tense)

_EDIT = Action.EDIT.value
_APPROVING = (Action.APPROVE.value, Action.EDIT.value)


def edits_refusal(tx: Tx, wf: Workflow, run: Run, *, target: CheckpointInfo, tree: Any, edits: dict[str, Any],
                  actor: Actor, people: People, pending: SteeringRequest | None) -> str | None:
    """Why ``actor`` may not rewind ``run`` to ``target`` with ``edits`` (field name -> value), by the rules of
    the module docstring; None when they may (or ``edits`` is empty, or Hazel itself rewinds). ``tree``: the
    target's stored state tree (a LangGraph run's: the points asked there); ``pending``: the request the run
    waits on now (its escalation counts at the point ahead when it was asked at ``target``). Reads the run's
    checkpoint list and requests only when a field is not one the point ahead shows (rule 2); on a LangGraph
    run, also the latest request at each node that runs next (rule 1)."""
    if not edits or actor.channel in permissions.HAZEL_ITSELF:
        return None
    graph = isinstance(wf, lgraph.LangGraphWorkflow)
    fields = sorted(str(name) for name in edits)
    head = f"{actor.label} may not rewind run {run.id} to #{target.seq} with edits of {', '.join(fields)}"
    left = list(fields)
    for point in _points_ahead(tx, wf, run, target, tree):
        shown = [f for f in left if _shows(point, f, graph)]
        if not shown:
            continue
        escalated = (pending is not None and pending.checkpoint_seq == target.seq and pending.point == point.name
                     and pending.escalated_at is not None)
        reason = permissions.refusal(point, _EDIT, actor, run, people, escalated=escalated)
        if reason is not None:
            return (f"{head}: {point.title!r} asks about them next, and a rewind's edits of what a steering point "
                    f"shows need what an edit there needs: {reason}")
        left = [f for f in left if f not in shown]
    if not left:
        return None
    for request, point, before in _approval_behind(tx, wf, run, target):
        reason = _past_approval(head, run, target, request, point, left, actor, people, graph, before)
        if reason is not None:
            return reason
    return None


def _points_ahead(tx: Tx, wf: Workflow, run: Run, target: CheckpointInfo, tree: Any) -> list[SteeringPoint]:
    """The steering points the run asks at next from ``target``: a native workflow's next node when it is one.
    A LangGraph run's points are known only once a node asks: the interrupts pending at that checkpoint (each
    node that interrupted asks again), and each node that runs next and asked before in this run (its point is
    named after it: the latest request there)."""
    if not isinstance(wf, lgraph.LangGraphWorkflow):
        node = wf.nodes.get(target.next_step) if target.next_step else None
        return [node] if isinstance(node, SteeringPoint) else []
    points = dict(wf.points_in(tree)) if isinstance(tree, dict) else {}
    for name in node_names(target.next_step):
        asked = tx.requests.latest_at_point(run.id, name) if name not in points else None
        point = request_point(tx, wf, run, asked) if asked is not None else None
        if point is not None:
            points[name] = point
    return list(points.values())


def _shows(point: SteeringPoint, name: str, graph: bool) -> bool:
    """Whether an edit at ``point`` may replace field ``name``: its shown field, or any when it shows the whole
    state (a LangGraph point shows a value the graph computes: any)."""
    return graph or point.show is None or point.show == name


def _approval_behind(tx: Tx, wf: Workflow, run: Run, target: CheckpointInfo
                     ) -> Iterable[tuple[SteeringRequest, SteeringPoint | None, int | None]]:
    """The requests of the nearest approval on ``target``'s line (walking from ``target`` to #0), each with its
    steering point in ``wf`` (None: not known here) and the newest checkpoint still kept at or before the one it
    was asked at (None: ``hazel prune`` removed them all), where a rewind without edits past it may go; nothing
    when the line holds none. A checkpoint is an
    approval's when a decision that settled a request asked at its parent with approve or edit wrote it (a
    LangGraph super-step's requests: every one so settled), but not a native edit under a quorum, which asks
    the same point again. A line cut by ``hazel prune`` (a kept checkpoint without its parent) goes on with the
    run's newest approval settled before the target was written."""
    history = {cp.seq: cp for cp in tx.checkpoints.list(run.id)}
    requests = tx.requests.for_run(run.id)
    graph = isinstance(wf, lgraph.LangGraphWorkflow)
    cursor: CheckpointInfo | None = target
    while cursor is not None:
        if cursor.decision_id is not None and cursor.step != REWIND_NODE and cursor.parent_seq is not None:
            found = [r for r in requests if r.checkpoint_seq == cursor.parent_seq and _approved(r)
                     and (graph or r.point != cursor.next_step)]
            if found:
                return [(r, request_point(tx, wf, run, r), _kept_by(history, r)) for r in found]
        if cursor.parent_seq is None:
            if cursor.seq == 0:
                return []
            break  # (pruned: the rest of the line is gone)
        cursor = history.get(cursor.parent_seq)
    earlier = [r for r in requests if _approved(r) and r.decided_at is not None
               and r.decided_at <= target.created_at]
    newest = max(earlier, key=lambda r: (r.decided_at, r.id), default=None)
    return [(newest, request_point(tx, wf, run, newest), _kept_by(history, newest))] if newest is not None else []


def _kept_by(history: dict[int, CheckpointInfo], request: SteeringRequest) -> int | None:
    """The newest checkpoint in ``history`` at or before the one ``request`` was asked at (None: none kept)."""
    return max((seq for seq in history if seq <= request.checkpoint_seq), default=None)


def _approved(request: SteeringRequest) -> bool:
    return request.status is RequestStatus.DECIDED and request.decided_action in _APPROVING


def _past_approval(head: str, run: Run, target: CheckpointInfo, request: SteeringRequest,
                   point: SteeringPoint | None, fields: list[str], actor: Actor, people: People,
                   graph: bool, before: int | None) -> str | None:
    """Why the edits of ``fields`` may not pass the approval of ``request`` at ``point`` (rule 2), or None;
    ``before``: the newest checkpoint kept at or before the one ``request`` was asked at (None: pruned), which
    the refusal offers instead (a fresh-user finding, s27 F6: it named checkpoints ``hazel prune`` had removed)."""
    title = point.title if point is not None else request.title
    goes = (f"the run would go on with them from {node_label(target.next_step)}" if target.next_step
            else "they would be the run's final state")
    why = (f"{head}: #{target.seq} comes after the approval at {title!r} ({_past(request)}): {goes} with "
           "nobody approving them, and a rewind's edits past an approval need what an edit there needs: ")
    if before == request.checkpoint_seq:
        instead = f" (rewind without edits, or to #{before} or before, where {title!r} asks again)"
    elif before is not None:
        instead = (f" (rewind without edits, or to #{before} or before: #{request.checkpoint_seq}, where {title!r} "
                   "asked, was pruned)")
    else:
        instead = (f" (rewind without edits instead: #{request.checkpoint_seq}, where {title!r} asked, was pruned "
                   "with every checkpoint before it)")  # (s30 F2: read as offering #N, which was pruned)
    if point is None:
        return why + (f"who may edit at {request.point!r} is not known here ({run.workflow} as deployed here has no "
                      "such steering point, or the checkpoint it was asked at is gone)" + instead)
    reason = permissions.refusal(point, _EDIT, actor, run, people, escalated=request.escalated_at is not None)
    if reason is not None:
        return why + reason + instead
    unshown = [f for f in fields if not _shows(point, f, graph)]
    if unshown:
        return why + (f"an edit at {title!r} replaces only {point.show}, not {', '.join(unshown)}" + instead)
    if not graph and point.approvals_required > 1:
        return why + (f"{title!r} needs {point.approvals_required} approvals, and one person's edits cannot "
                      "stand for them (an edit there is asked again)" + instead)
    return None


def _past(request: SteeringRequest) -> str:
    """``approved by sam at 2026-03-01 09:00 UTC`` (a quorum's: the vote that settled it, and the count)."""
    quorum = (f", {request.approvals} of {request.approvals_required} approvals"
              if request.approvals_required > 1 else "")
    action = past_tense(request.decided_action or Action.APPROVE.value)
    return f"{action} by {request.decided_by or 'someone'} at {when(request.decided_at)}{quorum}"
