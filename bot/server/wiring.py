"""Building concrete channels and HTTP routers from settings: the only place that knows which integrations
exist."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from bot.settings import Settings
from integrations.base import Channel

if TYPE_CHECKING:
    from fastapi import APIRouter

    from bot.server.app import HazelApp
    from integrations.jira import JiraChannel
    from integrations.slack import SlackChannel

log = logging.getLogger("hazel")


def slack_channel(settings: Settings) -> "SlackChannel":
    """The Slack channel on ``HAZEL_SLACK_API_URL`` with ``SLACK_BOT_TOKEN``."""
    from bot.inbound.web import link_maker
    from integrations.slack import SlackChannel, make_client

    assert settings.slack_bot_token is not None
    return SlackChannel(make_client(settings.slack_bot_token.get_secret_value(), base_url=settings.slack_api_url),
                        link_for=link_maker(settings))


def jira_channel(settings: Settings) -> "JiraChannel":
    """The Jira channel from the ``JIRA_*`` settings (only when ``settings.jira_configured``).

    Raises:
        ConfigurationError: ``JIRA_API_TOKEN`` without ``JIRA_USER`` (and no ``JIRA_PAT``): the token is sent
            with the user's e-mail (``_jira_credential_problem``).
    """
    from integrations.jira import JiraChannel, JiraOptions, build_client

    problem = _jira_credential_problem(settings)
    if problem is not None:
        from bot.engine import ConfigurationError

        raise ConfigurationError(problem)
    secret = settings.jira_api_token.get_secret_value() if settings.jira_api_token else None
    pat = settings.jira_pat.get_secret_value() if settings.jira_pat else None
    client = build_client(url=settings.jira_url or "", cloud=settings.jira_cloud, user=settings.jira_user,
                          api_token=secret, pat=pat, timeout_sec=settings.jira_timeout_sec)
    defaults = JiraOptions(issue_type=settings.jira_issue_type or "Task",
                           approve_status=settings.jira_approve_status or None,
                           reject_status=settings.jira_reject_status or None,
                           done_status=settings.jira_done_status or None,
                           rejected_status=settings.jira_rejected_status or None)
    from bot.inbound.web import link_maker

    return JiraChannel(client=client, cloud=settings.jira_cloud, defaults=defaults, link_for=link_maker(settings))


def _jira_credential_problem(settings: Settings) -> str | None:
    """Why the ``JIRA_*`` settings turn Jira on (``settings.jira_configured``) with a credential it cannot send
    (the settings named, in one line), or None. ``JIRA_URL`` with ``JIRA_API_TOKEN`` but no ``JIRA_USER`` was
    taken as configured and failed where the channel was built, as ``unexpected ValueError``: in every
    command, and in ``hazel serve`` and ``hazel worker``."""
    if settings.jira_configured and settings.jira_pat is None and not settings.jira_user:
        return ("JIRA_API_TOKEN is set but JIRA_USER is not: Jira takes the API token with the bot account's "
                "e-mail (JIRA_USER); on Jira Server / Data Center set JIRA_PAT instead")
    return None


def channels_from_settings(settings: Settings) -> dict[str, Channel]:
    """The configured channels by kind (``slack``, ``jira``). Unconfigured ones are absent: their requests
    fall back to the console (see ``bot.ops.outbox.ChannelRouter``).

    Raises:
        ConfigurationError: a channel turned on without what it needs (``jira_channel``).
    """
    channels: dict[str, Channel] = {}
    if settings.slack_configured:
        channels["slack"] = slack_channel(settings)
    if settings.jira_configured:
        channels["jira"] = jira_channel(settings)
    return channels


def _channel(hazel: "HazelApp", kind: str) -> Any:
    return getattr(hazel, "channels", {}).get(kind)


def http_routers(hazel: "HazelApp", settings: Settings) -> list["APIRouter"]:
    """The HTTP routers of the configured channels and the REST API, mounted by ``hazel serve``; the Slack and
    Jira adapters share the channel objects ``hazel`` delivers through."""
    routers: list[APIRouter] = []
    if settings.slack_configured:
        from bot.inbound.slack import slack_routers

        routers.extend(slack_routers(hazel, settings, channel=_channel(hazel, "slack")))
    if not any(getattr(r, "path", None) == "/slack/events" for router in routers for r in router.routes):
        missing = [name for name, value in (("SLACK_BOT_TOKEN", settings.slack_bot_token),
                                            ("SLACK_SIGNING_SECRET", settings.slack_signing_secret)) if value is None]
        need = " and ".join(missing) or "SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET"
        routers.append(_off("/slack/events", f"Slack is off on this server: set {need}"))
    from bot.inbound.api import api_router

    routers.append(api_router(hazel, settings))  # always mounted; without a token it answers 503
    from bot.inbound.web import web_router

    routers.append(web_router(hazel, settings))  # the run pages; without HAZEL_WEB_SECRET they answer 503
    if settings.jira_configured:
        from bot.inbound.jira import jira_router

        routers.append(jira_router(hazel, settings, channel=_channel(hazel, "jira") or jira_channel(settings)))
    else:
        routers.append(_off("/jira/webhook", "Jira is off on this server: set JIRA_URL with JIRA_USER and "
                                             "JIRA_API_TOKEN (Cloud), or with JIRA_PAT (Server/Data Center)"))
    return routers


def _off(path: str, message: str) -> "APIRouter":
    """``POST path`` answering 503 ``ChannelOffError`` with ``message`` (what to set), as the REST API and the
    run pages answer when they are off: a Slack or Jira admin testing the URL learns why, not "no such endpoint"."""
    from fastapi import APIRouter

    from bot.inbound.api_errors import error_response

    router = APIRouter(include_in_schema=False)

    @router.post(path, response_model=None)
    async def off():  # noqa: ANN202  (a JSONResponse)
        return error_response(503, "ChannelOffError", message)

    return router


def start_socket_mode(hazel: "HazelApp", settings: Settings):  # noqa: ANN201
    """Connect the Slack app over Socket Mode (``hazel serve --socket-mode``) in the background, trying again while
    Slack cannot be reached; returns the ``SocketModeConnection`` to close (``bot.inbound.slack.start_socket_mode``).

    Raises:
        ValueError: ``SLACK_BOT_TOKEN`` or ``SLACK_APP_TOKEN`` is not set.
    """
    from bot.inbound.slack import start_socket_mode as start

    return start(hazel, settings, channel=_channel(hazel, "slack"))
