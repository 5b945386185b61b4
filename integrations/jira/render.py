"""Jira texts: issue summary and description, outcome, progress and reminder comments (Jira wiki markup, the
format of REST API v2 text fields on Cloud and Server; see "Text formatting notation" in Jira's help).

Jira holds at most 32,767 characters per text field, counted as Java counts a ``String``'s length: in UTF-16
code units, so a character outside the Basic Multilingual Plane (an emoji, ``🐳``) counts 2 (``utf16_len``).
Every limit here is counted so and every cut is made so (``cut_utf16``, which never splits a surrogate pair);
long artefacts are cut at ``max_chars`` with a note pointing at ``hazel show RUN --full``.

Stored text (an artefact, a person's name, a reason, a step's error) never renders as markup or a mention:
artefacts and multi-line texts go in a ``{noformat}`` block (a ``{noformat}`` inside them is broken with a
zero-width space so that it cannot end the block), one-line texts have every character with a meaning in wiki
markup backslash-escaped (``inline``). Control characters and the bidirectional overrides and isolates are
shown as visible escapes (``\u202e``) in both, as on Slack, the CLI and the run pages. Only Hazel's own mentions (``mention``: the approvers the workflow names,
the person Hazel answers) are written as ``[~…]``. The special characters are those of Jira's wiki parser as
pandoc's reader and writer (jira-wiki-markup, ``Text.Jira.Parser.Inline.specialChars``) know them.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable

from integrations.jira.options import JiraOptions
from integrations.terminal import for_terminal
from store.models import (Approvers, Decision, ProgressView, RequestStatus, RequestView, RewindChoices, node_label,
                          past_tense, person_label, still_waiting_text)

MAX_TEXT_CHARS = 30_000
"""Characters (UTF-16 code units, ``utf16_len``) of artefact Hazel puts in one description (Jira's limit per
field is 32,767)."""
FIELD_CHARS = 32_767
"""Jira's limit for a text field (description, comment body), in UTF-16 code units: 32,767 on Cloud, the default
of the ``jira.text.field.character.limit`` setting on Server / Data Center ("Configuring advanced settings",
Jira administration docs), checked on the text's Java ``String.length()``, "the number of Unicode code units in
the string" (https://docs.oracle.com/javase/8/docs/api/java/lang/String.html#length--). A longer text is
refused with HTTP 400, which the outbox takes as permanent: the issue or comment would never be posted."""
SUMMARY_CHARS = 255
"""Jira's limit for an issue summary, in UTF-16 code units as ``FIELD_CHARS``."""
STEP_CHARS = 80
"""Characters of a step's name in a list of checkpoints (``rewind_help``); a longer one is cut with ``…``."""


def utf16_len(text: str) -> int:
    """The length of ``text`` as Jira counts it (Java's ``String.length()``): UTF-16 code units, 1 for each
    character of the Basic Multilingual Plane, 2 for each above it (U+10000 and up: emoji, CJK extension
    ideographs, mathematical letters). A lone surrogate code point (possible in a Python ``str``) counts 1."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def cut_utf16(text: str, limit: int) -> str:
    """The longest start of ``text`` that is at most ``limit`` UTF-16 code units long (``utf16_len``; ``text``
    itself when it fits; ``""`` for a ``limit`` of 0 or less). Cut between characters, so a character above the
    BMP (one Python character, two units) is kept whole or dropped, and a surrogate pair held as two code points
    (a high surrogate then a low one) is never split either."""
    if utf16_len(text) <= limit:
        return text
    units = 0
    for at, char in enumerate(text):
        units += 2 if char > "\uffff" else 1
        if units > limit:
            if at and "\ud800" <= text[at - 1] <= "\udbff" and "\udc00" <= char <= "\udfff":
                at -= 1  # (the pair's high half would end the text alone)
            return text[:at]
    return text


_UNMENTIONABLE = re.compile(r"[\[\]{}|~\x00-\x1f\x7f]")
"""What cannot stand inside ``[~…]``: a ``]`` would close the mention early and let the rest of the name add
mentions of its own (a Server user name ``x] [~sam``), a line break breaks it."""


def mention(user: str, *, cloud: bool) -> str:
    """A mention that notifies ``user``: ``[~accountid:ID]`` on Cloud, ``[~name]`` on Server; a user name that
    cannot be written inside one (``_UNMENTIONABLE``) is written as escaped text instead, and notifies nobody."""
    if _UNMENTIONABLE.search(user):
        return inline(user)
    return f"[~accountid:{user}]" if cloud else f"[~{user}]"


JiraIdentities = Callable[[str], Iterable[str]]
"""A person's Jira identities (account ids on Cloud, user names on Server) as the people file lists them."""


