"""Block Kit for steering requests: the request message (and its state after a decision), thread replies,
reminders, and the App Home tab.

Slack limits respected here (https://docs.slack.dev/reference/block-kit/blocks and the pages of each block
and element): 50 blocks per message and 100 per Home tab; 3000 characters per section text; 150 per header;
75 per button text and 2000 per button value; 10 elements per context block; confirm dialog title 100, text
300, buttons 30. Slack also refuses a message whose blocks hold more than about 13,000 characters in all
(``msg_blocks_too_long``, observed and reported in slackapi/bolt-js#2509), so an artefact is shown inline up to
``INLINE_ARTEFACT_CHARS`` and otherwise previewed and attached whole as a file (see ``SlackChannel``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from integrations.slack import text as T
from store.models import (Approvers, Decision, ProgressView, RequestView, Run, SteeringRequest, past_tense,
                          person_label, still_waiting_text)

MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_SECTION_CHARS = 3000
MAX_HEADER_CHARS = 150
MAX_BUTTON_TEXT_CHARS = 75
MAX_CONTEXT_ELEMENTS = 10
INLINE_ARTEFACT_SECTIONS = 3
"""Sections of at most 3000 characters shown inline (9,000 characters, well under the ~13,000 in all)."""
PREVIEW_CHARS = 2500
"""Characters of an artefact previewed in the message when the whole of it goes into a file."""

ACTION_PREFIX = "hazel_"
"""Button ``action_id`` = ``hazel_<action>`` (approve, edit, reject, feedback, rewind); value =
``<run id>:<request id>`` (``button_value``)."""
MAX_BUTTON_VALUE_CHARS = 2000
RUN_ID = re.compile(r"[0-9A-Za-z_-]{1,32}")
"""What a run id a button or a modal names may look like (Hazel's are 12 hex characters; ``runs.id`` holds 32)."""
_BUTTON_VALUE = re.compile(rf"(?:({RUN_ID.pattern}):)?([0-9]{{1,100}})")
"""A button value Hazel writes: ``<run id>:<request id>``, or the request id alone (a card an older Hazel
posted: ``ButtonValue.run_id`` None)."""
BUTTON_LABELS = {"approve": "Approve", "edit": "Edit", "reject": "Reject", "feedback": "Feedback",
                 "rewind": "Rewind"}
OUTCOME_EMOJI = {"approve": "✅", "edit": "✏️", "reject": "⛔", "feedback": "💬", "rewind": "↩️", "cancel": "🚫"}


def outcome(action: str) -> str:
    """"✅ Approved": the emoji and the word of ``store.models.PAST_TENSE`` (the one table of verbs)."""
    return f"{OUTCOME_EMOJI.get(action, '•')} {past_tense(action).capitalize()}"


# -- small pieces ---------------------------------------------------------------------------------------------

def plain_text(text: str, limit: int) -> dict[str, Any]:
    """A ``plain_text`` object cut to ``limit`` characters (never empty: Slack refuses empty texts), with
    ``"emoji": false``: most are built from a workflow's or a person's words (a title, a field or step name, a
    value), whose ``:shortcode:`` stays as written instead of becoming an emoji. Hazel's own words use Unicode
    emoji, which Slack shows either way (https://docs.slack.dev/reference/block-kit/composition-objects/text-object)."""
    return {"type": "plain_text", "text": T.truncate(text, limit) or " ", "emoji": False}


def mrkdwn(text: str, limit: int = MAX_SECTION_CHARS) -> dict[str, Any]:
    """A ``mrkdwn`` object cut to ``limit`` characters (never empty)."""
    return {"type": "mrkdwn", "text": T.truncate(text, limit) or " "}


def section(text: str) -> dict[str, Any]:
    """A section block with mrkdwn ``text`` (cut to 3000 characters)."""
    return {"type": "section", "text": mrkdwn(text)}


def context(*texts: str) -> dict[str, Any]:
    """A context block of up to 10 mrkdwn elements (empty texts are left out)."""
    return {"type": "context", "elements": [mrkdwn(t) for t in texts[:MAX_CONTEXT_ELEMENTS] if t]}


def date(ts: datetime | None, fmt: str = "{date_short_pretty} {time}") -> str:
    """A time Slack shows in each reader's own time zone (``<!date^epoch^format|fallback>``,
    https://docs.slack.dev/messaging/formatting-message-text#date-formatting)."""
    if ts is None:
        return "earlier"
    return f"<!date^{int(ts.timestamp())}^{fmt}|{ts:%Y-%m-%d %H:%M} UTC>"


_SLACK_ID = re.compile(r"[A-Z0-9]{2,32}")
"""What a Slack user, user group or conversation id looks like (``U0123ABCD``, ``S…``, ``C…``): only such an id
is ever put inside ``<…>``; anything else is escaped text, so a stored value can never become a mention."""


def slack_id(value: str | None) -> bool:
    """Whether ``value`` is shaped like a Slack id (upper-case letters and digits)."""
    return bool(value) and _SLACK_ID.fullmatch(value) is not None  # type: ignore[arg-type]


def person(actor_id: str | None, channel: str | None, name: str | None = None) -> str:
    """A mention for a Slack user (``<@U…>``), else the escaped name (or id)."""
    if channel == "slack" and slack_id(actor_id):
        return f"<@{actor_id}>"
    return T.escape(name or actor_id or "someone")


def who_decided(d: Decision) -> str:
    """Who took decision ``d``, as a mention when they decided in Slack ("operator X for NAME" for a console
    proxy)."""
    return person(d.actor_id, d.channel, d.label)


def approvers_text(approvers: Approvers) -> str:
    """People by name, Slack users and user groups as mentions (``<@U…>``, ``<!subteam^S…>``), other names
    escaped; ``anyone`` when nobody is listed."""
    parts = [T.escape(p) for p in approvers.people]
    parts += [f"<@{u}>" if slack_id(u) else T.escape(u) for u in approvers.slack_users]
    parts += [f"<!subteam^{g}>" if slack_id(g) else T.escape(g) for g in approvers.slack_usergroups]
    parts += [T.escape(u) for u in approvers.users if u not in approvers.people]
    return ", ".join(dict.fromkeys(parts)) if parts else "anyone"


def mentions(*lists: Approvers | None) -> list[str]:
    """The mentions ``approvers_text`` writes for ``lists`` (``<@U…>``, ``<!subteam^S…>``): the ones an
    engine message naming these approvers may keep (``text.escape_keeping``)."""
    out: list[str] = []
    for approvers in lists:
        if approvers is not None:
            out += [f"<@{u}>" for u in approvers.slack_users if slack_id(u)]
            out += [f"<!subteam^{g}>" for g in approvers.slack_usergroups if slack_id(g)]
    return out


def channel_ref(channel: str) -> str:
    """``slack:C123`` as a channel link, ``slack:#name`` as ``#name``, other channels as they are."""
    kind, _, where = channel.partition(":")
    if kind == "slack" and slack_id(where):
        return f"<#{where}>"
    return T.escape(where or channel) if kind == "slack" else T.escape(channel)


def started_by(run: Run) -> str:
    """Who started ``run``: a mention when they started it from Slack, else the person (``person_label``: the
    people file's name for a REST token or console name, as ``hazel show`` says)."""
    return person(run.started_by, run.started_via, person_label(run.started_by_person, None, run.started_by))


@dataclass(frozen=True)
class ButtonValue:
    """What a decision button's ``value`` names: the request, and the run it belongs to (None on a card posted by
    an older Hazel, whose buttons named the request only)."""

    run_id: str | None
    request_id: int


def button_value(run_id: str, request_id: int) -> str:
    """The ``value`` of a button acting on request ``request_id`` of run ``run_id``: ``<run id>:<request id>``
    (at most 43 characters: a run id has at most 32, a request id at most 10 digits; Slack allows
    ``MAX_BUTTON_VALUE_CHARS``). Request ids start again after a database reset and go back after a restore,
    while the cards posted before keep their buttons: the run says which request a click is for."""
    value = f"{run_id}:{request_id}"
    if _BUTTON_VALUE.fullmatch(value) is None or len(value) > MAX_BUTTON_VALUE_CHARS:
        raise ValueError(f"not a run id and a request id: {value[:80]!r}")
    return value


def read_button_value(value: Any) -> ButtonValue | None:
    """The run and the request a button's ``value`` names (``button_value``; a bare request id from an older
    Hazel's card: ``run_id`` None), or None when it is not a value Hazel writes: ASCII only, digits only for the
    request id (``int()`` would also take ``" 6"``, ``"+6"``, ``"6_0"`` and ``"６"``)."""
    if not isinstance(value, str) or not value.isascii():
        return None
    match = _BUTTON_VALUE.fullmatch(value)
    if match is None:
        return None
    return ButtonValue(run_id=match.group(1), request_id=int(match.group(2)))


def button(action: str, run_id: str, request_id: int, *, label: str | None = None) -> dict[str, Any]:
    """A decision button: ``action_id`` ``hazel_<action>``, value the run and the request (``button_value``).
    Approve is primary, Reject is danger behind a confirm dialog
    (https://docs.slack.dev/reference/block-kit/composition-objects/confirmation-dialog-object)."""
    b: dict[str, Any] = {"type": "button", "action_id": ACTION_PREFIX + action,
                         "value": button_value(run_id, request_id),
                         "text": plain_text(label or BUTTON_LABELS.get(action, action.title()), MAX_BUTTON_TEXT_CHARS)}
    if action == "approve":
        b["style"] = "primary"
    if action == "reject":
        b["style"] = "danger"
        b["confirm"] = {"title": plain_text("Reject this request?", 100),
                        "text": plain_text("You will be asked for the reason next. Unless the workflow routes "
                                           "rejections elsewhere, the run ends as rejected.", 300),
                        "confirm": plain_text("Reject", 30), "deny": plain_text("Keep it", 30), "style": "danger"}
    return b


def actions_block(actions: tuple[str, ...] | list[str], run_id: str, request_id: int) -> dict[str, Any]:
    """The decision buttons for ``actions`` (in that order) of request ``request_id`` of run ``run_id``."""
    return {"type": "actions", "block_id": f"hazel_actions_{request_id}",
            "elements": [button(a, run_id, request_id) for a in actions if a in BUTTON_LABELS]}


# -- the request message --------------------------------------------------------------------------------------

def header_blocks(view: RequestView) -> list[dict[str, Any]]:
    """The header (title) and the context lines (workflow, step, run, who started it, due, approvers)."""
    r = view.request
    facts = [f"*{T.escape(view.workflow)}* v{view.workflow_version}", f"step `{T.escape(view.point)}`",
             f"run `{view.run.id}`", f"started by {started_by(view.run)}"]
    if r.due_at:
        facts.append(f"due {date(r.due_at)}")
    who = f"Approvers: {approvers_text(view.not_starter or view.approvers)}"  # (not who may not: s28 F4)
    if r.escalated_at is not None and view.escalate_to is not None:  # (s23 F1: the backup was never named)
        who += f" · escalated {date(r.escalated_at)} to {approvers_text(view.escalate_to)}"
    if r.approvals_required > 1:
        who += f" · needs {r.approvals_required} approvals"
    kind = "⚠️ Escalated: " if view.escalation else "⏰ Reminder: " if view.reminder else ""
    return [{"type": "header", "text": plain_text(kind + view.title, MAX_HEADER_CHARS)},
            context(" · ".join(facts), who)]


def artefact(view: RequestView, *, file_where: str = "in this message's thread") -> tuple[list[dict[str, Any]], bool]:
    """The shown value as sections, and whether it was too long to show whole (then the caller attaches it
    as a file ``file_where`` and the sections hold a preview)."""
    label = f"`{T.escape(view.show)}`" if view.show else "the run's state"
    value = view.shown_value
    if value is None or value == "" or value == {}:
        return [section(f"{label}: _(empty)_")], False
    pieces = T.chunks(value, MAX_SECTION_CHARS)
    if len(pieces) <= INLINE_ARTEFACT_SECTIONS:
        return [section(p) for p in pieces], False
    total = len(T.plain(value))
    preview = T.chunks(value, PREVIEW_CHARS)[0]
    return [section(preview), context(f"Showing the start of {label} ({total:,} characters in all). The whole "
                                      f"of it is attached as a file {file_where}.")], True


def decision_summary(view: RequestView) -> str | None:
    """What happened to the request: the outcome with who and when, or the quorum votes so far."""
    r = view.request
    votes = [d for d in view.decisions if d.action.value == "approve"]
    if r.status.value == "pending":
        if not votes:
            return None
        return (f"{len(votes)} of {r.approvals_required} approvals so far: "
                + ", ".join(f"{who_decided(d)} ({date(d.created_at, '{time}')})" for d in votes))
    action = r.decided_action or r.status.value
    settling = next((d for d in reversed(view.decisions) if d.action.value == action), None)
    who = who_decided(settling) if settling else person(view.settled_by_id, view.settled_by_channel,
                                                         r.decided_by or "Hazel")
    line = f"{outcome(action)} by {who} · {date(r.decided_at)}"
    if r.approvals_required > 1 and action == "approve":
        line += " · " + ", ".join(who_decided(d) for d in votes)
    detail = (settling.payload.get("reason") or settling.payload.get("text") or settling.payload.get("feedback")
              if settling else None)
    if detail:
        line += "\n>" + T.truncate(T.escape(str(detail)), 1500).replace("\n", "\n>")
    if action == "rewind" and settling is not None and settling.payload.get("to") is not None:
        line += f"\nto checkpoint #{settling.payload['to']}"
    if view.still_pending:  # the run waits on the other requests asked with this one
        line += f"\n⏳ The run is {T.escape(still_waiting_text(view.still_pending))}."
    return line


def request_message(view: RequestView, *, file_where: str = "in this message's thread",
                    link: str | None = None) -> tuple[str, list[dict[str, Any]], bool]:
    """``(fallback text, blocks, needs a file)`` for the request as it is now: buttons while it is pending
    (only the point's actions), the outcome instead once decided or cancelled. The fallback is the message's
    top-level ``text`` (notifications), which Slack reads as mrkdwn too: it is escaped like the blocks.
    ``link``: the run page's signed "View run" URL, in a context block at the end (none: no link)."""
    blocks = header_blocks(view)
    body, needs_file = artefact(view, file_where=file_where)
    blocks += body
    summary = decision_summary(view)
    if summary:
        blocks.append(section(summary))
    if view.request.status.value == "pending":
        blocks.append(actions_block(view.actions, view.run.id, view.request.id))
    if link:
        blocks.append(context(f"<{link}|View run> · the checkpoint tree, diffs and audit log"))
    title = T.escape(view.title)
    fallback = f"{title}: {T.escape(view.workflow)} run {view.run.id} waits for a decision"
    if view.request.status.value != "pending" and summary:
        fallback = f"{title}: {summary.splitlines()[0]}"
    return fallback, blocks[:MAX_MESSAGE_BLOCKS], needs_file


def file_name(view: RequestView) -> str:
    """The name of the file an over-long artefact is attached as: ``<run>-<field>.md|txt|json``."""
    ext = "md" if isinstance(view.shown_value, str) else "txt" if isinstance(view.shown_value, dict) else "json"
    return f"{view.run.id}-{view.show or 'state'}.{ext}"


def reminder_text(view: RequestView) -> str:
    """A reminder (or escalation notice) posted in the request's thread and to approvers."""
    if view.escalation:
        extra = approvers_text(view.escalate_to) if view.escalate_to else approvers_text(view.approvers)
        return (f"⚠️ *{T.escape(view.title)}* (run `{view.run.id}`) has waited too long and is escalated to "
                f"{extra}.")
    title = f"⏰ Reminder: *{T.escape(view.title)}* (run `{view.run.id}`)"
    if view.nobody_left:  # every approver has voted, or may not (self-approval): nobody left to ask
        return f"{title} still waits, but none of its approvers can decide it any more."
    return f"{title} still waits for {approvers_text(view.waiting_for or view.approvers)}."


def progress_text(view: ProgressView) -> str:
    """A thread reply about the run: steps done, the next request, completion, failure, rejection."""
    run = view.run
    steps = ", ".join(f"`{T.escape(s)}`" for s in view.steps)
    done = f"Ran {steps}. " if steps else ""
    if view.paused:  # (LangGraph nodes that stopped at an interrupt: they did not finish)
        done += f"Paused to ask for steering: {', '.join(f'`{T.escape(s)}`' for s in view.paused)}. "
    facts = view.facts
    if view.event == "waiting" and view.next_request is not None:
        nxt = view.next_request
        return f"{done}Run `{run.id}` now waits at *{T.escape(nxt.title)}* in {channel_ref(nxt.channel)}."
    if view.event == "completed":
        return f"{done}✅ Run `{run.id}` of {T.escape(view.workflow)} completed."
    if view.event == "failed":
        where = f" at `{T.escape(str(facts['step']))}`" if facts.get("step") else ""
        error = T.truncate(T.escape(str(facts.get("error") or run.error or "unknown error")), 1500)
        return f"{done}❌ Run `{run.id}` failed{where}: {error}\nAn approver can `/hazel retry {run.id}`."
    if view.event in ("rejected", "cancelled"):
        by = person(facts.get("by_id"), facts.get("by_channel"), str(facts.get("by") or "someone"))
        reason = facts.get("reason")
        return (f"{'⛔' if view.event == 'rejected' else '🚫'} Run `{run.id}` {view.event} by {by}"
                + (f": {T.truncate(T.escape(str(reason)), 1500)}" if reason else "."))
    return f"{done}Run `{run.id}` is {T.escape(run.status.value)}."


# -- App Home -------------------------------------------------------------------------------------------------

STATUS_EMOJI = {"waiting": "⏸️", "ready": "▶️", "running": "▶️", "completed": "✅", "failed": "❌",
                "rejected": "⛔", "cancelled": "🚫"}
HOME_REQUEST_BLOCKS = 4
HOME_PREVIEW_CHARS = 600


def home_request(view: RequestView) -> list[dict[str, Any]]:
    """One waiting request in the Home tab: what, where, since when, a preview, the same buttons."""
    pieces = T.chunks(view.shown_value, HOME_PREVIEW_CHARS) if view.shown_value not in (None, "", {}) else []
    preview = pieces[0] + ("\n…" if len(pieces) > 1 else "") if pieces else "_(empty)_"
    r = view.request
    return [
        section(f"*{T.escape(view.title)}* · {T.escape(view.workflow)} run `{view.run.id}` · "
                f"{channel_ref(r.channel)}"),
        context(f"waiting since {date(r.created_at)}", f"started by {started_by(view.run)}",
                *([f"due {date(r.due_at)}"] if r.due_at else []),
                *([f"{r.approvals} of {r.approvals_required} approvals"] if r.approvals_required > 1 else [])),
        section(preview),
        actions_block(view.actions, view.run.id, r.id),
    ]


def home_view(waiting: list[RequestView], recent: list[tuple[Run, SteeringRequest | None]], *,
              notice: str | None = None) -> dict[str, Any]:
    """The Home tab (``views.publish``): an optional notice, "Waiting on you" (oldest first, with buttons) and
    "Recent runs". Stays within 100 blocks: requests that do not fit are counted, not shown."""
    blocks: list[dict[str, Any]] = []
    if notice:
        blocks.append(section(notice))
    blocks.append({"type": "header", "text": plain_text(f"Waiting on you ({len(waiting)})", MAX_HEADER_CHARS)})
    room = MAX_VIEW_BLOCKS - len(blocks) - 3 - min(len(recent), 20) - 2
    shown = 0
    for view in waiting:
        if room < HOME_REQUEST_BLOCKS + 1:
            break
        blocks += home_request(view) + [{"type": "divider"}]
        room -= HOME_REQUEST_BLOCKS + 1
        shown += 1
    if not waiting:
        blocks.append(section("Nothing is waiting on you. :tada:"))
    elif shown < len(waiting):
        blocks.append(context(f"…and {len(waiting) - shown} more: `/hazel runs` lists them all."))
    blocks.append({"type": "header", "text": plain_text("Recent runs", MAX_HEADER_CHARS)})
    lines = []
    for run, pending in recent[:20]:
        at = f" at *{T.escape(pending.title)}*" if pending else ""
        lines.append(f"{STATUS_EMOJI.get(run.status.value, '')} `{run.id}` {T.escape(run.workflow)} "
                     f"v{run.workflow_version} · {run.status.value}{at} · {date(run.updated_at)}")
    for text in T.pack([(line, False) for line in lines], MAX_SECTION_CHARS) or ["No runs yet."]:
        blocks.append(section(text))
    return {"type": "home", "blocks": blocks[:MAX_VIEW_BLOCKS]}
