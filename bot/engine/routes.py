"""Routing targets and the checks of a workflow definition as a whole (``Workflow.validate``): every problem
found, each named in one phrase, so that a workflow is refused when it is loaded rather than failing a run later.

The routing rules (``END``, branches) are described in ``bot.engine.workflow``'s docstring. This module knows
workflows only by their attributes (``nodes``, ``steering_points()``, …): ``bot.engine.workflow`` imports it.
"""

from __future__ import annotations

import re
from typing import Any

from integrations.jira.options import OPTION_NAMES as JIRA_OPTIONS
from store.models import ALL_ACTIONS, DB_INT_MAX, Action

END = "__end__"
"""The end target: ``next=END``, ``on_reject=END``, ``on_feedback=END`` or ``ctx.goto(END)`` ends the run there
(completed; rejected when a rejection routes to it). Never a node's name, never stored as a checkpoint's next
node (a checkpoint whose next node is None is final)."""

_CHANNEL = re.compile(r"^(console|slack:#?[A-Za-z0-9_.-]{1,80}|jira:[A-Z][A-Z0-9_]{0,19})$")
_SLACK_TARGET = re.compile(r"^(#.+|[CGDUW][A-Z0-9]{2,})$")
"""After ``slack:``: ``#name``, or the id of a conversation (``C…``, ``G…``, ``D…``) or a user (``U…``, ``W…``)."""


def problems(wf: Any) -> list[str]:
    """Every problem of the ``Workflow`` ``wf`` (empty: it is valid): those found while declaring (bad names,
    duplicates), unknown route targets, steering point settings, and branches fallen into."""
    out = list(wf._problems)
    if not wf._order:
        out.append("it has no steps")
    fields = set(wf.state.model_fields)
    for name in wf._order:
        node = wf.nodes[name]
        if node.next and node.next != END and node.next not in wf.nodes:
            out.append(f"{name!r} routes next to unknown node {node.next!r}")
    for point in wf.steering_points():
        out.extend(_point_problems(wf, point, fields))
    out.extend(_branch_problems(wf))
    return out


def _branch_problems(wf: Any) -> list[str]:
    """Branches (a reject or feedback target declared after its steering point) that the node declared just
    before them falls through into."""
    out, seen = [], set()
    order = wf._order
    for point in wf.steering_points():
        at = order.index(point.name)
        for kind, target in (("on_reject", point.on_reject), ("on_feedback", point.on_feedback)):
            if not target or target not in wf.nodes or order.index(target) <= at or target in seen:
                continue  # unknown (reported above), END, a loop back to an earlier step, or told already
            seen.add(target)
            before = wf.nodes[order[order.index(target) - 1]]
            if before.next:
                continue
            if before is point:
                how = (f"would also run when {point.name!r} is approved, as it is declared right after it"
                       f"; give {point.name!r} an explicit next= (next=END ends the run when approved)")
            else:
                how = (f"would also run after {_kind(wf, before.name)} {before.name!r}, declared right before it; "
                       f"give {before.name!r} an explicit next= (next=END ends the run there)")
            out.append(f"{_kind(wf, target)} {target!r} is the {kind} target of steering point {point.name!r} "
                       f"and {how}")
    return out


def _kind(wf: Any, name: str) -> str:
    return "steering point" if any(p.name == name for p in wf.steering_points()) else "step"


def _point_problems(wf: Any, p: Any, fields: set[str]) -> list[str]:
    """The problems of the settings of ``p``, one of ``wf``'s steering points."""
    out = []
    if p.show is not None and p.show not in fields:
        out.append(f"steering point {p.name!r} shows field {p.show!r} but {wf.state.__name__} has no such "
                   f"field (fields: {', '.join(sorted(fields)) or 'none'})")
    unknown = [a for a in p.actions if a not in ALL_ACTIONS]
    if unknown:
        out.append(f"steering point {p.name!r} has unknown actions {unknown} (allowed: {list(ALL_ACTIONS)})")
    if not p.actions:
        out.append(f"steering point {p.name!r} allows no action")
    for target_name, target in (("on_feedback", p.on_feedback), ("on_reject", p.on_reject)):
        if target and target != END and target not in wf.nodes:
            out.append(f"steering point {p.name!r} {target_name} names unknown node {target!r}")
    if Action.FEEDBACK.value in p.actions and p.on_feedback is None and wf.feedback_target(p) is None:
        out.append(f"steering point {p.name!r} allows feedback but no step precedes it; set on_feedback")
    out += [f"steering point {p.name!r}: {problem}" for problem in point_settings_problems(p)]
    for action, role in p.permissions.items():
        if action not in ALL_ACTIONS or role not in ("approvers", "anyone"):
            out.append(f"steering point {p.name!r} has invalid permission {action!r}: {role!r}")
    return out


