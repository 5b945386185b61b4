"""The Jira REST client (the ``jira`` library), the translation of its failures, and who is who in Jira.

Failures become ``DeliveryError`` (retry later: network errors, timeouts, 408, 409, 429, 5xx) or
``PermanentDeliveryError`` (other 4xx: a missing project or issue type, no permission). Their messages carry
the HTTP status and Jira's own error text only: ``str(JIRAError)`` includes the request headers, and with
them the credentials, so it is never used and never chained.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator
from urllib.parse import quote

import requests
from jira import JIRA, JIRAError

from integrations.base import DeliveryError, PermanentDeliveryError

log = logging.getLogger("hazel.jira")
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})


def build_client(*, url: str, cloud: bool, user: str | None = None, api_token: str | None = None,
                 pat: str | None = None, timeout_sec: float = 10.0, max_retries: int = 0,
                 get_server_info: bool = False) -> JIRA:
    """A ``jira.JIRA`` client.

    Cloud authenticates with basic auth ``(user e-mail, API token)``; Server / Data Center with a personal
    access token (``pat``, sent as a bearer token), or with basic auth when no token is given. Retries are
    left to the outbox (``max_retries=0``: a failing call raises at once instead of sleeping in a worker).
    The deployment type is set from ``cloud`` rather than fetched (``get_server_info=False``): it decides
    whether users are addressed by ``accountId`` or ``username``.

    Raises:
        ValueError: neither ``pat`` nor ``user`` and ``api_token`` are given.
    """
    auth: dict[str, Any] = {}
    if pat:
        auth["token_auth"] = pat
    elif user and api_token:
        auth["basic_auth"] = (user, api_token)
    else:
        raise ValueError("Jira needs JIRA_PAT, or JIRA_USER and JIRA_API_TOKEN")
    client = JIRA(server=url, get_server_info=get_server_info, max_retries=max_retries, timeout=timeout_sec,
                  **auth)
    if not get_server_info:
        client.deploymentType = "Cloud" if cloud else "Server"
    return client


def delivery_error(exc: Exception, what: str) -> DeliveryError:
    """The ``DeliveryError`` for a failed Jira call (``what``: e.g. ``"create issue"``), without secrets."""
    if isinstance(exc, JIRAError):
        status = exc.status_code
        text = " ".join(str(exc.text or "").split())[:300]
        message = f"Jira {what} failed: HTTP {status if status is not None else '?'}" + (f": {text}" if text else "")
        if status is not None and 400 <= status < 500 and status not in TRANSIENT_STATUS:
            return PermanentDeliveryError(message)
        return DeliveryError(message, retry_after_sec=_retry_after(exc.response))
    return DeliveryError(f"Jira {what} failed: {type(exc).__name__}: {str(exc)[:200]}")


def _retry_after(response: Any) -> float | None:
    value = getattr(response, "headers", {}).get("Retry-After") if response is not None else None
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


@contextmanager
def jira_call(what: str) -> Iterator[None]:
    """Run Jira calls; turn their failures into ``DeliveryError`` (see ``delivery_error``).

    Raises:
        DeliveryError, PermanentDeliveryError.
    """
    try:
        yield
    except (JIRAError, requests.RequestException) as exc:
        raise delivery_error(exc, what) from None


def user_id(user: dict[str, Any] | None) -> str | None:
    """A Jira user's identity as Hazel's approver lists name it: the ``accountId`` (Cloud), else the user
    ``name`` (Server / Data Center; its ``key`` as a last resort)."""
    if not isinstance(user, dict):
        return None
    for field in ("accountId", "name", "key"):
        value = user.get(field)
        if isinstance(value, str) and value:
            return value
    return None


class JiraDirectory:
    """Who is who: Hazel's own Jira account (to ignore its own comments and transitions) and the groups of a
    person (for approvers given as groups), cached for ``group_ttl_sec``.

    Sources: ``GET /rest/api/2/myself``; ``GET /rest/api/2/user?accountId=…&expand=groups`` (Cloud) or
    ``?username=…&expand=groups`` (Server), through ``JIRA.myself`` and ``JIRA.user``.
    """

    def __init__(self, client: JIRA, *, group_ttl_sec: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.group_ttl_sec = group_ttl_sec
        self.clock = clock
        self._own_id: str | None = None
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def own_id(self) -> str:
        """Hazel's own account id (Cloud) or user name (Server), fetched once.

        Raises:
            DeliveryError: Jira did not answer (the caller asks Jira to send the webhook again).
        """
        if self._own_id is None:
            with jira_call("read own account"):
                me = self.client.myself()
            found = user_id(me)
            if not found:
                raise PermanentDeliveryError("Jira's /myself answered without an accountId or name")
            self._own_id = found
        return self._own_id

    def groups_of(self, person: str) -> frozenset[str]:
        """The names of the groups ``person`` (account id or user name) belongs to.

        Raises:
            DeliveryError: Jira did not answer.
        """
        now = self.clock()
        with self._lock:
            cached = self._groups.get(person)
        if cached is not None and now - cached[0] < self.group_ttl_sec:
            return cached[1]
        with jira_call("read the groups of a user"):
            user = self.client.user(quote(person, safe=""), expand="groups")
        raw = getattr(user, "raw", None) or {}
        items = (raw.get("groups") or {}).get("items") or []
        groups = frozenset(g["name"] for g in items if isinstance(g, dict) and g.get("name"))
        with self._lock:
            self._groups[person] = (now, groups)
        return groups
