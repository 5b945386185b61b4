"""Jira texts: issue summary and description, outcome, progress and reminder comments (Jira wiki markup, the
format of REST API v2 text fields on Cloud and Server; see "Text formatting notation" in Jira's help).

Jira holds at most 32,767 characters per text field; long artefacts are cut at ``max_chars`` with a note
pointing at ``hazel show RUN --full``.
"""

from __future__ import annotations

import json
from typing import Any

from integrations.jira.options import JiraOptions
from store.models import Approvers, Decision, ProgressView, RequestStatus, RequestView, past_tense

MAX_TEXT_CHARS = 30_000
"""Characters of artefact Hazel puts in one description (Jira's limit per field is 32,767)."""
FIELD_CHARS = 32_767
"""Jira's limit for a text field (description, comment body)."""
SUMMARY_CHARS = 255
"""Jira's limit for an issue summary."""


def mention(user: str, *, cloud: bool) -> str:
    """A mention that notifies ``user``: ``[~accountid:ID]`` on Cloud, ``[~name]`` on Server."""
    return f"[~accountid:{user}]" if cloud else f"[~{user}]"


def who_may(approvers: Approvers, *, cloud: bool) -> str:
    """The people and the Jira users and groups of ``approvers``, e.g. ``priya, [~accountid:…], members of
    dba``; ``anyone`` when the list is empty; other channels' approvers are named as such."""
    if approvers.empty:
        return "anyone"
    parts = [_escape(p) for p in approvers.people]
    parts += [mention(u, cloud=cloud) for u in approvers.jira_users]
    parts += [f"members of {g}" for g in approvers.jira_groups]
    if approvers.users or approvers.slack_users or approvers.slack_usergroups:
        parts.append("approvers on the other channels (CLI, Slack)")
    return ", ".join(parts)