def _cloud_like(identity: str) -> bool:
    """Looks like a Jira Cloud account id (``557058:…``, or the older 24 hexadecimal digits)."""
    return ":" in identity or re.fullmatch(r"[0-9a-f]{24}", identity) is not None


def jira_users_of(approvers: Approvers, identities: JiraIdentities | None, *, cloud: bool) -> list[str]:
    """The Jira users to mention or add as watchers for ``approvers``: the listed ``jira_users``, then the
    Jira identities of the listed ``people`` (``identities``; None: none known). A person listed with both a
    Cloud account id and a Server user name is mentioned by those of the deployment's kind (all of them when
    none looks so)."""
    users = list(approvers.jira_users)
    for person in approvers.people:
        found = sorted(identities(person)) if identities is not None else []
        fitting = [u for u in found if _cloud_like(u) is cloud] or found
        users += [u for u in fitting if u not in users]
    return users


def who_may(approvers: Approvers, *, cloud: bool, identities: JiraIdentities | None = None) -> str:
    """The people and the Jira users and groups of ``approvers``, e.g. ``priya ([~priya.k]), [~accountid:…],
    members of dba``: a listed person is mentioned by their Jira identities (``identities``, the people
    file), a Jira user as such; ``anyone`` when the list is empty; other channels' approvers are named as
    such."""
    if approvers.empty:
        return "anyone"
    parts, named = [], set(approvers.jira_users)
    for person in approvers.people:
        own = [u for u in jira_users_of(Approvers(people=(person,)), identities, cloud=cloud) if u not in named]
        named.update(own)
        parts.append(inline(person) + (f" ({', '.join(mention(u, cloud=cloud) for u in own)})" if own else ""))
    parts += [mention(u, cloud=cloud) for u in approvers.jira_users]
    parts += [f"members of {inline(g)}" for g in approvers.jira_groups]
    if approvers.users or approvers.slack_users or approvers.slack_usergroups:
        parts.append("approvers on the other channels (CLI, Slack)")
    return ", ".join(parts)


def _who_decides(view: RequestView, *, cloud: bool, identities: JiraIdentities | None) -> str:
    """The description's *Who may decide:* ``who_may`` of the approvers; when none of them can decide
    (``view.nobody_left``: each has voted, or may not approve the run they started: self-approval), it says so
    rather than name someone who would be refused (s25 F11)."""
    if view.nobody_left:
        return (f"nobody: none of {who_may(view.approvers, cloud=cloud, identities=identities)} can decide it "
                "(self-approval is off, or each has voted); cancel the run or change the point's approvers")
    return who_may(view.approvers, cloud=cloud, identities=identities)


def summary(view: RequestView) -> str:
    """``<title> (run <id>)`` on one line, at most 255 UTF-16 code units (``SUMMARY_CHARS``: a longer one is
    cut, ending with ``…``), its control characters and bidirectional overrides as visible escapes
    (``for_terminal``)."""
    text = for_terminal(" ".join(f"{view.title} (run {view.run.id})".split()), one_line=True)
    return text if utf16_len(text) <= SUMMARY_CHARS else cut_utf16(text, SUMMARY_CHARS - 1) + "…"


