"""What each run page shows, read through the engine's boundary (``Hazel``'s reading methods, one read
transaction each): the list of runs, a run with its tree and pending request, the state at a checkpoint, a
diff between two checkpoints. No store access of its own, no permission logic (``Hazel.access`` says what
the person may do).

Whatever the run's length, a page lists a bounded part of it (``bot.inbound.web.history``) and loads at most the
states it shows: a run page those of its pending requests, a diff page two. It reads the run's checkpoint
metadata whole (``Hazel.checkpoints``: no states, one query), as the choice of #0 and each step's start needs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.inbound.web import history
from bot.inbound.web.diff import FieldDiff, state_diff
from bot.inbound.web.graph import Graph, layout
from store.models import CheckpointInfo, Decision, Run, RunStatus, SteeringRequest, line_of, node_label

if TYPE_CHECKING:
    from bot.engine import Access, Hazel
    from store.models import Actor, RequestView

PAGE_SIZE = 25
"""Runs per page of ``/runs``."""
DECISION_ROWS = 50
"""Decisions the run page's table lists (the newest; the audit log has every one)."""


@dataclass
class RunPage:
    """A run as ``/runs/{id}`` shows it."""

    run: Run
    window: history.Window
    """The page of the tree shown (``?page=``; 0: the newest)."""
    targets: history.Choices
    """What the rewind form's checkpoint field offers."""
    decisions: list[Decision]
    """The newest ``DECISION_ROWS`` decisions, oldest first (``decisions_total``: how many in all)."""
    decisions_total: int
    requests: list[SteeringRequest]
    graph: Graph
    pending: "RequestView | None" = None
    access: "Access | None" = None
    may_rewind: bool = False
    request_of: dict[int, SteeringRequest] = field(default_factory=dict)
    waiting: list["Waiting"] = field(default_factory=list)
    """Every request the run waits on, oldest first (``pending`` and ``access``: the first's)."""
    last_decision: int = 0
    """The id of the run's newest decision (0: none): the rewind form sends it, so that a decision since that
    wrote no checkpoint (a vote, one of parallel requests) still makes the page stale (s32 F7)."""


@dataclass
class Waiting:
    """A pending request as the run page shows it, and what the person may do there (None: view only)."""

    view: "RequestView"
    access: "Access | None" = None
    who: str = ""
    """Who may decide, people by name (``Hazel.who_may``; s25 F17: the page named a Jira account)."""
    who_escalated: str = ""
    """Who else may decide once the request was escalated (its ``escalate_to``), as ``who``."""


def run_page(hazel: "Hazel", run_id: str, actor: "Actor | None", *, page: int = 0) -> RunPage:
    """The run, page ``page`` of its checkpoint tree (0: the newest, ``history.window``), its pending requests
    and what ``actor`` may do at each (None: view only).

    Raises:
        RunNotFoundError.
    """
    run = hazel.get(run_id=run_id)
    checkpoints = hazel.checkpoints(run_id=run_id)
    decisions = hazel.decisions(run_id=run_id)
    requests = hazel.requests(run_id=run_id)
    window = history.window(checkpoints, head_seq=run.head_seq, page=page)
    graph = layout(window.shown, head_seq=run.head_seq, decisions=decisions, points={r.point for r in requests},
                   line=line_of(checkpoints, run.head_seq), gaps_before=set(window.gaps))
    shown = RunPage(run=run, window=window, targets=history.rewind_targets(checkpoints, head_seq=run.head_seq),
                    decisions=decisions[-DECISION_ROWS:], decisions_total=len(decisions), requests=requests,
                    graph=graph, request_of={r.id: r for r in requests},
                    last_decision=max((d.id for d in decisions), default=0))
    for pending in (r for r in requests if r.status.value == "pending"):  # several: parallel LangGraph nodes
        view = hazel.request_view(request_id=pending.id)
        shown.waiting.append(Waiting(view, hazel.access(request_id=pending.id, actor=actor) if actor is not None
                                     else None, who=hazel.who_may(view.approvers) if view is not None else "",
                                     who_escalated=hazel.who_may(view.escalate_to)
                                     if view is not None and view.escalate_to is not None else ""))
    if shown.waiting:
        shown.pending, shown.access = shown.waiting[0].view, shown.waiting[0].access
        if shown.access is not None:
            shown.may_rewind = shown.access.may("rewind")
    elif actor is not None and run.status is not RunStatus.RUNNING:
        shown.may_rewind = True  # an ended run: the engine decides who may (its refusal is shown)
    return shown


