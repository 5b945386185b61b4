"""What every Slack handler shares: who the Slack user is (with their user groups), the request behind a button,
permission pre-checks, replies only the clicker sees, and App Home publishing.

Every decision still goes through ``Hazel.decide`` / ``rewind`` / ``retry`` / ``cancel`` / ``start``; the checks
here only decide whether to open a modal, and refusals are audited like the engine's own.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.engine import permissions
from bot.engine.errors import AlreadyDecidedError, InvalidDecisionError, NotAllowedError
from bot.engine.hazel import Hazel
from bot.engine.versions import resolve_workflow
from bot.engine.workflow import SteeringPoint
from integrations.slack import blocks as B
from integrations.slack.directory import SlackDirectory
from store.models import Actor, RequestView, Run, SteeringRequest

log = logging.getLogger("hazel.slack")

VERBS = {"approve": "approved", "edit": "edited", "reject": "rejected", "feedback": "answered with feedback",
         "rewind": "rewound", "cancel": "cancelled"}
DECIDING = ("approve", "edit", "reject")
"""Actions that make a request "waiting on you" in App Home and ``/hazel runs``."""


def already_text(*, action: str | None, by_id: str | None, by_channel: str | None, by_label: str | None,
                 at: Any, actor: Actor | None = None, pending: bool = False) -> str:
    """"Already approved by @x at hh:mm" (the time in the reader's time zone)."""
    when = B.date(at, "{time}")
    if action == "cancel":
        return f"This request was cancelled by {B.person(by_id, by_channel, by_label)} at {when}."
    if pending and actor is not None and by_id == actor.id and by_channel == actor.channel:
        return f"You already {VERBS.get(action or '', 'decided')} this request at {when}; it still needs more approvals."
    return f"Already {VERBS.get(action or '', 'decided')} by {B.person(by_id, by_channel, by_label)} at {when}."


def already_from_error(exc: AlreadyDecidedError, actor: Actor) -> str:
    """``already_text`` for the engine's refusal of a decision that came too late."""
    return already_text(action=exc.action, by_id=exc.decided_by_id, by_channel=exc.channel,
                        by_label=exc.decided_by, at=exc.decided_at, actor=actor,
                        pending=str(exc).startswith("you already"))


def already_from_view(view: RequestView) -> str:
    """``already_text`` for a request that is no longer pending (before a modal would open)."""
    r = view.request
    action = "cancel" if r.status.value == "cancelled" else r.decided_action
    settling = next((d for d in reversed(view.decisions) if d.action.value == r.decided_action), None)
    return already_text(action=action, by_id=settling.actor_id if settling else None,
                        by_channel=settling.channel if settling else None, by_label=r.decided_by, at=r.decided_at)


class SlackBridge:
    """Shared state of the Slack handlers.

    Args:
        hazel: the engine.
        client: the bot's ``WebClient`` (for Home tabs published outside a Slack request).
        directory: user group members (cached), to resolve ``Actor.groups``.
    """

    def __init__(self, hazel: Hazel, client: WebClient, directory: SlackDirectory) -> None:
        self.hazel = hazel
        self.client = client
        self.directory = directory

    # -- who and what -------------------------------------------------------------------------------------------

    def usergroups(self) -> set[str]:
        """Every Slack user group any registered workflow names (approvers, backups, starters)."""
        groups: set[str] = set()
        for wf in self.hazel.registry.all():
            groups.update(wf.starters.slack_usergroups)
            for point in wf.steering_points():
                groups.update(point.approvers.slack_usergroups)
                if point.escalate_to is not None:
                    groups.update(point.escalate_to.slack_usergroups)
        return groups

    def actor(self, user: dict[str, Any] | str, name: str | None = None) -> Actor:
        """The Slack user as an ``Actor`` with the user groups (of those Hazel cares about) they are in.

        Raises:
            DirectoryError: Slack could not list a group's members and nothing is cached.
        """
        if isinstance(user, dict):
            user_id = user["id"]
            name = name or user.get("username") or user.get("name")
        else:
            user_id = user
        groups = self.directory.groups_of(user_id, self.usergroups())
        return Actor(id=user_id, channel="slack", name=name or None, groups=groups)

    def view(self, request_id: int) -> RequestView | None:
        """The request as channels render it, or None when there is no such request."""
        with self.hazel.store.read() as tx:
            return self.hazel.deliverer.request_view(tx, request_id)

    def point(self, run: Run, request: SteeringRequest) -> SteeringPoint:
        """The steering point ``request`` waits at, in the workflow version ``run`` continues on.

        Raises:
            VersionUnavailableError: that version is not deployed.
        """
        return resolve_workflow(self.hazel.registry, run).point(request.point)

    def check(self, view: RequestView, action: str, actor: Actor) -> None:
        """Whether ``actor`` may take ``action`` on the pending request, before a modal opens (the decision
        itself checks again). A refusal is recorded in the audit log.

        Raises:
            InvalidDecisionError: the point does not allow ``action``.
            NotAllowedError: this person may not.
        """
        point = self.point(view.run, view.request)
        if action not in point.actions:
            raise InvalidDecisionError(f"{action!r} is not allowed at {point.title!r} "
                                       f"(allowed: {', '.join(point.actions)})")
        try:
            permissions.check(point, action, actor, view.run, escalated=view.request.escalated_at is not None)
        except NotAllowedError as exc:
            self.hazel.steering.refuse(run_id=view.run.id, request_id=view.request.id, actor=actor, action=action,
                                       reason=str(exc))
            raise

    def may_decide(self, point: SteeringPoint, run: Run, request: SteeringRequest, actor: Actor) -> bool:
        """Whether ``actor`` may approve, edit or reject ``request`` (whichever the point allows)."""
        for action in DECIDING:
            if action in point.actions:
                try:
                    permissions.check(point, action, actor, run, escalated=request.escalated_at is not None)
                    return True
                except NotAllowedError:
                    continue
        return False

    def waiting_on(self, actor: Actor, *, limit: int = 50) -> list[RequestView]:
        """Pending requests ``actor`` may decide, oldest first: on a Slack channel, or naming them explicitly."""
        out: list[RequestView] = []
        with self.hazel.store.read() as tx:
            pending = tx.requests.pending(limit=500)
            for request in pending:
                run = tx.runs.get(request.run_id)
                if run is None:
                    continue
                try:
                    point = self.point(run, request)
                except Exception:  # a run on a version that is not deployed: nobody can decide it here
                    continue
                if not (request.channel.startswith("slack") or not point.approvers.empty):
                    continue
                if self.may_decide(point, run, request, actor):
                    view = self.hazel.deliverer.request_view(tx, request.id)
                    if view is not None:
                        out.append(view)
                if len(out) >= limit:
                    break
        return out

    # -- answering ------------------------------------------------------------------------------------------

    def tell(self, client: WebClient, *, user: str, channel: str | None, text: str) -> None:
        """A message only ``user`` sees: ephemeral in ``channel`` (``chat.postEphemeral``), or as a notice at the
        top of their Home tab when the click came from there (no channel)."""
        if channel:
            try:
                client.chat_postEphemeral(channel=channel, user=user, text=text)
                return
            except (SlackApiError, SlackClientError, OSError) as exc:
                log.warning("chat.postEphemeral to %s failed (%s); showing it in App Home", channel,
                            type(exc).__name__)
        self.publish_home(user, notice=text, client=client)

    def publish_home(self, user_id: str, *, notice: str | None = None, client: WebClient | None = None) -> None:
        """Publish ``user_id``'s Home tab (``views.publish``): waiting on them, then recent runs."""
        actor = self.actor(user_id)
        waiting = self.waiting_on(actor)
        recent = []
        for run in self.hazel.runs(limit=15):
            recent.append((run, self.hazel.pending_request(run.id) if run.status.value == "waiting" else None))
        (client or self.client).views_publish(user_id=user_id, view=B.home_view(waiting, recent, notice=notice))

    def refresh_homes(self, view: RequestView) -> None:
        """After a request was posted or changed: republish the Home tab of its Slack approvers and of the Slack
        users who decided on it (at most 25)."""
        users: list[str] = list(view.approvers.slack_users)
        for group in view.approvers.slack_usergroups:
            users += sorted(self.directory.members(group))
        users += [d.actor_id for d in view.decisions if d.channel == "slack"]
        for user in list(dict.fromkeys(users))[:25]:
            try:
                self.publish_home(user)
            except (SlackApiError, SlackClientError, OSError) as exc:
                log.warning("views.publish for %s failed: %s", user, type(exc).__name__)
