"""What every Slack handler shares: who the Slack user is, replies only the clicker sees, and App Home.

Who a Slack user is is the engine's to say (``Hazel.identify``): the bridge hands it the user id, a way to ask
Slack for the user groups the engine cares about (``usergroups.users.list``) and for the profile email
(``users.info``, asked only when the people file could match it). Permissions, refusals and their audit
entries are the engine's too (``Hazel.check``, ``Hazel.access``, ``Hazel.waiting_on``).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.engine import AlreadyDecidedError, Hazel, is_transient, log_error
from integrations.slack import blocks as B
from integrations.slack.directory import SlackDirectory
from integrations.slack.replies import already_text
from store.models import Actor, RequestView

log = logging.getLogger("hazel.slack")
MAX_HOMES_REFRESHED = 25
"""Home tabs republished after one request changes (its approvers and the people who decided on it)."""
RECENT_RUNS = 15
"""Runs listed under "Recent runs" in App Home."""


def failure_reason(exc: BaseException) -> str:
    """Why a click or a command could not be carried out, for the person (never the error's text, which may
    hold SQL): the database could not be reached (``is_transient``), else something went wrong on Hazel's side."""
    return ("Hazel could not reach its database" if is_transient(exc) else
            "something went wrong on Hazel's side (its log says what)")


def already_from_error(exc: AlreadyDecidedError, *, plain: bool = False) -> str:
    """The mrkdwn answer to the engine's refusal of a decision that came too late (or a second vote);
    ``plain``: as plain text, for a modal's field error (``replies.already_text``)."""
    return already_text(action=exc.action, by_id=exc.decided_by_id, by_channel=exc.channel,
                        by_label=exc.decided_by, at=exc.decided_at, own=exc.own,
                        pending="approvals so far" in str(exc), plain=plain)


class SlackBridge:
    """Shared state of the Slack handlers.

    Args:
        hazel: the engine.
        client: the bot's ``WebClient`` (for Home tabs published outside a Slack request).
        directory: user group members and profile emails (cached).
    """

    def __init__(self, hazel: Hazel, client: WebClient, directory: SlackDirectory) -> None:
        self.hazel = hazel
        self.client = client
        self.directory = directory

    def actor(self, user: dict[str, Any] | str, name: str | None = None) -> Actor:
        """The Slack user as the engine's ``Actor`` (their person, and their user groups that matter).

        Raises:
            DirectoryError: Slack could not list a group's members and nothing is cached.
        """
        if isinstance(user, dict):
            user_id = user["id"]
            name = name or user.get("username") or user.get("name")
        else:
            user_id = user
        return self.hazel.identify(channel="slack", id=user_id, name=name,
                                   groups=lambda wanted: self.directory.groups_of(user_id, wanted),
                                   email=lambda: self.directory.email_of(user_id))

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
        waiting = self.hazel.waiting_on(actor=self.actor(user_id))
        recent_runs = self.hazel.runs(limit=RECENT_RUNS)
        pending = self.hazel.pending_requests(run_ids=[r.id for r in recent_runs if r.status.value == "waiting"])
        recent = [(run, pending.get(run.id)) for run in recent_runs]
        (client or self.client).views_publish(user_id=user_id, view=B.home_view(waiting, recent, notice=notice))

    def refresh_homes(self, view: RequestView) -> None:
        """After a request was posted, escalated or changed: republish the Home tab of its Slack approvers (its
        backup approvers too once escalated) and of the Slack users who decided on it (at most
        ``MAX_HOMES_REFRESHED``). Never raises: a Home tab left stale is
        logged (a database error in one line, without its SQL or parameters: ``bot.engine.log_error``)."""
        try:
            self._refresh_homes(view)
        except Exception as exc:  # noqa: BLE001 (the message itself was delivered)
            log_error(log, exc, "refreshing the Home tabs after request %s changed failed", view.request.id)

    def _refresh_homes(self, view: RequestView) -> None:
        lists = [view.approvers]
        if view.escalate_to is not None and (view.escalation or view.request.escalated_at is not None):
            lists.append(view.escalate_to)  # (the backup approvers may decide it from the escalation on)
        users: list[str] = [u for approvers in lists for u in approvers.slack_users]
        for group in (g for approvers in lists for g in approvers.slack_usergroups):
            users += sorted(self.directory.members(group))
        users += [d.actor_id for d in view.decisions if d.channel == "slack"]
        for user in list(dict.fromkeys(users))[:MAX_HOMES_REFRESHED]:
            try:
                self.publish_home(user)
            except (SlackApiError, SlackClientError, OSError) as exc:
                log.warning("views.publish for %s failed: %s", user, type(exc).__name__)
