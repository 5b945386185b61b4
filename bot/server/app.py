"""``HazelApp``: the engine with its channels and notification delivery, as ``hazel serve``, ``hazel worker``,
the CLI and embedding code use it (``from hazel import Hazel`` is this class).

The engine (``bot.engine.Hazel``) writes outbox rows and never delivers them; here the configured channels
(console always, Slack and Jira when set up) and the hook sender are wired to a ``Deliverer`` that wakes on
every commit that wrote rows. ``drive`` delivers what is due for the run it drove when the run stops, so
that a CLI command prints the next steering request before it exits.
"""

from __future__ import annotations

import functools

from datetime import datetime
from typing import Any, Callable, Collection

from bot.engine import DriveResult, People, Registry, utcnow
from bot.engine import Hazel as Engine
from bot.ops.hooks import KIND as HOOK_KIND
from bot.ops.hooks import HookSender, urls_by_channel
from bot.ops.outbox import ChannelRouter, Deliverer
from bot.settings import Settings
from integrations.base import Channel
from integrations.console import ConsoleChannel
from store import Store


class HazelApp(Engine):
    """The engine plus delivery.

    Args:
        settings: configuration (default: from the environment).
        channels: channel implementations by kind (``slack``, ``jira``; ``bot.server.wiring`` builds them from
            settings); the console is always there and takes the requests of channels not configured.
        console: the console channel (to print elsewhere, e.g. stderr for ``--json`` output).
        store, registry, people, clock, load_workflows: as for ``bot.engine.Hazel``.
    """

    def __init__(self, settings: Settings | None = None, *, channels: dict[str, Channel] | None = None,
                 console: ConsoleChannel | None = None, store: Store | None = None,
                 registry: Registry | None = None, people: People | None = None,
                 clock: Callable[[], datetime] = utcnow, load_workflows: bool = True) -> None:
        super().__init__(settings, store=store, registry=registry, people=people, clock=clock,
                         load_workflows=load_workflows)
        self.console = console or ConsoleChannel()
        self.channels: dict[str, Channel] = {"console": self.console, **(channels or {})}
        for kind in ("jira", "slack"):  # in every process that delivers: approvers listed as people are
            # mentioned (on Jira: watch, on Slack: DMed) by their identities of that channel in the people file
            channel = self.channels.get(kind)
            if channel is not None and getattr(channel, "identities", False) is None:
                channel.identities = functools.partial(self._identities, kind)
        slack = self.channels.get("slack")
        if slack is not None and getattr(slack, "waits_on", False) is None:  # no DM to an approver the request
            # does not wait on (the starter under a self-approval ban)
            slack.waits_on = self._waits_on_slack_user
        self.router = ChannelRouter(self.channels, fallback=self.console)
        self.deliverer = Deliverer(self, self.router)
        if self.settings.hook_secret is not None:  # (a process that cannot sign leaves hook rows to one that can)
            self.deliverer.senders[HOOK_KIND] = HookSender(self.settings).send
            self.deliverer.sender_channels[HOOK_KIND] = frozenset(urls_by_channel(self.settings))  # (rows hold
            # no URL: one whose URL this process does not have is left to a process that has it)
        self.on_outbox(self.deliverer.wake)  # a commit that wrote outbox rows wakes delivery, not its sweep

    def _identities(self, kind: str, person: str) -> frozenset[str]:
        """``person``'s identities on channel ``kind`` (``slack``, ``jira``) in the people file."""
        return self.people.identities_of(person).get(kind, frozenset())

    def _waits_on_slack_user(self, view: Any, user: str) -> bool:
        """Whether request ``view.request`` waits on Slack user ``user`` (``Access.waits_on``) or they already
        voted on it (a reminder still reaches them): the Slack channel DMs only those.

        Raises:
            DirectoryError: Slack could not list a user group's members (nothing cached)."""
        directory = self.channels["slack"].directory
        actor = self.identify(channel="slack", id=user, groups=lambda wanted: directory.groups_of(user, wanted),
                              email=lambda: directory.email_of(user))
        access = self.access(request_id=view.request.id, actor=actor)
        return access.waits_on or access.earlier is not None

    def drive(self, **kwargs: Any) -> DriveResult:
        """``bot.engine.Hazel.drive``, then deliver the due notifications of the run driven (only that run's:
        the rest are delivered by ``hazel serve`` / ``hazel worker``, whose ``Deliverer`` sweeps them all)."""
        result = super().drive(**kwargs)
        self.deliverer.deliver_due(run_ids=[result.run_id])
        return result

    def deliver_due(self, *, run_ids: Collection[str] | None = None) -> int:
        """Deliver the due notifications now, in this thread: every one, or with ``run_ids`` only those of
        these runs (a CLI command's own). Returns how many were sent."""
        return self.deliverer.deliver_due(run_ids=run_ids)

    def close(self) -> None:
        self.deliverer.stop()
        super().close()
