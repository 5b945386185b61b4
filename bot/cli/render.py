"""Readable tables and trees for the CLI (rich)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from bot.cli import common
from bot.cli.common import command_prefix, when
from integrations.terminal import for_terminal, indented
from bot.engine import DriveResult
from store.models import REWIND_NODE, branch_heading, continuation, node_label, person_label, rewound_fields
from store.models import AuditEvent, CheckpointInfo, Decision, Run, SteeringRequest, shown_error

if TYPE_CHECKING:
    from rich.tree import Tree

STATUS_STYLE = {"completed": "green", "failed": "red", "rejected": "red", "cancelled": "yellow",
                "waiting": "cyan", "running": "blue", "ready": "blue"}


def status(s: str) -> str:
    style = STATUS_STYLE.get(s, "")
    return f"[{style}]{s}[/{style}]" if style else s


def started_by(run: Run) -> str:
    """Who started ``run``, as the engine's messages name people: the person (the people file's name), else
    the identity used (``store.models.person_label``); the audit log says the same person."""
    return person_label(run.started_by_person, None, run.started_by)


_UNBOUNDED = 1_000_000
"""The width a table written to a file or a pipe is measured at (``print_table``): wider than any row it has."""


def print_table(table: Table) -> None:
    """Print ``table`` on stdout (``bot.cli.common.out``). On a terminal, or at a width given (``COLUMNS``), it
    is laid out at that width, long values wrapping in their column; written to a file or a pipe, at its own
    full width: one line per row (but for a value's own line breaks), nothing wrapped or cut, whatever width
    rich would assume there (80 columns)."""
    out = common.out
    if out.is_terminal or getattr(out, "width_given", True):
        out.print(table)
        return
    from rich.measure import Measurement

    table.width = Measurement.get(out, out.options.update_width(_UNBOUNDED), table).maximum
    out.print(table, crop=False)


def runs_table(runs: list[Run], pending: dict[str, list[SteeringRequest]]) -> Table:
    """The runs, one row each; ``at``: every steering point a run waits at (``pending``: its pending requests,
    oldest first), else its error, whole up to ``ERROR_SHOWN_CHARS`` characters (``store.models.shown_error``:
    how many more there are, and ``hazel show RUN --full``)."""
    table = Table(show_edge=False, header_style="bold")
    table.add_column("run", no_wrap=True)
    for col in ("workflow", "status", "at", "started by"):
        table.add_column(col, overflow="fold")
    table.add_column("updated (UTC)", no_wrap=True)
    for run in runs:
        asked = pending.get(run.id) or []
        at = (", ".join(f"{r.point} ({r.channel})" for r in asked) if asked
              else shown_error(run.error or "", run_id=run.id, command=command_prefix(), one_line=True))
        table.add_row(run.id, escape(f"{run.workflow} v{run.workflow_version}"), status(run.status.value),
                      escape(at), escape(started_by(run)), when(run.updated_at))
    return table


def history_tree(run: Run, checkpoints: list[CheckpointInfo], decisions: list[Decision],
                 asked: dict[int, tuple[int, str]] | None = None) -> Tree:
    """The checkpoint tree: children under their parent; a fork shows as a second child (a new branch). A
    decision that wrote no checkpoint (a quorum's vote before the last, the answer to one of a LangGraph
    super-step's interrupts while others wait) shows under the checkpoint its request was asked at
    (``asked``: request id -> ``(checkpoint number, steering point)``)."""
    from rich.tree import Tree  # only `hazel history` draws one
    by_decision = {d.id: d for d in decisions}
    recorded = {cp.decision_id for cp in checkpoints if cp.decision_id}
    votes: dict[int, list[tuple[Decision, str]]] = {}
    for d in decisions:
        where = (asked or {}).get(d.request_id) if d.request_id is not None else None
        if d.id not in recorded and where is not None:
            votes.setdefault(where[0], []).append((d, where[1]))
    children: dict[int | None, list[CheckpointInfo]] = {}
    for cp in checkpoints:
        children.setdefault(cp.parent_seq, []).append(cp)
    root = Tree(f"[bold]run {run.id}[/bold] · {escape(run.workflow)} v{run.workflow_version} · "
                f"{status(run.status.value)}")

    def label(cp: CheckpointInfo) -> str:
        text = f"#{cp.seq} {escape(node_label(cp.step))}"
        decision = by_decision.get(cp.decision_id) if cp.decision_id else None
        if decision is not None:
            who = escape(decision.label)
            if cp.step == REWIND_NODE:
                text += f" to #{escape(str(decision.payload.get('to')))} by {who}"
            else:
                text += f" [magenta]{decision.action.value}[/magenta] by {who}"
            detail = decision.payload.get("text") or decision.payload.get("reason") or decision.payload.get(
                "feedback")
            if detail:
                text += f": “{escape(_short(detail))}”"
            fields = rewound_fields(cp, decision)
            if fields:  # a rewind's --set: which fields it changed (their values: show)
                text += f" [magenta]set[/magenta] {escape(_short(', '.join(fields), 80))}"
        text += f" → {escape(node_label(cp.next_step)) if cp.next_step else '[green]end[/green]'}"
        text += f"  [dim]{when(cp.created_at)}[/dim]"
        if cp.seq == run.head_seq:
            text += "  [bold yellow]◀ head[/bold yellow]"
        return text

    def add_chain(container: Tree, cp: CheckpointInfo) -> None:
        """A linear stretch of checkpoints at one level; at a fork, each branch nests below."""
        current = cp
        while True:
            node = container.add(label(current))
            for vote, point in votes.get(current.seq, []):  # decisions that wrote no checkpoint of their own
                node.add(f"[magenta]{vote.action.value}[/magenta] by {escape(vote.label)} at {escape(repr(point))}"
                         f" (no checkpoint of its own)  [dim]{when(vote.created_at)}[/dim]")
            kids = children.get(current.seq, [])
            following = continuation(current, kids)
            if following is not None:
                current = following
                continue
            for kid in kids:
                add_chain(container.add(f"[dim]{branch_heading(current, kid)}[/dim]"), kid)
            return

    for cp in children.get(None, []):
        add_chain(root, cp)
    return root


def _short(text: Any, n: int = 60) -> str:
    s = str(text).replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def span(seconds: float) -> str:
    """A lifetime as a person reads it: ``168 h``, ``2 min``, ``1 s`` (hours from one hour up; it said
    ``0.000277778 h`` for a second)."""
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


def event_detail(e: AuditEvent) -> str:
    """An audit event's detail on one line: ``key=value, …`` (``acting_for`` is said in ``who``), each value
    whole (its line breaks as spaces) up to ``ERROR_SHOWN_CHARS`` characters, then how many more there are and
    ``hazel audit RUN --json``, which gives them; a person link's minting (``link.minted``) as ``link for
    priya, valid for 168 h``."""
    if e.action == "link.minted" and isinstance(e.detail.get("for"), str):
        ttl = e.detail.get("ttl_sec")
        valid = f", valid for {span(ttl)}" if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else ""
        return f"link for {_detail_value(e, e.detail['for'])}{valid}"
    facts = {k: v for k, v in e.detail.items() if k != "acting_for"}
    return ", ".join(f"{k}={_detail_value(e, v)}" for k, v in facts.items() if v not in (None, "", []))


def _detail_value(e: AuditEvent, value: Any) -> str:
    """One value of ``e``'s detail as ``event_detail`` shows it (``shown_error``, pointing at ``--json``)."""
    whole = f"{command_prefix()} audit {e.run_id} --json" if e.run_id else "--json"
    return shown_error(str(value).replace("\n", " "), run_id=e.run_id or "", one_line=True, whole=whole)


def audit_table(events: list[AuditEvent]) -> Table:
    """Who (the person; "operator X for NAME" for a console proxy: ``--as``, or a person link X made) did what,
    when, and through which channel identity (``via``)."""
    table = Table(show_edge=False, header_style="bold")
    for col in ("when (UTC)", "who", "via", "action"):
        table.add_column(col, no_wrap=col not in ("who", "via"))
    table.add_column("detail", overflow="fold")
    for e in events:
        detail = event_detail(e)
        acting_for = e.detail.get("acting_for")
        who = f"operator {e.actor_id} for {acting_for}" if acting_for else (e.person or e.actor_name or e.actor_id)
        table.add_row(when(e.created_at), escape(who), escape(f"{e.channel} {e.actor_id}"), e.action, escape(detail))
    return table


def drive_summary(result: DriveResult) -> str:
    """What a command that executed a run prints of it: ``run R: ran a, b; now waiting``; a failed run's error
    follows, cut at ``ERROR_SHOWN_CHARS`` characters (``store.models.shown_error``: how many more there are, and
    ``hazel show R --full``, which prints them)."""
    run = result.run
    if run is None:
        return ""
    parts = []
    if result.steps:
        parts.append("ran " + escape(", ".join(result.steps)))
    if run.status.value == "ready" and run.lease_owner is None and run.wake_at is None and not result.steps:
        parts.append("queued for a worker")
    elif run.status.value == "running":
        parts.append(f"continuing in another worker ({escape(str(run.lease_owner))})")
    else:
        parts.append(f"now {status(run.status.value)}")
    if run.status.value == "failed" and run.error:  # (its further lines indented; megabytes cut short)
        error = shown_error(run.error, run_id=run.id, command=command_prefix())
        parts.append(escape(indented(for_terminal(error))))
    return f"run {run.id}: " + "; ".join(parts)
