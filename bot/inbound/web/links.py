"""Signed "View run" links and the run pages' session cookies (itsdangerous, https://itsdangerous.palletsprojects.com/).

A link is ``{HAZEL_BASE_URL}/runs/{run_id}?t={token}``: the token signs ``{"r": run_id, "p": person | None,
"e": ttl_sec}`` with ``HAZEL_WEB_SECRET`` and a timestamp, and is refused once it is older than the lifetime it
was made with (``HAZEL_LINK_TTL_SEC`` of the process that made it: ``hazel link`` says it) or than the serving
process's ``HAZEL_LINK_TTL_SEC``, whichever is shorter.
A link that names a person (``hazel link RUN --for PERSON``) lets its holder act on that run as that person
(channel ``web``); one that names nobody (the links on Slack cards and Jira issues, seen by a whole channel)
shows the run and nothing more. Opening a link starts a session limited to that run.

The session cookie signs ``Session`` (the same secret, another salt) and lasts ``HAZEL_WEB_SESSION_SEC``. A
session signed in with a REST token carries the token's key (``Signer.token_key``: an HMAC of it, never the
token), so that it lasts only while that token is one of ``HAZEL_API_TOKENS`` (``bot.inbound.web.auth``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from bot.settings import Settings

LINK_SALT = "hazel.run-link"
SESSION_SALT = "hazel.web-session"
MAX_LINKED_RUNS = 20
"""Runs a session opened from links remembers (the oldest is forgotten first)."""


class LinkError(Exception):
    """A link that cannot be used: ``expired`` (it was valid once) or not valid at all (tampered, another
    secret)."""

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class Grant:
    """What a valid link gives: the run, and the person it names (None: view only)."""

    run_id: str
    person: str | None


@dataclass(frozen=True)
class Session:
    """A signed-in browser. ``identity``: the REST token name (sign-in) or the person a link names, who acts
    on the channel ``web`` (None: view only); ``all_runs``: signed in at ``/login`` (else only ``runs``,
    the runs of the links opened, with the person each names); ``csrf``: the token every form must carry;
    ``flash``: a one-line message for the next page; ``token_key``: the key of the REST token signed in with
    (``Signer.token_key``), which must still be a configured token's for the sign-in to count."""

    identity: str | None = None
    all_runs: bool = False
    runs: dict[str, str | None] = field(default_factory=dict)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    flash: str | None = None
    token_key: str | None = None

    def may_see(self, run_id: str) -> bool:
        return self.all_runs or run_id in self.runs

    def identity_for(self, run_id: str) -> str | None:
        """Who acts on ``run_id``: the signed-in identity, else the person the run's link named."""
        return self.identity if self.all_runs else self.runs.get(run_id)

    def with_link(self, grant: Grant) -> "Session":
        runs = {k: v for k, v in self.runs.items() if k != grant.run_id}
        runs[grant.run_id] = grant.person
        return replace(self, runs=dict(list(runs.items())[-MAX_LINKED_RUNS:]))


class Signer:
    """Makes and reads links and session cookies with ``settings.web_secret``.

    Raises (constructor):
        ValueError: no ``HAZEL_WEB_SECRET``.
    """

    def __init__(self, settings: Settings) -> None:
        if settings.web_secret is None or not settings.web_secret.get_secret_value().strip():
            raise ValueError("set HAZEL_WEB_SECRET to sign run links and sessions")
        secret = settings.web_secret.get_secret_value().strip()
        self.base_url = (settings.base_url or "").rstrip("/") or None
        self.link_ttl_sec = settings.link_ttl_sec
        self.session_sec = settings.web_session_sec
        self._token_keys = hmac.new(secret.encode("utf-8"), b"hazel.web-token-key", hashlib.sha256).digest()
        self._links = URLSafeTimedSerializer(secret, salt=LINK_SALT)
        self._sessions = URLSafeTimedSerializer(secret, salt=SESSION_SALT)

    def token(self, run_id: str, person: str | None = None) -> str:
        """The signed token of a link to ``run_id`` (for ``person``, or view only)."""
        return self._links.dumps({"r": run_id, "p": person, "e": self.link_ttl_sec})

    def link(self, run_id: str, person: str | None = None) -> str | None:
        """``{base}/runs/{run_id}?t=…`` (None without ``HAZEL_BASE_URL``)."""
        if self.base_url is None:
            return None
        return f"{self.base_url}/runs/{run_id}?t={self.token(run_id, person)}"

    def grant(self, token: str) -> Grant:
        """What ``token`` gives.

        Raises:
            LinkError: expired, tampered with, or signed with another secret.
        """
        try:
            data, signed_at = self._links.loads(token, max_age=self.link_ttl_sec, return_timestamp=True)
            made_for = data.get("e") if isinstance(data, dict) else None
            if isinstance(made_for, (int, float)) and time.time() - signed_at.timestamp() > made_for:
                raise SignatureExpired("older than the lifetime it was made with")
        except SignatureExpired:
            raise LinkError("this link has expired: ask for a new one or sign in", expired=True) from None
        except BadSignature:
            raise LinkError("this link is not valid: ask for a new one or sign in") from None
        if not isinstance(data, dict) or not isinstance(data.get("r"), str):
            raise LinkError("this link is not valid: ask for a new one or sign in")
        person = data.get("p")
        return Grant(run_id=data["r"], person=person if isinstance(person, str) and person else None)

    def token_key(self, token: str) -> str:
        """What a session signed in with REST token ``token`` carries of it: 32 hex digits of an HMAC-SHA256 of
        the token under a key derived from ``HAZEL_WEB_SECRET`` (the cookie is signed, not encrypted: it holds
        neither the token nor a digest anyone could test guesses against without the secret)."""
        return hmac.new(self._token_keys, token.encode("utf-8"), hashlib.sha256).hexdigest()[:32]

    def dump_session(self, session: Session) -> str:
        return self._sessions.dumps({"i": session.identity, "a": session.all_runs, "r": session.runs,
                                     "c": session.csrf, "f": session.flash, "k": session.token_key})

    def load_session(self, cookie: str | None) -> Session | None:
        """The session of a cookie (None: none, expired, or not ours)."""
        if not cookie:
            return None
        try:
            data: Any = self._sessions.loads(cookie, max_age=self.session_sec)
        except BadSignature:  # SignatureExpired is a BadSignature
            return None
        if not isinstance(data, dict) or not isinstance(data.get("c"), str):
            return None
        runs = data.get("r") if isinstance(data.get("r"), dict) else {}
        key = data.get("k")
        return Session(identity=data.get("i"), all_runs=bool(data.get("a")), runs=runs, csrf=data["c"],
                       flash=data.get("f"), token_key=key if isinstance(key, str) else None)


def link_maker(settings: Settings):  # noqa: ANN201
    """``run_id -> URL | None`` for the "View run" links of Slack cards and Jira issues (view only), or None
    when ``HAZEL_BASE_URL`` or ``HAZEL_WEB_SECRET`` is missing (then no link is rendered)."""
    if not settings.base_url or settings.web_secret is None or not settings.web_secret.get_secret_value().strip():
        return None
    signer = Signer(settings)
    return lambda run_id: signer.link(run_id)