_SPECIAL = re.compile(r"[_+\-*^~|\[\]{}()!&:;?#\\]")
"""Characters with a meaning somewhere in wiki markup: text effects (``*_-+^~``, ``??``), links and mentions
(``[~…]``), macros (``{code}``, ``{panel}``), tables (``|``), lists (``#``), images (``!``), entities
(``&``), emoticons (``(x)``, ``:)``), the escape itself (``\\``)."""
_ALWAYS = frozenset("[]{}|!&")
_EMOTICON = re.compile(r"\((?:[yni/x!+\-?]|on|off|\*[rgby]?|flag|flagoff)\)", re.IGNORECASE)
"""Jira's emoticons in parentheses: ``(y)``, ``(x)``, ``(/)``, ``(on)``, ``(*r)``, ``(flag)``, …"""
_NOFORMAT = re.compile(r"\{(noformat)", re.IGNORECASE)


def _escape_char(match: re.Match[str]) -> str:
    """The escape of one special character, where it could mean markup (as pandoc's Jira writer decides):
    ``[]{}|!&`` always; ``(`` opening an emoticon; ``:`` and ``;`` before a smiley's mouth; ``?`` next to
    another; the text effects unless between two letters or digits, or between two spaces."""
    char, text, at = match.group(), match.string, match.start()
    before, after = text[at - 1: at], text[at + 1: at + 2]
    if char == "\\":
        return "&#92;"  # a backslash cannot escape itself: "\\\\" is a line break
    if char in _ALWAYS:
        return "\\" + char
    if char == "(":
        return "\\(" if _EMOTICON.match(text, at) else char
    if char == ")":
        return char
    if char in ":;":
        return "\\" + char if after in tuple("()PDpd") else char
    if char == "?":
        return "\\?" if "?" in (before, after) else char
    if (before.isalnum() and after.isalnum()) or (before in ("", " ") and after in ("", " ")):
        return char
    return "\\" + char


def inline(text: str) -> str:
    """``text`` as literal wiki text on one line: whitespace runs (newlines included) as one space, each
    special character that could mean markup there escaped with a backslash (which Jira shows as the
    character), a backslash as the entity ``&#92;``; control characters and the bidirectional overrides and
    isolates (U+202A–U+202E, U+2066–U+2069: ``report\u202egpj.exe`` would read as ``report.exe.jpg``) as visible
    escapes, as Slack, the CLI and the run pages show them (``integrations.terminal.for_terminal``)."""
    return _SPECIAL.sub(_escape_char, for_terminal(" ".join(str(text).split()), one_line=True))


QUOTE_CHARS = 30_000
"""UTF-16 code units (``utf16_len``) of a person's free text (a reason, feedback) Hazel quotes in one comment,
so that the comment around it fits in Jira's field (``FIELD_CHARS``) and a ``{noformat}`` block is closed."""
_PARTIAL_ESCAPE = re.compile(r"\\$|(?<!\\)&(?:#(?:9(?:2)?)?)?$")
"""The start of an ``inline`` escape that a cut left at the end of the text (``\\`` before its character, or part
of ``&#92;``; a complete ``\\&`` stays)."""


def quoted(text: str) -> str:
    """Free text (a reason, feedback, an error) as literal wiki text: ``inline`` when it is one line, else a
    ``{noformat}`` block on its own lines. Markup longer than ``QUOTE_CHARS`` UTF-16 code units is cut there
    (never inside an escape; the block still closed) and followed by ``_(cut at 30,000 characters)_``."""
    text = str(text)
    block = "\n" in text.strip()
    shown = _escape(text.strip("\n")) if block else inline(text)
    if utf16_len(shown) <= QUOTE_CHARS:
        return "\n" + _block(shown) if block else shown
    shown = cut_utf16(shown, QUOTE_CHARS)
    note = f"_(cut at {QUOTE_CHARS:,} characters)_"
    return "\n" + _block(shown + "\n…") + "\n" + note if block else _PARTIAL_ESCAPE.sub("", shown) + "… " + note


def _escape(text: str) -> str:
    """Text for a ``{noformat}`` block: an inner ``{noformat`` gets a zero-width space after its brace; control
    characters but newline and tab, and the bidirectional overrides, as visible escapes (``for_terminal``)."""
    return _NOFORMAT.sub("{\u200b\\1", for_terminal(text))


def _block(text: str) -> str:
    return "{noformat}\n" + text + "\n{noformat}"