def summary(view: RequestView) -> str:
    """``<title> (run <id>)`` on one line, at most 255 characters."""
    text = " ".join(f"{view.title} (run {view.run.id})".split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _escape(text: str) -> str:
    return text.replace("{noformat}", "\\{noformat}")


def _block(text: str) -> str:
    return "{noformat}\n" + text + "\n{noformat}"


def artefact(value: Any, *, max_chars: int = MAX_TEXT_CHARS, run_id: str = "RUN") -> str:
    """The shown value as wiki markup: text as preformatted text, a mapping of texts (e.g. file name -> SQL)
    as one block per entry under its name, anything else as JSON; at most ``max_chars`` characters of
    markup plus a closing note when it had to be cut."""
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        entries: list[tuple[str | None, str]] = list(value.items())
    elif isinstance(value, str):
        entries = [(None, value)]
    else:
        entries = [(None, json.dumps(value, indent=2, ensure_ascii=False, default=str))]
    parts, used, cut = [], 0, False
    for name, body in entries:
        head = f"*{name}*\n" if name is not None else ""
        room = max_chars - used - len(head) - len(_block("")) - 1
        if room <= 0:
            cut = True
            break
        body = _escape(body)
        if len(body) > room:
            body, cut = body[:room], True
        parts.append(head + _block(body))
        used += len(parts[-1]) + 1
        if cut:
            break
    if cut:
        parts.append(f"_… cut at {max_chars:,} characters; the whole value: {{{{hazel show {run_id} --full}}}}_")
    return "\n".join(parts)


def how_to_answer(view: RequestView, opts: JiraOptions) -> list[str]:
    """One bullet per allowed action: the comment command, and the status that decides it."""
    lines = []
    if "feedback" in view.actions:
        lines.append("* Comment in plain words to give *feedback*: the agent revises and asks again here.")
    if "approve" in view.actions:
        lines.append("* {{/approve}} approves" + (f", as does moving the issue to *{opts.approve_status}*."
                                                   if opts.approve_status else "."))
    if "reject" in view.actions:
        lines.append("* {{/reject REASON}} rejects" + (
            f", as does moving the issue to *{opts.reject_status}* (a comment on the transition is the reason)."
            if opts.reject_status else "."))
    if "edit" in view.actions:
        what = view.show or "state"
        form = "the new text" if isinstance(view.shown_value, str) else "the new value as JSON"
        lines.append(f"* {{{{/edit}}}} followed by {form} replaces the {what} and approves it.")
    if "rewind" in view.actions:
        steps = sorted({c.next_step for c in view.checkpoints if c.next_step})
        lines.append("* {{/rewind STEP [feedback]}} goes back to an earlier step and runs again from there"
                     + (f" (steps: {', '.join(steps)}; or a checkpoint number)." if steps else "."))
    return lines


def description(view: RequestView, opts: JiraOptions, *, cloud: bool, max_chars: int = MAX_TEXT_CHARS) -> str:
    """The issue description: what is asked, the run's context, the artefact (at most ``max_chars``, and
    never more than fits in Jira's field), and how to answer."""
    r = view.request
    lines = [f"Hazel asks: *{view.title}*", "",
             f"*Run:* {view.run.id} · *Workflow:* {view.workflow} v{view.workflow_version} · *Step:* {view.point}"
             f" · *Started by:* {view.run.started_by} ({view.run.started_via})",
             f"*Who may decide:* {who_may(view.approvers, cloud=cloud)}"]
    if r.approvals_required > 1:
        lines.append(f"*Approvals needed:* {r.approvals_required} ({r.approvals} so far)")
    if r.due_at is not None:
        lines.append(f"*Due:* {r.due_at:%Y-%m-%d %H:%M} UTC")
    tail = ["", "h3. How to answer", *how_to_answer(view, opts), "",
            f"_Request #{r.id} of run {view.run.id}. From a terminal: {{{{hazel show {view.run.id}}}}}._"]
    frame = "\n".join([*lines, "", f"h3. {view.show or 'State'}", *tail])
    room = min(max_chars, FIELD_CHARS - len(frame) - 200)  # 200: the cut note and the line breaks
    return "\n".join([*lines, "", f"h3. {view.show or 'State'}",
                      artefact(view.shown_value, max_chars=room, run_id=view.run.id), *tail])


def _settling(view: RequestView) -> Decision | None:
    for d in reversed(view.decisions):
        if d.action.value == view.request.decided_action:
            return d
    return None


def outcome_comment(view: RequestView, *, note: str | None = None) -> str:
    """What happened to the request: a quorum vote, the decision that settled it, or its cancellation."""
    r = view.request
    if r.status is RequestStatus.PENDING:
        last = view.decisions[-1] if view.decisions else None
        by = f" from {last.label}" if last else ""
        text = f"Approval {r.approvals} of {r.approvals_required}{by}; waiting for " \
               f"{r.approvals_required - r.approvals} more."
    elif r.status is RequestStatus.CANCELLED:
        text = f"Cancelled by {r.decided_by or 'Hazel'}: nothing more to decide here."
    else:
        d = _settling(view)
        by = r.decided_by or (d.actor_name if d else None) or "someone"
        payload = d.payload if d else {}
        action = r.decided_action or ""
        head = f"{past_tense(action).capitalize()} by {by}"  # the one table of verbs (store.models)
        text = {
            "approve": f"(/) {head}.",
            "edit": f"(/) {head}: their version of the {view.show or 'state'} replaces the draft.",
            "reject": f"(x) {head}: {payload.get('reason', '')}",
            "feedback": f"{head}: the agent is revising, and the new version comes back for review.",
            "rewind": f"{head} to checkpoint #{payload.get('to', '?')}"
                      + (f" with feedback: {payload['feedback']}" if payload.get("feedback") else "."),
        }.get(action, f"{head}.")
    return text + (f"\n\n{note}" if note else "")


def progress_comment(view: ProgressView) -> str:
    """The run's progress since this issue's request: steps done, what it waits on now, or how it ended."""
    run, facts = view.run.id, view.facts
    steps = f" after {', '.join(view.steps)}" if view.steps else ""
    if view.event == "waiting":
        nxt = view.next_request
        where = f"*{nxt.title}* ({nxt.channel})" if nxt is not None else "the next steering point"
        done = f"Done: {', '.join(view.steps)}. " if view.steps else ""
        return f"Run {run}: {done}Now waiting at {where}."
    if view.event == "completed":
        return f"(/) Run {run} completed{steps}."
    if view.event == "failed":
        error = " ".join(str(facts.get("error") or "unknown error").split())[:1000]
        at = f" at step {facts['step']}" if facts.get("step") else ""
        return f"(!) Run {run} failed{at}: {error}\nRetry it with {{{{hazel retry {run}}}}}."
    reason = f": {facts['reason']}" if facts.get("reason") else ""
    by = f" by {facts['by']}" if facts.get("by") else ""
    return f"Run {run} ended {view.event}{by}{reason}."


def reminder_comment(view: RequestView, *, cloud: bool) -> str:
    """A reminder to the approvers, or the notice that backup approvers may now decide (escalation)."""
    if view.escalation and view.escalate_to is not None:
        return (f"(!) Escalated: {who_may(view.escalate_to, cloud=cloud)} may now decide as well. "
                f"This request has waited since {view.request.created_at:%Y-%m-%d %H:%M} UTC.")
    return (f"Reminder: this request is still waiting for {who_may(view.approvers, cloud=cloud)} "
            f"(since {view.request.created_at:%Y-%m-%d %H:%M} UTC).")


def revised_comment(view: RequestView) -> str:
    """Posted when a later request of the same run and steering point reuses this issue."""
    return (f"A new version is ready for review (request #{view.request.id}): the description shows it. "
            "Answer as before.")