def point_settings_problems(p: Any) -> list[str]:
    """The problems of a steering point's channels, approvals and timeout (a native workflow's ``SteeringPoint``
    or a LangGraph graph's ``steer(...)``: one set of rules), each one phrase without the point's name:
    ``invalid channel 'teams:#x' (…)``. (Its durations are checked by the ``SteeringPoint`` model itself:
    ``bot.engine.workflow.Seconds``.)"""
    out = []
    actions = tuple(getattr(p, "actions", None) or ())
    twice = sorted({a for a in actions if actions.count(a) > 1})
    if twice:  # (each would be a second button with the same action_id: Slack refuses the message)
        out.append(f"lists {', '.join(map(repr, twice))} more than once in actions")
    for channel in (p.channel, p.escalate_channel):
        if channel is not None and not _CHANNEL.match(channel):
            out.append(f"invalid channel {channel!r} (console, slack:#channel, slack:C…, jira:PROJECTKEY)")
        elif channel is not None and channel.startswith("slack:") and not _SLACK_TARGET.match(channel[6:]):
            out.append(f"invalid channel {channel!r}: a Slack channel is slack:#name or its id, slack:C… (did "
                       f"you mean 'slack:#{channel[6:]}'?)")  # (s33 F15: a bare name, looked up as an id)
    if p.approvals_required < 1:
        out.append("approvals_required must be at least 1")
    elif p.approvals_required > DB_INT_MAX:  # (a request's approvals_required column, PostgreSQL's integer)
        out.append(f"approvals_required must be at most {DB_INT_MAX:,} (what the database's integer columns hold), "
                   f"not {p.approvals_required}")
    if p.on_timeout and p.timeout_sec is None:
        out.append("on_timeout without timeout_sec")
    if p.on_timeout in ALL_ACTIONS and p.on_timeout not in p.actions:
        out.append(f"times out with {p.on_timeout!r}, which its actions do not allow ({', '.join(p.actions)})")
    if p.on_timeout == "escalate" and not (p.escalate_to or p.escalate_channel):
        out.append("escalates on timeout but names no escalate_to/escalate_channel")
    out += [_unknown_option(p, key) for key in sorted(set(p.options or {}) - POINT_OPTIONS)]
    if (p.escalate_channel or "").startswith("jira:") and not (p.channel or "").startswith("jira:"):
        out.append(f"escalate_channel {p.escalate_channel!r}: an escalation in Jira is a comment on the request's "
                   f"own issue, and a request on {p.channel!r} has none (escalate to a Slack channel)")
    elif (p.escalate_channel or "").startswith("jira:") and p.escalate_channel.upper() != p.channel.upper():
        out.append(f"escalate_channel {p.escalate_channel!r}: an escalation in Jira is a comment on the request's "
                   f"own issue, in {p.channel!r}, never an issue in another project (leave escalate_channel out, "
                   "or escalate to a Slack channel)")  # (s29 F7: accepted, and the other project never heard)
    return out


POINT_OPTIONS = JIRA_OPTIONS
"""The options a steering point may carry besides its settings: the channels' own (``integrations.jira.options``)."""


def _unknown_option(p: Any, key: str) -> str:
    """A keyword of ``steer`` that is neither a setting nor a channel's option (a typo: ``approver=`` left the
    point open to anyone, a fresh-user finding, s33 F3), with the setting it is nearest to."""
    from difflib import get_close_matches

    known = sorted((set(type(p).model_fields) - {"name", "options"}) | POINT_OPTIONS)
    near = [k for k in known if k.startswith(key)][:1] or get_close_matches(key, known, n=1, cutoff=0.6)
    if near:
        return f"unknown setting {key!r} (did you mean {near[0]}?)"
    return (f"unknown setting {key!r}: neither a setting of steer (see Workflow.steer) nor a channel's option "
            f"({', '.join(sorted(POINT_OPTIONS))})")


_SLACK_USER, _SLACK_GROUP = re.compile(r"^[UW][A-Z0-9]{2,}$"), re.compile(r"^S[A-Z0-9]{2,}$")


def point_warnings(p: Any) -> list[str]:
    """What in a steering point's settings is likely a mistake without being an error, each one phrase naming
    the point: backup approvers no escalation ever reaches, and Slack approvers that are not Slack ids (a
    Slack user is matched by the id its clicks carry, ``U…``/``W…``, a user group by ``S…``: a name there
    matches nobody; name people in ``people=[...]`` and the people file)."""
    out = []
    if p.escalate_to and p.escalate_after_sec is None and p.on_timeout != "escalate":
        out.append(f"steering point {p.name!r}: escalate_to is never used (set escalate_after_sec, or "
                   "on_timeout='escalate')")
    for approvers in (p.approvers, p.escalate_to):
        if approvers is None:
            continue
        for kind, names, shape in (("slack_users", approvers.slack_users, _SLACK_USER),
                                   ("slack_usergroups", approvers.slack_usergroups, _SLACK_GROUP)):
            odd = [n for n in names if not shape.match(n)]
            if odd:
                one = len(odd) == 1
                out.append(f"steering point {p.name!r}: {kind} {', '.join(map(repr, odd))} "
                           f"{'is not a Slack id' if one else 'are not Slack ids'} "
                           f"({'U… or W…' if kind == 'slack_users' else 'S…'}): "
                           f"{'matches' if one else 'match'} nobody; name people in people=[...]")
    return out