def artefact(value: Any, *, max_chars: int = MAX_TEXT_CHARS, run_id: str = "RUN") -> str:
    """The shown value as wiki markup: text as preformatted text, a mapping of texts (e.g. file name -> SQL)
    as one block per entry under its name, anything else as JSON; at most ``max_chars`` UTF-16 code units
    (``utf16_len``: what Jira counts) of markup plus a closing note when it had to be cut."""
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        entries: list[tuple[str | None, str]] = list(value.items())
    elif isinstance(value, str):
        entries = [(None, value)]
    else:
        entries = [(None, json.dumps(value, indent=2, ensure_ascii=False, default=str))]
    parts, used, cut = [], 0, False
    for name, body in entries:
        head = f"*{inline(name)}*\n" if name is not None else ""
        room = max_chars - used - utf16_len(head) - len(_block("")) - 1
        if room <= 0:
            cut = True
            break
        body = _escape(body)
        if utf16_len(body) > room:
            body, cut = cut_utf16(body, room), True
        parts.append(head + _block(body))
        used += utf16_len(parts[-1]) + 1
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
        what = inline(view.show or "state")
        form = "the new text" if isinstance(view.shown_value, str) else "the new value as JSON"
        required = view.request.approvals_required
        lines.append(f"* {{{{/edit}}}} followed by {form} replaces the {what} and approves it." if required <= 1 else
                     f"* {{{{/edit}}}} followed by {form} replaces the {what}; the edited version is asked again "
                     f"and needs {required} approvals anew.")
    if "rewind" in view.actions:
        steps = view.rewind.steps if view.rewind is not None else []  # (the engine's choice: every step's start)
        lines.append("* {{/rewind STEP [feedback]}} goes back to an earlier step and runs again from there"
                     + (f" (steps: {', '.join(map(inline, steps))}; or a checkpoint's number: {{{{/rewind}}}} alone "
                        "lists them)." if steps else "."))
    return lines


def rewind_help(run_id: str, choices: RewindChoices) -> str:
    """The checkpoints a ``/rewind`` can name, as the engine offers them (``RequestView.rewind``: the same as
    Slack's Rewind modal lists), newest first, one bullet each (``* #3 → write_scripts · 11-29 14:05 UTC ·
    branch 0``), then how to name one; when the run can continue from more than are listed (at most 100: #0,
    where each step starts, and the newest), a last line says so and how to reach any other: ``/rewind N`` with
    its number (``/rewind`` takes a number, ``7`` or ``#7``, or a step name: ``webhook.split_rewind``), which
    ``hazel history RUN`` lists, or the run's page."""
    if not choices.checkpoints:
        return f"Run {run_id} has no checkpoint to continue from."
    lines = [f"Run {run_id} can continue from these checkpoints (newest first: the number → the step that runs "
             "next · when · branch):"]
    for cp in choices.checkpoints:
        step = node_label(cp.next_step or "")
        step = step if len(step) <= STEP_CHARS else step[:STEP_CHARS - 1] + "…"
        lines.append(f"* #{cp.seq} → {inline(step)} · {cp.created_at:%Y-%m-%d %H:%M} UTC · branch {cp.branch}")
    lines.append("Answer {{/rewind N [feedback]}} with a checkpoint's number, or {{/rewind STEP [feedback]}} with "
                 "a step's name (the latest checkpoint from which it runs).")
    if choices.cut:
        lines.append(f"Showing {len(choices.checkpoints)} of {choices.total} checkpoints the run can continue from: "
                     "#0 (the run's input), where each step starts, and the newest. To continue from another, "
                     f"{{{{/rewind N}}}} with its number ({{{{hazel history {run_id}}}}} lists them all), or the "
                     "run's page.")
    return "\n".join(lines)


