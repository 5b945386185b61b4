"""The Slack channel: Block Kit messages and modals, the Web API client, user group membership.

Takes a ``slack_sdk.WebClient`` (see ``client.make_client``); imports ``store.models`` only, never ``bot``.
The inbound side (Bolt: buttons, modals, ``/hazel``, App Home) lives in ``bot.inbound.slack``.
"""

from integrations.slack.channel import SlackChannel
from integrations.slack.client import make_client
from integrations.slack.directory import DirectoryError, SlackDirectory

__all__ = ["DirectoryError", "SlackChannel", "SlackDirectory", "make_client"]
