"""Who may take which action at a steering point.

A steering point lists approvers per channel (``Approvers``) and, per action, whether approvers or anyone may
take it (``permissions``; approvers by default). An empty approver list means anyone. The console operator
(the person at the terminal, who has the database anyway) counts as an approver unless the point lists console
``users`` by name. Hazel itself (timeouts) may always act. The self-approval ban applies on every channel.
"""

from __future__ import annotations

from bot.engine.errors import NotAllowedError
from bot.engine.workflow import Approvers, SteeringPoint
from store.models import Action, Actor, Run

APPROVING = (Action.APPROVE.value, Action.EDIT.value)


def is_approver(approvers: Approvers, actor: Actor) -> bool:
    """True when ``actor`` is one of ``approvers`` on the actor's channel (or the list is empty)."""
    if approvers.empty or actor.channel in ("timeout", "system"):
        return True
    if actor.channel == "console":
        return not approvers.users or actor.id in approvers.users
    if actor.channel == "api":
        return actor.id in approvers.users
    if actor.channel == "slack":
        return actor.id in approvers.slack_users or bool(actor.groups & set(approvers.slack_usergroups))
    if actor.channel == "jira":
        return actor.id in approvers.jira_users or bool(actor.groups & set(approvers.jira_groups))
    return False


def approvers_of(point: SteeringPoint, *, escalated: bool = False) -> list[Approvers]:
    """The approver lists in force: the point's own, plus its backup approvers once escalated."""
    lists = [point.approvers]
    if escalated and point.escalate_to is not None:
        lists.append(point.escalate_to)
    return lists


def check(point: SteeringPoint, action: str, actor: Actor, run: Run, *, escalated: bool = False) -> None:
    """Raise if ``actor`` may not take ``action`` at ``point`` for ``run``.

    Raises:
        NotAllowedError: with a message that says who may.
    """
    if point.role_for(action) == "approvers":
        lists = approvers_of(point, escalated=escalated)
        if not any(is_approver(a, actor) for a in lists):
            who = "; ".join(a.describe() for a in lists)
            raise NotAllowedError(f"{actor.label} may not {action} at {point.title!r}: only {who} may")
    if action in APPROVING and not point.allow_self_approval and _same_person(run, actor):
        raise NotAllowedError(
            f"{actor.label} started this run and may not {action} it at {point.title!r} (self-approval is off)"
        )


def _same_person(run: Run, actor: Actor) -> bool:
    return run.started_by == actor.id and run.started_via == actor.channel
