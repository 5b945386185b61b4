"""The console channel: steering requests printed to a terminal (or a server log), answered with the CLI."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from integrations.base import Channel
from integrations.terminal import SafeConsole, for_terminal, indented
from store.models import Approvers, ProgressView, RequestStatus, RequestView, past_tense, person_label, plain_mentions
from store.models import shown_error


def render_value(value: Any) -> str:
    """The shown artefact as plain text: strings as they are, mappings of strings as sections, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return "\n\n".join(f"── {k} ──\n{v}" for k, v in value.items())
    return json.dumps(value, indent=2, ensure_ascii=False)


def utc_text(ts: datetime) -> str:
    """``2026-01-05 10:00:37 UTC``: ``ts`` (timezone-aware) in UTC, to the second, as the CLI prints times."""
    return (ts.astimezone(timezone.utc) if ts.tzinfo else ts).isoformat(" ", "seconds")[:19] + " UTC"


def waiting_text(waiting: Approvers) -> str:
    """Who a reminder still waits for (``RequestView.waiting_for``), plain: the approvers left, or for a point
    open to anyone (``Approvers()``) ``anyone allowed to decide it`` (not those whose vote is in, nor the
    starter where self-approval is off)."""
    return "anyone allowed to decide it" if waiting.empty else plain_mentions(waiting.describe())


def answer_commands(view: RequestView, command: str) -> list[str]:
    """The exact CLI commands that answer ``view``'s request. Each names the steering point (``--at``) and the
    request (``--request N``, its id: this version of the artefact), so a command typed twice, after someone
    else decided, or after the point asked again (a redraft after feedback), is refused with who decided and
    when, instead of answering a request its reader never saw. ``command``: how the reader invokes the CLI."""
    run, at = view.run.id, f"--at {shlex.quote(view.point)} --request {view.request.id}"
    out = []
    for action in view.actions:
        if action == "approve":
            out.append(f"{command} approve {run} {at}")
        elif action == "edit":
            field = view.show or "state"
            if view.show is None:  # the whole state: its JSON, edited whole, or a field at a time (s30 F1: it
                # printed ``--set state=JSON (or --set state.KEY=@file)``, which the CLI refuses: no field state)
                out.append(f"{command} show {run} --raw --at {shlex.quote(view.point)} > state.json   "
                           "# change it, then:")
                out.append(f"{command} edit {run} {at} --file state.json   (or --set FIELD=VALUE, field by field)")
            elif isinstance(view.shown_value, str):
                out.append(f"{command} show {run} --raw --at {shlex.quote(view.point)} > {field}.txt   "
                           "# change it, then:")
                out.append(f"{command} edit {run} {at} --file {field}.txt")
            elif isinstance(view.shown_value, dict):  # a mapping: its entries can be set one by one
                out.append(f"{command} edit {run} {at} --set {field}=JSON   (or --set {field}.KEY=@file)")
            else:
                out.append(f"{command} edit {run} {at} --set {field}=JSON")
        elif action == "reject":
            out.append(f"{command} reject {run} {at} --reason {shlex.quote('why')}")
        elif action == "feedback":
            out.append(f"{command} feedback {run} {at} {shlex.quote('what to change')}")
        elif action == "rewind":
            out.append(f"{command} rewind {run} --to STEP_OR_SEQ --request {view.request.id} [--feedback TEXT]   "
                       f"(steps: {command} history {run})")
    return out