def description(view: RequestView, opts: JiraOptions, *, cloud: bool, max_chars: int = MAX_TEXT_CHARS,
                link: str | None = None, identities: JiraIdentities | None = None) -> str:
    """The issue description: what is asked, the run's context, the artefact (at most ``max_chars`` UTF-16 code
    units, and never more than fits in Jira's field, ``FIELD_CHARS``: the whole description is cut there should
    its other parts alone not fit), and how to answer; ``link``: the run page's signed "View run" URL (none: no
    such line); ``identities``: people's Jira identities (``who_may``)."""
    r = view.request
    lines = [f"Hazel asks: *{inline(view.title)}*", "",
             f"*Run:* {view.run.id} · *Workflow:* {inline(view.workflow)} v{view.workflow_version} · *Step:* "
             f"{inline(view.point)} · *Started by:* "
             f"{inline(person_label(view.run.started_by_person, None, view.run.started_by))} "
             f"({inline(view.run.started_via)})",
             f"*Who may decide:* {_who_decides(view, cloud=cloud, identities=identities)}"]
    if r.approvals_required > 1:
        lines.append(f"*Approvals needed:* {r.approvals_required} ({r.approvals} so far)")
    if r.due_at is not None:
        lines.append(f"*Due:* {r.due_at:%Y-%m-%d %H:%M} UTC")
    if link:
        lines.append(f"*View run:* [the checkpoint tree, diffs and audit log|{link}]")
    tail = ["", "h3. How to answer", *how_to_answer(view, opts), "",
            f"_Request #{r.id} of run {view.run.id}. From a terminal: {{{{hazel show {view.run.id}}}}}._"]
    heading = f"h3. {inline(view.show) if view.show else 'State'}"
    frame = "\n".join([*lines, "", heading, *tail])
    room = min(max_chars, FIELD_CHARS - utf16_len(frame) - 200)  # 200: the cut note and the line breaks
    return cut_utf16("\n".join([*lines, "", heading, artefact(view.shown_value, max_chars=room,
                                                               run_id=view.run.id), *tail]), FIELD_CHARS)


def _settling(view: RequestView) -> Decision | None:
    for d in reversed(view.decisions):
        if d.action.value == view.request.decided_action:
            return d
    return None


def outcome_comment(view: RequestView, *, note: str | None = None) -> str:
    """What happened to the request: a quorum vote (``view.vote``, as it was counted, whatever the request is when
    the comment is delivered: ``Approval 1 of 2 from priya; waiting for 1 more.``), the decision that settled
    it, or its cancellation."""
    r = view.request
    if view.vote is not None:
        v = view.vote
        text = (f"Approval {v.approvals} of {v.required} from {inline(v.by)}; waiting for "
                f"{v.required - v.approvals} more.")
    elif r.status is RequestStatus.PENDING:  # (a vote queued before votes carried what they say)
        last = view.decisions[-1] if view.decisions else None
        by = f" from {inline(last.label)}" if last else ""
        text = f"Approval {r.approvals} of {r.approvals_required}{by}; waiting for " \
               f"{r.approvals_required - r.approvals} more."
    elif r.status is RequestStatus.CANCELLED and r.decided_action == "fail":  # on_timeout="fail" (or a fail)
        how = ("Nobody decided in time: the run failed at its timeout" if r.decided_by == "timeout"
               else f"Failed by {inline(r.decided_by or 'Hazel')}: the run failed")
        text = (f"(!) {how}. Nothing more to decide here; {{{{hazel retry {view.run.id}}}}} asks again.")
    elif r.status is RequestStatus.CANCELLED:
        text = f"Cancelled by {inline(r.decided_by or 'Hazel')}: nothing more to decide here."
    else:
        d = _settling(view)
        by = r.decided_by or (d.actor_name if d else None) or "someone"
        payload = d.payload if d else {}
        action = r.decided_action or ""
        head = f"{past_tense(action).capitalize()} by {inline(by)}"  # the one table of verbs (store.models)
        text = {
            "approve": f"(/) {head}.",
            "edit": f"(/) {head}: their version of the {inline(view.show or 'state')} replaces the draft.",
            "reject": f"(x) {head}: {quoted(payload.get('reason', ''))}",
            "feedback": f"{head}: the agent is revising, and the new version comes back for review.",
            "rewind": f"{head} to checkpoint #{payload.get('to', '?')}"
                      + (f" with feedback: {quoted(payload['feedback'])}" if payload.get("feedback") else "."),
        }.get(action, f"{head}.")
        if view.still_pending:  # the run waits on the other requests asked with this one
            text += f"\n\nThe run is {inline(still_waiting_text(view.still_pending))}."
    return text + (f"\n\n{note}" if note else "")


