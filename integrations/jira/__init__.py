"""Jira: steering requests as issues, answered by comments and transitions (see README, "Jira").

- ``channel``: ``JiraChannel`` posts requests, outcomes and progress (outbox delivery).
- ``webhook``: the signature check, the webhook shapes of Cloud and Server / Data Center as ``JiraEvent``,
  and the comment commands.
- ``client``: the ``jira`` library client, error translation, ``JiraDirectory`` (Hazel's account, groups).
- ``workflow``: moving an issue to a status through as many transitions as its workflow needs (``walk``).
- ``adf``: the text of comment bodies in Atlassian Document Format (REST API v3).
- ``render``: the texts; ``options``: per steering point settings (``jira_*`` options).
"""

from integrations.jira.channel import JiraChannel, issue_of, message_key, point_label
from integrations.jira.client import JiraDirectory, build_client
from integrations.jira.options import JiraOptions
from integrations.jira.webhook import (
    Command,
    JiraEvent,
    JiraUser,
    MalformedWebhookError,
    parse_command,
    parse_event,
    sign,
    verify_signature,
)

__all__ = [
    "Command", "JiraChannel", "JiraDirectory", "JiraEvent", "JiraOptions", "JiraUser", "MalformedWebhookError",
    "build_client", "issue_of", "message_key", "parse_command", "parse_event", "point_label", "sign",
    "verify_signature",
]