class ConsoleChannel(Channel):
    """Prints to ``console`` (a rich Console; by default a ``SafeConsole`` of stdout, which shows stored
    control characters as escapes, see ``integrations.terminal``). ``command`` is how the reader invokes the CLI
    (``hazel`` or a path such as ``.venv/bin/hazel``), used in the printed answer commands."""

    name = "console"

    def __init__(self, *, console: Console | None = None, command: str = "hazel", max_chars: int = 4000) -> None:
        self.console = console or SafeConsole()
        self.command = command
        self.max_chars = max_chars

    def open_request(self, view: RequestView) -> dict[str, Any] | None:
        if view.request.status is not RequestStatus.PENDING:  # delivered late (its first delivery failed: a closed
            # stdout, a crash): one line, never a panel offering commands for a request answered since (s25 F4)
            self.console.print(Text(for_terminal(self.stale_text(view), one_line=True), style="dim"))
            return {"console": True}
        note = self.request_note(view)
        text = Text(for_terminal("\n".join(note.facts)) + "\n\n", style="dim")
        text.append(note.shown + ":\n", style="bold")
        text.append(for_terminal(note.body))
        title = Text(for_terminal(note.heading, one_line=True))
        self.console.print(Panel(text, title=title, title_align="left", border_style="yellow"))
        if note.commands is None:  # no command would be taken: say what can still move it
            self.console.print(Text(for_terminal(note.nobody_left, one_line=True)))
            return {"console": True}
        self.console.print(Text("Answer with:", style="bold"))
        for command in note.commands:  # never wrapped, so they can be copied whole
            self.console.print(Text("  " + for_terminal(command, one_line=True)), soft_wrap=True)
        return {"console": True}

    def request_note(self, view: RequestView) -> "RequestNote":
        """What ``open_request`` shows of ``view``, as plain text (no markup, no wrapping, no escapes)."""
        kind = "Escalated" if view.escalation else "Reminder" if view.reminder else "Steering request"
        body = render_value(view.shown_value)
        if len(body) > self.max_chars:
            body = body[: self.max_chars] + f"\n… ({len(body) - self.max_chars} more characters: {self.command} " \
                                            f"show {view.run.id} --full)"
        lines = [f"{view.workflow} v{view.workflow_version} · run {view.run.id} · step {view.point}",
                 f"started by {person_label(view.run.started_by_person, None, view.run.started_by)} · "
                 f"approvers: {plain_mentions(view.approvers.describe())}"]
        if view.escalation:  # (as Slack's and Jira's notices say: who may decide now)
            lines.append(f"escalated to: {plain_mentions((view.escalate_to or view.approvers).describe())}")
        if view.reminder and view.nobody_left:  # (as Slack's reminder says: every approver voted, or may not)
            lines.append("none of its approvers can decide it any more")
        elif view.reminder:  # (None: not known here; then its approvers)
            waiting = view.waiting_for if view.waiting_for is not None else view.approvers
            lines.append(f"still waits for: {waiting_text(waiting)}")
        if view.request.approvals_required > 1:
            lines.append(f"needs {view.request.approvals_required} approvals ({view.request.approvals} so far)")
        if view.request.due_at:
            lines.append(f"due {utc_text(view.request.due_at)}")
        if view.request.channel != "console":
            lines.append(f"(meant for {view.request.channel}; shown here because that channel is not configured)")
        nobody = view.reminder and view.nobody_left
        return RequestNote(
            kind="escalation" if view.escalation else "reminder" if view.reminder else "steering_request",
            heading=f"{kind}: {view.title}", facts=lines, shown=view.show or "state", body=body,
            commands=None if nobody else answer_commands(view, self.command),
            nobody_left=f"nobody left to decide: rewind, cancel or reconfigure the point ({self.command} cancel "
                        f"{view.run.id})" if nobody else "")

    @staticmethod
    def stale_text(view: RequestView) -> str:
        """``run ID: 'TITLE' asked (request 17), no longer pending: approved by olga``: a steering request whose
        notice is delivered after the request was settled."""
        r = view.request
        by = f" by {r.decided_by}" if r.decided_by else ""
        return (f"run {view.run.id}: {view.title!r} asked (request {r.id}), no longer pending: "
                f"{past_tense(r.settled_action)}{by}")

    def update_request(self, view: RequestView) -> None:
        self.console.print(Text(for_terminal(self.update_text(view)), style="dim"))

    @staticmethod
    def update_text(view: RequestView) -> str:
        """``run ID: 1/2 approvals at 'TITLE': NAME approved`` (a vote, ``view.vote``, as it was counted, even
        when delivered after the request settled) or ``run ID: 'TITLE' approved by NAME`` (settled)."""
        r = view.request
        if view.vote is not None:
            v = view.vote
            return f"run {view.run.id}: {v.approvals}/{v.required} approvals at {view.title!r}: {v.by} approved"
        if r.status.value == "pending":  # (a vote queued before votes carried what they say)
            return f"run {view.run.id}: {r.approvals}/{r.approvals_required} approvals at {view.title!r}"
        # (past_tense: the one table of verbs)
        return f"run {view.run.id}: {view.title!r} {past_tense(r.settled_action)} by {r.decided_by or 'Hazel'}"

    def progress(self, view: ProgressView) -> None:
        if view.event == "waiting":
            return  # the new request prints itself
        style = {"completed": "green", "failed": "red", "rejected": "red", "cancelled": "yellow"}.get(view.event, "")
        extra = progress_extra(view, command=self.command)
        line = Text(f"run {view.run.id} {view.event}", style=style)
        if extra:  # (a multi-line error's further lines indented: none passes for a line of its own)
            line.append(indented(for_terminal(f": {extra}")))
        self.console.print(line)


def progress_extra(view: ProgressView, *, command: str = "hazel") -> str:
    """What follows ``run ID EVENT`` in a progress line: the run's error (cut at ``ERROR_SHOWN_CHARS``
    characters, saying how many more and where it is whole: ``store.models.shown_error``; ``command``: how the
    reader invokes the CLI) or the reason it was ended, or ``""``."""
    error = view.facts.get("error")
    if error:
        return shown_error(str(error), run_id=view.run.id, command=command)
    return str(view.facts.get("reason") or "")


@dataclass(frozen=True)
class RequestNote:
    """A steering request as the console shows it, in plain text: ``kind`` (``steering_request``,
    ``reminder``, ``escalation``), ``heading`` (``Reminder: TITLE``), ``facts`` (lines: workflow, run, step,
    approvers, due time …), ``shown`` (the shown field's name, ``state`` for the whole state) and ``body`` (its
    value, cut at ``max_chars``), ``commands`` (the CLI commands that answer it; None when nobody is left to
    decide it, then ``nobody_left`` says what can still move it)."""

    kind: str
    heading: str
    facts: list[str]
    shown: str
    body: str
    commands: list[str] | None
    nobody_left: str

    def plain(self) -> str:
        """The whole notification as plain text, lines separated by ``\n``."""
        tail = [self.nobody_left] if self.commands is None else ["Answer with:", *("  " + c for c in self.commands)]
        return "\n".join([self.heading, *self.facts, "", f"{self.shown}:", self.body, "", *tail])