def rewound_comment(decision: Decision, *, next_step: str | None, ended: str | None = None) -> str:
    """The answer to a ``/rewind`` comment that settled no request of its issue (so no outcome comment comes
    for it): the run ``ended`` (its status then: ``rejected``, …) or waiting elsewhere was forked from the
    checkpoint the decision names and continues at ``next_step`` on a new branch, with the feedback if any."""
    was = f" (it had ended {inline(ended)})" if ended else ""
    at = f" at {inline(next_step)}" if next_step else ""
    feedback = decision.payload.get("feedback")
    return (f"Rewound run {decision.run_id} to checkpoint #{decision.payload.get('to', '?')}{was}: it continues"
            f"{at} on a new branch" + (f", with your feedback: {quoted(feedback)}" if feedback else "."))


def progress_comment(view: ProgressView) -> str:
    """The run's progress since this issue's request: steps done, what it waits on now, or how it ended."""
    run, facts = view.run.id, view.facts
    names = ", ".join(map(inline, view.steps))
    steps = f" after {names}" if view.steps else ""
    if view.event == "waiting":
        nxt = view.next_request
        where = f"*{inline(nxt.title)}* ({inline(nxt.channel)})" if nxt is not None else "the next steering point"
        done = f"Done: {names}. " if view.steps else ""
        if view.paused:  # (LangGraph nodes that stopped at an interrupt: not done)
            done += f"Paused to ask for steering: {', '.join(map(inline, view.paused))}. "
        return f"Run {run}: {done}Now waiting at {where}."
    if view.event == "completed":
        return f"(/) Run {run} completed{steps}."
    if view.event == "failed":
        error = inline(" ".join(str(facts.get("error") or "unknown error").split())[:1000])
        at = f" at step {inline(facts['step'])}" if facts.get("step") else ""
        return f"(!) Run {run} failed{at}: {error}\nRetry it with {{{{hazel retry {run}}}}}."
    reason = f": {quoted(facts['reason'])}" if facts.get("reason") else ""
    by = f" by {inline(facts['by'])}" if facts.get("by") else ""
    return f"Run {run} ended {view.event}{by}{reason}."


def reminder_comment(view: RequestView, *, cloud: bool, identities: JiraIdentities | None = None) -> str:
    """A reminder to the approvers, or the notice that backup approvers may now decide (escalation); the
    people listed are mentioned by their Jira identities (``identities``, see ``who_may``)."""
    if view.escalation and view.escalate_to is not None:
        return (f"(!) Escalated: {who_may(view.escalate_to, cloud=cloud, identities=identities)} may now decide "
                f"as well. This request has waited since {view.request.created_at:%Y-%m-%d %H:%M} UTC.")
    since = f"(since {view.request.created_at:%Y-%m-%d %H:%M} UTC)"
    if view.nobody_left:  # every approver has voted, or may not (self-approval): nobody left to ask
        return f"Reminder: this request is still waiting {since}, but none of its approvers can decide it any more."
    who = who_may(view.waiting_for or view.approvers, cloud=cloud, identities=identities)
    return f"Reminder: this request is still waiting for {who} {since}."


def asked_again_comment(view: RequestView, issue_key: str, status: str) -> str:
    """Posted on this run's point's latest closed issue (in ``status``) when a later request of the same point
    opens a new issue (the old one is in a closed status, so it is not reused): where to answer now (s25 F3).
    Jira links an issue key written in a comment. The status is named: an issue left in the approve status by a
    quorum's first vote, then sent back, was called "closed" while the board showed it Approved (s30 D2)."""
    return (f"This run asks again at {inline(view.title)} (request #{view.request.id}) on {issue_key}: answer "
            f"there; this issue, in {inline(status)}, is not asked on again.")


def revised_comment(view: RequestView) -> str:
    """Posted when a later request of the same run and steering point reuses this issue."""
    return (f"A new version is ready for review (request #{view.request.id}): the description shows it. "
            "Answer as before.")
