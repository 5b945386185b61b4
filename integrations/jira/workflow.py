"""Moving an issue through its Jira workflow to a status that no single transition may reach.

Jira offers only the transitions out of an issue's current status (``GET /rest/api/2/issue/{id}/transitions``,
``JIRA.transitions``: ``[{"id", "name", "to": {"name", "statusCategory": {"key"}}}]``); reading the workflow
itself needs administrator rights, which Hazel's account should not have. So ``walk`` learns the workflow as
it goes: it reads the transitions where the issue is, takes the first hop of the shortest path to the
target through the statuses it knows (a breadth-first search), else the first hop towards the nearest status
it has not read yet, performs that one transition (``POST …/transitions``, ``JIRA.transition_issue``), and
reads again. It stops at the target, when no status it can reach is left unread (no path exists), or after
``max_hops`` transitions. Each hop follows the shortest known path to the target or heads for a status not
read yet, so it never goes round in circles; and it never passes through a
status of Jira's *done* category or one listed in ``avoid`` (Hazel's approve / reject statuses) unless that
status is the target: resolving an issue on the way would notify people and run the workflow's post
functions. When it gives up after moving, it takes the issue back to where it started if the statuses it
learnt lead there, and says where the issue is.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable

from jira import JIRA

from integrations.base import PermanentDeliveryError
from integrations.jira.client import jira_call
from integrations.jira.options import same_status

log = logging.getLogger("hazel.jira")
MAX_HOPS = 5
"""Transitions one walk performs at most (a review workflow reaches any status in two or three)."""


@dataclass(frozen=True)
class Walk:
    """Where a walk left the issue.

    Attributes:
        target: the status asked for.
        start: the issue's status before the walk.
        status: its status now (``target`` when ``reached``).
        taken: the names of the transitions performed, in order (a way back included).
        reached: the issue is in ``target``.
        reason: why not (empty when reached), e.g. ``no path of transitions leads there from *Approved*``.
    """

    target: str
    start: str
    status: str
    taken: tuple[str, ...] = ()
    reached: bool = False
    reason: str = ""


@dataclass(frozen=True)
class _Edge:
    id: str
    name: str
    to: str
    done: bool  # the status is of Jira's "done" category
    category: str | None = None  # its ``statusCategory.key``: ``new``, ``indeterminate``, ``done``


def _edges(raw: Iterable[Any]) -> list[_Edge]:
    out = []
    for t in raw:
        to = t.get("to") if isinstance(t, dict) else None
        if isinstance(to, dict) and to.get("name") and t.get("id") is not None:
            category = (to.get("statusCategory") or {}).get("key")
            out.append(_Edge(str(t["id"]), str(t.get("name") or ""), str(to["name"]), category == "done",
                             category))
    return out


def _key(status: str) -> str:
    return status.strip().casefold()


def _path(known: dict[str, list[_Edge]], start: str, goal, passable) -> list[_Edge] | None:  # noqa: ANN001
    """The shortest list of edges from ``start`` whose last edge satisfies ``goal``, through statuses
    (other than the last) that are ``passable`` and known; None if there is none."""
    queue: deque[tuple[str, list[_Edge]]] = deque([(_key(start), [])])
    seen = {_key(start)}
    while queue:
        here, path = queue.popleft()
        for edge in known.get(here, ()):
            if goal(edge):
                return path + [edge]
            there = _key(edge.to)
            if there not in seen and there in known and passable(edge):
                seen.add(there)
                queue.append((there, path + [edge]))
    return None


def walk(client: JIRA, issue_id: str, target: str, *, avoid: Iterable[str] = (), max_hops: int = MAX_HOPS,
         only_from: str | None = None, category: str | None = None) -> Walk:
    """Move issue ``issue_id`` to status ``target`` (or through the transition named ``target``), one
    transition at a time, as the module's docstring tells. ``only_from``: move it only while it is in this
    status (a refused move undone only where it still stands: not once Hazel, or someone, moved the issue on);
    elsewhere the walk takes nothing and its ``reason`` says where the issue is. ``category``: any status of
    that status category (``new``: an open issue's, such as *To Do*) that ``avoid`` does not name is the target
    (``target`` then only names it in a reason).

    Raises:
        DeliveryError: Jira failed or is unreachable (the issue may have moved part of the way: a retry walks
            on from where it is).
        PermanentDeliveryError: reading the issue or its transitions was refused (a refused transition ends
            the walk instead, with Jira's answer as the reason).
    """
    with jira_call("read the issue's status"):
        status = client.issue(issue_id, fields="status").fields.status
        start = status.name
    avoided = {_key(s) for s in avoid if s} - {_key(target)}
    if same_status(start, target) or (category is not None and _key(start) not in avoided and getattr(
            getattr(status, "statusCategory", None), "key", None) == category):
        return Walk(target, start, start, reached=True)
    if only_from is not None and not same_status(start, only_from):
        return Walk(target, start, start, reason=f"it is in *{start}* now, no longer in *{only_from}*")
    known: dict[str, list[_Edge]] = {}
    here, taken, reason = start, [], ""

    def is_target(edge: _Edge) -> bool:
        if category is not None:
            return edge.category == category and _key(edge.to) not in avoided
        return same_status(edge.to, target) or same_status(edge.name, target)

    def passable(edge: _Edge) -> bool:
        return not edge.done and _key(edge.to) not in avoided

    def unread(edge: _Edge) -> bool:
        return passable(edge) and _key(edge.to) not in known

    while True:
        if _key(here) not in known:
            with jira_call("read transitions"):
                known[_key(here)] = _edges(client.transitions(issue_id))
        path = _path(known, here, is_target, passable) or _path(known, here, unread, passable)
        if path is None:
            reason = f"no path of transitions leads there from *{start}*"
            break
        if len(taken) >= max_hops:
            reason = f"it is not reached within {max_hops} transitions from *{start}*"
            break
        edge = path[0]
        try:
            _transition(client, issue_id, edge)
        except PermanentDeliveryError as exc:
            reason = f"Jira refused the transition *{edge.name}* from *{here}* ({exc})"
            break
        taken.append(edge.name)
        here = edge.to
        if is_target(edge):
            return Walk(target, start, here, tuple(taken), reached=True)
    if taken:
        here = _back(client, issue_id, known, here, start, taken)
    log.warning("issue %s: no transition path from %r to %r (%s)", issue_id, start, target, reason)
    return Walk(target, start, here, tuple(taken), reached=False, reason=reason)


def _transition(client: JIRA, issue_id: str, edge: _Edge) -> None:
    with jira_call("transition the issue"):
        client.transition_issue(issue_id, edge.id)


def _back(client: JIRA, issue_id: str, known: dict[str, list[_Edge]], here: str, start: str,
          taken: list[str]) -> str:
    """Take the issue back to ``start`` along transitions already read (the statuses there were entered
    once already); returns where it ends (``here`` if no known path leads back, or Jira refuses)."""
    path = _path(known, here, lambda e: same_status(e.to, start), lambda e: True) or []
    for edge in path:
        try:
            _transition(client, issue_id, edge)
        except PermanentDeliveryError:
            break
        taken.append(edge.name)
        here = edge.to
    return here
