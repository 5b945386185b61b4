"""mrkdwn texts of Hazel's answers in Slack: "already decided by …", a run's line, its checkpoint tree.

Times are ``<!date^…>`` tokens, which Slack shows in each reader's own time zone; people who decided in Slack
are mentioned (``<@U…>``); every stored text is escaped (``text.escape``), never rendered as markup. A modal's
field error is plain text instead (``already_text(plain=True)``): names and UTC times.
"""

from __future__ import annotations

from datetime import datetime

from integrations.slack import blocks as B
from integrations.slack import text as T
from store.models import (REWIND_NODE, CheckpointInfo, Decision, Run, branch_heading, continuation,
                          node_label, past_tense, rewound_fields)


def already_text(*, action: str | None, by_id: str | None, by_channel: str | None, by_label: str | None,
                 at: datetime | None, own: bool = False, pending: bool = False, plain: bool = False) -> str:
    """"Already approved by @x at hh:mm" (the time in the reader's time zone); ``own``: the reader's own
    earlier vote, with the channel it came through and the rule (``pending``: the request still needs more
    approvals). ``plain``: as plain text (the person
    by name, the time in UTC), for a modal's field error: ``response_action: errors`` maps a block_id to a
    plain string, which Slack shows as typed, never as mrkdwn (https://docs.slack.dev/surfaces/modals,
    displaying errors), so a mention or a ``<!date^…>`` token would show as its raw markup."""
    when = plain_date(at) if plain else B.date(at, "{time}")
    who = plain_person(by_id, by_label) if plain else B.person(by_id, by_channel, by_label)
    if action == "cancel":
        return f"This request was cancelled by {who} at {when}."
    if own:  # the engine's rule, with the channel the earlier vote came through (as the audit log says it)
        tail = "; it still needs more approvals." if pending else "."
        return (f"You already {past_tense(action)} this request{through(by_channel, by_id, plain=plain)} at "
                f"{when}: one person has one vote, whichever channel they use{tail}")
    return f"Already {past_tense(action)} by {who} at {when}."


CHANNEL_NAMES = {"slack": "Slack", "api": "the API", "jira": "Jira", "console": "the CLI",
                 "web": "the run pages"}
"""How a vote's channel is named to the person who cast it (``through``)."""


def through(channel: str | None, identity: str | None, *, plain: bool = False) -> str:
    """`` through the API (sam-ci)``: the channel of an earlier vote and the identity used there (the REST
    token's name, a Jira account, a console name); `` through Slack`` alone for Slack (the reader is that
    identity); ``""`` when the channel is not known. ``plain``: not escaped (a modal's field error)."""
    if not channel:
        return ""
    name = CHANNEL_NAMES.get(channel, channel if plain else T.escape(channel))
    if channel == "slack" or not identity:
        return f" through {name}"
    return f" through {name} ({identity if plain else T.escape(identity)})"


def plain_date(at: datetime | None) -> str:
    """A time as plain text in UTC (``2026-12-02 01:05 UTC``; ``earlier`` when unknown), the fallback text
    of ``blocks.date``'s ``<!date^…>`` token."""
    return "earlier" if at is None else f"{at:%Y-%m-%d %H:%M} UTC"


def plain_person(actor_id: str | None, label: str | None) -> str:
    """Who decided as plain text: the name recorded with the decision, else the id (never a mention)."""
    return label or actor_id or "someone"


def run_line(run: Run) -> str:
    """One line about a run: status emoji, id, workflow, status, last change."""
    emoji = B.STATUS_EMOJI.get(run.status.value, "")
    return (f"{emoji} `{run.id}` {T.escape(run.workflow)} v{run.workflow_version} · *{run.status.value}* · "
            f"updated {B.date(run.updated_at)}")


