"""Building concrete channels from settings: the only place that knows which integrations exist."""

from __future__ import annotations

import logging

from typing import TYPE_CHECKING

from bot.settings import Settings
from integrations.base import Channel

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.service import Hazel

log = logging.getLogger("hazel")


def channels_from_settings(settings: Settings) -> dict[str, Channel]:
    """The configured channels by kind (``slack``, ``jira``). Unconfigured ones are absent: their requests
    fall back to the console (see ``bot.outbox.ChannelRouter``)."""
    channels: dict[str, Channel] = {}
    if settings.jira_configured:
        from bot.jira_app import build_channel

        channels["jira"] = build_channel(settings)
    return channels


def http_routers(hazel: "Hazel", settings: Settings) -> list["APIRouter"]:
    """The HTTP routers of the configured channels and the REST API, mounted by ``hazel serve``."""
    routers: list[APIRouter] = []
    from bot.api import api_router

    routers.append(api_router(hazel, settings))  # always mounted; without a token it answers 503
    if settings.jira_configured:
        from bot.jira_app import jira_router

        routers.append(jira_router(hazel, settings))
    return routers
