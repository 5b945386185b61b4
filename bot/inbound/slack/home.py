"""App Home: the Home tab is published when the user opens it (``app_home_opened``, no scope needed,
https://docs.slack.dev/reference/events/app_home_opened) and again after requests change."""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt import App

from bot.inbound.slack.bridge import SlackBridge

log = logging.getLogger("hazel.slack")


def register(app: App, bridge: SlackBridge) -> None:
    """Add the ``app_home_opened`` listener to ``app``, and after it one for every other event: the app's
    manifest subscribes to ``app_home_opened`` only, and an app configured with more subscriptions got 404 for
    each of their events (Slack counts those as failures) and Bolt's multi-line "[Suggestion] … @app.event"
    advice in the operator's log; they are answered 200 and logged in one line."""

    @app.event("app_home_opened")
    def on_home_opened(event: dict[str, Any], client: Any) -> None:
        if event.get("tab", "home") != "home":
            return  # the Messages tab: nothing to publish
        bridge.publish_home(event["user"], client=client)

    @app.event(re.compile(".*"))  # (after the listener above: Bolt gives an event to the first that matches)
    def on_other_event(event: dict[str, Any]) -> None:
        log.info("slack: an event of type %r is not one Hazel handles (the app's manifest subscribes to "
                 "app_home_opened only): ignored", str(event.get("type"))[:80])