def history_text(run: Run, checkpoints: list[CheckpointInfo], decisions: list[Decision], *,
                 max_chars: int | None = None) -> str:
    """The checkpoint tree as indented lines: a fork starts a deeper level for each branch. ``max_chars``: a
    longer tree keeps its first lines, the head's and the newest, whole lines only, and says how many lines it
    left out and where the whole tree is (``_fit``)."""
    by_decision = {d.id: d for d in decisions}
    children: dict[int | None, list[CheckpointInfo]] = {}
    for cp in checkpoints:
        children.setdefault(cp.parent_seq, []).append(cp)
    lines = [f"*Run `{run.id}`* · {T.escape(run.workflow)} v{run.workflow_version} · {run.status.value}"]

    def label(cp: CheckpointInfo) -> str:
        text = f"#{cp.seq} {T.escape(node_label(cp.step))}"
        d = by_decision.get(cp.decision_id) if cp.decision_id else None
        if d is not None:
            who = B.who_decided(d)
            text += (f" to #{d.payload.get('to')} by {who}" if cp.step == REWIND_NODE
                     else f" _{d.action.value}_ by {who}")
            words = d.payload.get("text") or d.payload.get("reason") or d.payload.get("feedback")
            if words:
                text += f": “{T.truncate(T.escape(str(words)).replace(chr(10), ' '), 60)}”"
            fields = rewound_fields(cp, d)
            if fields:  # a rewind's edits: the fields it set
                text += f" _set_ {T.truncate(T.escape(', '.join(fields)), 80)}"
        text += f" → {T.escape(node_label(cp.next_step)) if cp.next_step else '*end*'} · {B.date(cp.created_at, '{time}')}"
        return text + ("  ◀ *head*" if cp.seq == run.head_seq else "")

    def chain(cp: CheckpointInfo, depth: int) -> None:
        current = cp
        while True:
            lines.append("\u2003" * depth + label(current))
            kids = children.get(current.seq, [])
            following = continuation(current, kids)
            if following is not None:
                current = following
                continue
            for kid in kids:
                lines.append("\u2003" * (depth + 1) + f"_{branch_heading(current, kid)}_")
                chain(kid, depth + 2)
            return

    for root in children.get(None, []):
        chain(root, 0)
    return "\n".join(lines if max_chars is None else _fit(lines, max_chars, run.id))


def _fit(lines: list[str], max_chars: int, run_id: str) -> list[str]:
    """``lines`` (a title, then one line a checkpoint or branch) within ``max_chars`` once joined: the title, the
    head's line (``◀ head``), then the newest lines and the oldest, about two thirds of the room to the newest,
    whole lines only (a cut inside a ``<!date^…>`` token showed as broken markup: s26 F4), each gap said in its
    place with the number of lines left out and where the whole tree is."""
    if len("\n".join(lines)) <= max_chars:
        return lines
    gap = f"_… {{}} lines not shown: the whole tree with `hazel history {run_id}`, or on the run page_"
    room = max_chars - 2 * (len(gap) + 8)  # (two gaps at most, each with its count)
    keep = {0}
    head = next((i for i, line in enumerate(lines) if line.endswith("◀ *head*")), None)
    if head is not None:
        keep.add(head)
    used = sum(len(lines[i]) + 1 for i in keep)
    newest_room = used + (room - used) * 2 // 3
    for i in range(len(lines) - 1, 0, -1):  # the newest, then the oldest, while they fit
        if used + len(lines[i]) + 1 > newest_room:
            break
        keep.add(i)
        used += len(lines[i]) + 1
    for i in range(1, len(lines)):
        if i in keep:
            continue
        if used + len(lines[i]) + 1 > room:
            break
        keep.add(i)
        used += len(lines[i]) + 1
    out: list[str] = []
    skipped = 0
    for i, line in enumerate(lines):
        if i in keep:
            if skipped:
                out.append(gap.format(skipped))
                skipped = 0
            out.append(line)
        else:
            skipped += 1
    if skipped:
        out.append(gap.format(skipped))
    return out
