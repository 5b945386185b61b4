"""The console channel: steering requests printed to a terminal (or a server log), answered with the CLI."""

from __future__ import annotations

import json
import shlex
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from integrations.base import Channel
from store.models import ProgressView, RequestView


def render_value(value: Any) -> str:
    """The shown artefact as plain text: strings as they are, mappings of strings as sections, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return "\n\n".join(f"── {k} ──\n{v}" for k, v in value.items())
    return json.dumps(value, indent=2, ensure_ascii=False)


def answer_commands(view: RequestView, command: str) -> list[str]:
    """The exact CLI commands that answer ``view``'s request."""
    run = view.run.id
    out = []
    for action in view.actions:
        if action == "approve":
            out.append(f"{command} approve {run}")
        elif action == "edit":
            field = view.show or "FIELD"
            out.append(f"{command} edit {run} --file {field}.txt" if isinstance(view.shown_value, str)
                       else f"{command} edit {run} --set {field}=JSON")
        elif action == "reject":
            out.append(f"{command} reject {run} --reason {shlex.quote('why')}")
        elif action == "feedback":
            out.append(f"{command} feedback {run} {shlex.quote('what to change')}")
        elif action == "rewind":
            out.append(f"{command} rewind {run} --to STEP_OR_SEQ [--feedback TEXT]   (see: {command} history {run})")
    return out


class ConsoleChannel(Channel):
    """Prints to ``console`` (a rich Console). ``command`` is how the reader invokes the CLI (``hazel`` or a
    path such as ``.venv/bin/hazel``), used in the printed answer commands."""

    name = "console"

    def __init__(self, *, console: Console | None = None, command: str = "hazel", max_chars: int = 4000) -> None:
        self.console = console or Console()
        self.command = command
        self.max_chars = max_chars

    def open_request(self, view: RequestView) -> dict[str, Any] | None:
        kind = "Escalated" if view.escalation else "Reminder" if view.reminder else "Steering request"
        body = render_value(view.shown_value)
        if len(body) > self.max_chars:
            body = body[: self.max_chars] + f"\n… ({len(body) - self.max_chars} more characters: {self.command} " \
                                            f"show {view.run.id} --full)"
        lines = [f"{view.workflow} v{view.workflow_version} · run {view.run.id} · step {view.point}",
                 f"started by {view.run.started_by} · approvers: {view.approvers.describe()}"]
        if view.request.approvals_required > 1:
            lines.append(f"needs {view.request.approvals_required} approvals ({view.request.approvals} so far)")
        if view.request.due_at:
            lines.append(f"due {view.request.due_at:%Y-%m-%d %H:%M UTC}")
        if view.request.channel != "console":
            lines.append(f"(meant for {view.request.channel}; shown here because that channel is not configured)")
        text = Text("\n".join(lines) + "\n\n", style="dim")
        text.append((view.show or "state") + ":\n", style="bold")
        text.append(body + "\n\n")
        text.append("Answer with:\n", style="bold")
        text.append("\n".join("  " + c for c in answer_commands(view, self.command)))
        self.console.print(Panel(text, title=f"{kind}: {view.title}", title_align="left", border_style="yellow"))
        return {"console": True}

    def update_request(self, view: RequestView) -> None:
        r = view.request
        if r.status.value == "pending":
            self.console.print(f"[dim]run {view.run.id}: {r.approvals}/{r.approvals_required} approvals at "
                               f"{view.title!r}[/dim]")
            return
        self.console.print(f"[dim]run {view.run.id}: {view.title!r} {r.decided_action or r.status.value} by "
                           f"{r.decided_by or 'Hazel'}[/dim]")

    def progress(self, view: ProgressView) -> None:
        if view.event == "waiting":
            return  # the new request prints itself
        style = {"completed": "green", "failed": "red", "rejected": "red", "cancelled": "yellow"}.get(view.event, "")
        extra = view.facts.get("error") or view.facts.get("reason") or ""
        self.console.print(f"[{style}]run {view.run.id} {view.event}[/{style}]" + (f": {extra}" if extra else ""))
