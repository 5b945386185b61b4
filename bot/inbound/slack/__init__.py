"""Slack, inbound: a Bolt ``App`` (sync) for buttons, modals, the ``/hazel`` command and App Home, served at
``POST /slack/events`` or over Socket Mode. Outbound messages are ``integrations.slack.SlackChannel``'s.

```python
routers = slack_routers(hazel, settings, channel=slack)   # bot.server.wiring.http_routers: POST /slack/events
socket = start_socket_mode(hazel, settings, channel=slack)   # hazel serve --socket-mode (SLACK_APP_TOKEN)
```
"""

from __future__ import annotations

import logging
from typing import Callable

from fastapi import APIRouter
from slack_bolt import App
from slack_bolt.authorization import AuthorizeResult

from bot.engine import Hazel
from bot.inbound.slack import commands, home, interactions
from bot.inbound.slack.bridge import SlackBridge
from bot.inbound.slack.http import slack_router
from bot.inbound.slack.socket_mode import SocketModeConnection, socket_mode_handler, socket_mode_web_client
from bot.settings import Settings
from integrations.slack import SlackChannel, SlackDirectory, make_client

__all__ = ["SocketModeConnection", "build_app", "slack_router", "slack_routers", "socket_mode_handler",
           "start_socket_mode"]
log = logging.getLogger("hazel.slack")


def build_app(hazel: Hazel, settings: Settings, *, channel: SlackChannel | None = None,
              socket_mode: bool = False) -> App:
    """The Bolt app for ``hazel``. It shares ``channel``'s client and user group cache (the Slack channel
    Hazel delivers through, when Slack is configured as one) and makes that channel refresh App Home tabs
    when requests change.

    Raises:
        ValueError: ``SLACK_BOT_TOKEN`` is not set, or ``SLACK_SIGNING_SECRET`` is not set for HTTP.
    """
    if settings.slack_bot_token is None:
        raise ValueError("Slack needs SLACK_BOT_TOKEN")
    if settings.slack_signing_secret is None and not socket_mode:
        raise ValueError("Slack over HTTP needs SLACK_SIGNING_SECRET (Bolt verifies each request with it)")
    if channel is not None:
        client, directory = channel.client, channel.directory
    else:
        client = make_client(settings.slack_bot_token.get_secret_value(), base_url=settings.slack_api_url)
        directory = SlackDirectory(client)
    bridge = SlackBridge(hazel, client, directory)
    if channel is not None and channel.on_change is None:
        channel.on_change = bridge.refresh_homes
    secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
    logging.getLogger("slack_bolt.App").addFilter(_not_token_skipped)
    app = App(client=client, signing_secret=secret, authorize=settings_authorize(client.token),
              request_verification_enabled=not socket_mode, name=BOLT_APP_NAME)
    interactions.register(app, bridge)
    commands.register(app, bridge)
    home.register(app, bridge)
    return app


BOLT_APP_NAME = "slack_bolt.hazel"
"""Bolt's name for Hazel's app, which is also the name of the logger Bolt gives each request's listeners
(``slack_bolt.logger.get_bolt_app_logger``): Bolt sets that logger's level to the root logger's on every request,
so it must not be one of Hazel's own (named ``hazel``, it reset the ``hazel`` logger at every click)."""


def _not_token_skipped(record: logging.LogRecord) -> bool:
    """Drop Bolt's warnings that ``token`` is ignored when ``authorize`` or ``client`` is given (slack_bolt
    1.30, ``App.__init__``: ``warning_token_skipped``, and ``warning_client_prioritized_and_token_skipped``
    when ``SLACK_BOT_TOKEN`` is in the environment, which Bolt reads itself): the client carries the same
    token, ``settings_authorize`` hands it back, and the lines would open every ``hazel serve`` log as if
    something were misconfigured."""
    message = record.getMessage()
    return ("`token` (or SLACK_BOT_TOKEN env variable) will be ignored" not in message
            and "As you gave `client` as well, `token` will be unused" not in message)


def settings_authorize(token: str) -> Callable[..., AuthorizeResult]:
    """Bolt's ``authorize=`` for the one workspace whose bot token Hazel's settings hold: no network.

    Without it, an ``App`` given only a client authorizes with ``SingleTeamAuthorization``
    (slack_bolt 1.30, ``middleware/authorization/single_team_authorization.py``), which calls ``auth.test`` on
    every request until one succeeds (``token_verification_enabled=False`` only skips the call in ``App()``)
    and catches only ``SlackApiError``: while Slack's Web API cannot be reached (a URLError), every request
    to ``/slack/events`` failed with 500 and each click and command was lost. The documented ``authorize``
    callable (``CallableAuthorize``, run by ``MultiTeamsAuthorization``) returns an ``AuthorizeResult`` built
    here from the token and the request's own team and user ids, so a request is handled whether Slack
    answers or not, and replies wait in the outbox. Caching a successful ``auth.test`` would still fail
    after a restart during an outage. What is lost: ``bot_id``/``bot_user_id``, which only Bolt's
    ``IgnoringSelfEvents`` reads; Hazel listens to no event its bot could send (buttons, modals, ``/hazel``,
    ``app_home_opened``).
    """
    def authorize(enterprise_id: str | None, team_id: str | None, user_id: str | None) -> AuthorizeResult:
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, user_id=user_id, bot_token=token)

    return authorize


def slack_routers(hazel: Hazel, settings: Settings, *, channel: SlackChannel | None = None) -> list[APIRouter]:
    """``POST /slack/events`` when ``SLACK_BOT_TOKEN`` and ``SLACK_SIGNING_SECRET`` are set; none (with a
    warning) without the signing secret, since Bolt could not verify requests."""
    if settings.slack_bot_token is None:
        return []
    if settings.slack_signing_secret is None:
        log.warning("SLACK_SIGNING_SECRET is not set: POST /slack/events is off (Socket Mode still works)")
        return []
    return [slack_router(build_app(hazel, settings, channel=channel),
                         settings.slack_signing_secret.get_secret_value())]


def start_socket_mode(hazel: Hazel, settings: Settings, *, channel: SlackChannel | None = None,
                      first_backoff_sec: float = 1.0, max_backoff_sec: float = 30.0) -> SocketModeConnection:
    """Connect to Slack over Socket Mode (``SLACK_APP_TOKEN``) in the background; returns at once, whether
    Slack answers or not (``SocketModeConnection``: tries again with backoff from ``first_backoff_sec`` up to
    ``max_backoff_sec`` while Slack cannot be reached; ``.close()`` stops it).

    Raises:
        ValueError: ``SLACK_BOT_TOKEN`` or ``SLACK_APP_TOKEN`` is not set.
    """
    if settings.slack_app_token is None:
        raise ValueError("Socket Mode needs SLACK_APP_TOKEN (an app-level token, xapp-…)")
    handler = socket_mode_handler(build_app(hazel, settings, channel=channel, socket_mode=True),
                                  settings.slack_app_token.get_secret_value(),
                                  web_client=socket_mode_web_client(settings.slack_api_url))
    return SocketModeConnection(handler, first_backoff_sec=first_backoff_sec,
                                max_backoff_sec=max_backoff_sec).start()