@dataclass
class RunsPage:
    """A page of ``/runs``: ``page`` is the query's ``page`` (0: the newest runs), ``size`` the runs per page;
    the page labels its runs by position (``runs 26–50``), which a 0-based ``page`` cannot contradict."""

    runs: list[Run]
    pending: dict[str, SteeringRequest]
    page: int
    more: bool
    mine: bool
    size: int = PAGE_SIZE


def runs_page(hazel: "Hazel", *, statuses: list[str], workflow: str | None, page: int, mine: bool,
              actor: "Actor | None") -> RunsPage:
    """A page of runs, newest first; ``mine``: only runs with a request ``actor`` may decide now."""
    if mine:
        waiting = {v.run.id: v for v in (hazel.waiting_on(actor=actor, limit=500, anyone=True) if actor is not None else [])}
        runs = sorted((v.run for v in waiting.values()), key=lambda r: r.created_at, reverse=True)
        runs = [r for r in runs if (not statuses or r.status.value in statuses)
                and (not workflow or r.workflow == workflow)]
        chunk = runs[page * PAGE_SIZE:(page + 1) * PAGE_SIZE]
        pending = {run_id: v.request for run_id, v in waiting.items()}
        return RunsPage(chunk, pending, page, len(runs) > (page + 1) * PAGE_SIZE, True, PAGE_SIZE)
    found = hazel.runs(statuses=statuses or None, workflow=workflow or None, limit=PAGE_SIZE + 1,
                       offset=page * PAGE_SIZE)
    runs = found[:PAGE_SIZE]
    return RunsPage(runs, hazel.pending_requests(run_ids=[r.id for r in runs]), page, len(found) > PAGE_SIZE,
                    False, PAGE_SIZE)


def pretty(value: Any) -> str:
    """A value as a page shows it: text as it is, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def fields_of(tree: Any) -> list[tuple[str, Any]]:
    """A state's fields, in order (a state that is not an object: one field ``state``)."""
    return list(tree.items()) if isinstance(tree, dict) else [("state", tree)]


def label(cp: CheckpointInfo) -> str:
    """``#3 draft``, with the node's readable name."""
    return f"#{cp.seq} {node_label(cp.step)}"


@dataclass
class DiffPage:
    """``a`` and ``b`` compared field by field; ``choices``: what the page's two checkpoint fields offer."""

    a: CheckpointInfo
    b: CheckpointInfo
    fields: list[FieldDiff]
    choices: history.Choices


def diff_page(hazel: "Hazel", run: Run, checkpoints: list[CheckpointInfo], a: int, b: int) -> DiffPage:
    """The field-by-field diff of the states at checkpoints ``a`` and ``b`` of ``run`` (``checkpoints``: its
    checkpoints' metadata, all of them); two states loaded.

    Raises:
        CheckpointNotFoundError: either does not exist.
    """
    by_seq = {c.seq: c for c in checkpoints}
    for seq in (a, b):
        if seq not in by_seq:
            raise hazel.missing_checkpoint(run_id=run.id, seq=seq)
    old = hazel.state_tree_at(run_id=run.id, seq=a)
    new = hazel.state_tree_at(run_id=run.id, seq=b)
    choices = history.diff_choices(checkpoints, head_seq=run.head_seq, keep=(a, b))
    return DiffPage(by_seq[a], by_seq[b], state_diff(old, new), choices)
