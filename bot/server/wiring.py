"""Building concrete channels from settings: the only place that knows which integrations exist."""

from __future__ import annotations

import logging

from typing import TYPE_CHECKING

from bot.settings import Settings
from integrations.base import Channel

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.engine.hazel import Hazel

log = logging.getLogger("hazel")


def channels_from_settings(settings: Settings) -> dict[str, Channel]:
    """The configured channels by kind (``slack``, ``jira``). Unconfigured ones are absent: their requests
    fall back to the console (see ``bot.ops.outbox.ChannelRouter``)."""
    channels: dict[str, Channel] = {}
    if settings.slack_configured:
        from bot.inbound.slack import slack_channel

        channels["slack"] = slack_channel(settings)
    if settings.jira_configured:
        from bot.inbound.jira import build_channel

        channels["jira"] = build_channel(settings)
    return channels


def http_routers(hazel: "Hazel", settings: Settings) -> list["APIRouter"]:
    """The HTTP routers of the configured channels and the REST API, mounted by ``hazel serve``."""
    routers: list[APIRouter] = []
    if settings.slack_configured:
        from bot.inbound.slack import slack_routers

        routers.extend(slack_routers(hazel, settings))
    from bot.inbound.api import api_router

    routers.append(api_router(hazel, settings))  # always mounted; without a token it answers 503
    if settings.jira_configured:
        from bot.inbound.jira import jira_router

        routers.append(jira_router(hazel, settings))
    return routers


def start_socket_mode(hazel: "Hazel", settings: Settings):  # noqa: ANN201
    """Connect the Slack app over Socket Mode (``hazel serve --socket-mode``); returns the handler to close."""
    from bot.inbound.slack import start_socket_mode as start

    return start(hazel, settings)
