"""Who a Slack user is, for permissions: which of the user groups Hazel cares about they are in, and the
email of their profile (to match them with a person of the people file).

Members come from ``usergroups.users.list`` (scope ``usergroups:read``,
https://docs.slack.dev/reference/methods/usergroups.users.list), emails from ``users.info`` (scopes
``users:read`` and ``users:read.email``, https://docs.slack.dev/reference/methods/users.info: ``user.profile.email``
is present only with ``users:read.email``). Both are cached for ``ttl_sec``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

log = logging.getLogger("hazel.slack")


class DirectoryError(RuntimeError):
    """Slack could not tell who is in a user group, or whose a user's email is (and nothing usable is
    cached)."""


class SlackDirectory:
    """User group members, cached.

    Args:
        client: a ``WebClient`` (with Hazel's retry handlers).
        ttl_sec: how long a group's member list is trusted; an expired list is still used if Slack fails.
        clock: monotonic seconds (tests).
    """

    def __init__(self, client: WebClient, *, ttl_sec: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.ttl_sec = ttl_sec
        self.clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._emails: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def members(self, usergroup: str) -> frozenset[str]:
        """User ids in ``usergroup`` (``S…``).

        Raises:
            DirectoryError: Slack failed and no earlier answer is cached.
        """
        now = self.clock()
        with self._lock:
            cached = self._cache.get(usergroup)
        if cached is not None and now - cached[0] < self.ttl_sec:
            return cached[1]
        try:
            response = self.client.usergroups_users_list(usergroup=usergroup)
        except (SlackApiError, SlackClientError, OSError) as exc:
            if cached is not None:
                log.warning("usergroups.users.list %s failed (%s); using the list from %.0fs ago", usergroup,
                            type(exc).__name__, now - cached[0])
                return cached[1]
            raise DirectoryError(f"Slack could not list the members of user group {usergroup}: "
                                 f"{_reason(exc)}") from exc
        users = frozenset(response.get("users") or ())
        with self._lock:
            self._cache[usergroup] = (now, users)
        return users

    def groups_of(self, user_id: str, usergroups: Iterable[str]) -> frozenset[str]:
        """Which of ``usergroups`` have ``user_id`` as a member.

        Raises:
            DirectoryError: as ``members``.
        """
        return frozenset(g for g in sorted(set(usergroups)) if user_id in self.members(g))


    def email_of(self, user_id: str) -> str | None:
        """The email of ``user_id``'s profile (``users.info``), or None when Slack shows none (a user the people
        file does not match by email: known by their Slack id alone). An earlier answer is used while Slack
        fails (logged).

        Raises:
            DirectoryError: Slack could not answer and nothing is cached: Hazel cannot tell whether the user is
                a person of the people file matched by email, and taking them for someone else would let one
                person vote twice or approve their own run (a fresh-user finding, s23), so nothing is decided.
        """
        now = self.clock()
        with self._lock:
            cached = self._emails.get(user_id)
        if cached is not None and now - cached[0] < self.ttl_sec:
            return cached[1]
        try:
            response = self.client.users_info(user=user_id)
        except (SlackApiError, SlackClientError, OSError) as exc:
            if cached is not None:
                log.warning("users.info %s failed (%s); using their email from %.0fs ago", user_id, _reason(exc),
                            now - cached[0])
                return cached[1]
            raise DirectoryError(f"Slack could not tell who user {user_id} is (users.info: {_reason(exc)}), which "
                                 f"Hazel needs to match them with a person of the people file") from exc
        profile = (response.get("user") or {}).get("profile") or {}
        email = profile.get("email") or None
        with self._lock:
            self._emails[user_id] = (now, email)
        return email


def _reason(exc: Exception) -> str:
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or exc.response.status_code)
    return type(exc).__name__
