"""App Home: the Home tab is published when the user opens it (``app_home_opened``, no scope needed,
https://docs.slack.dev/reference/events/app_home_opened) and again after requests change."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import App

from bot.inbound.slack.bridge import SlackBridge

log = logging.getLogger("hazel.slack")


def register(app: App, bridge: SlackBridge) -> None:
    """Add the ``app_home_opened`` listener to ``app``."""

    @app.event("app_home_opened")
    def on_home_opened(event: dict[str, Any], client: Any) -> None:
        if event.get("tab", "home") != "home":
            return  # the Messages tab: nothing to publish
        bridge.publish_home(event["user"], client=client)
