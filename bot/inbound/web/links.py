"""Signed "View run" links and the run pages' session cookies (itsdangerous, https://itsdangerous.palletsprojects.com/).

A link is ``{HAZEL_BASE_URL}/runs/{run_id}?t={token}``: the token signs ``{"r": run_id, "p": person | None,
"e": ttl_sec}`` (and ``"m": minted_by`` when ``p`` names a person) with ``HAZEL_WEB_SECRET`` and a timestamp, and
is refused once it is older than the lifetime it was made with (``HAZEL_LINK_TTL_SEC`` of the process that made
it: ``hazel link`` says it) or than the serving process's ``HAZEL_LINK_TTL_SEC``, whichever is shorter.
A link that names a person (``hazel link RUN --for PERSON``) lets its holder act on that run for that person,
as a proxy of the console operator who made it (``minted_by``; channel ``web``, recorded as "operator M for
PERSON": ``Hazel.link_actor``); one that names nobody (the links on Slack cards and Jira issues, seen by a whole
channel) shows the run and nothing more. A person link made before links carried their maker (no ``"m"``)
shows the run only (``Grant.outdated``): the holder is told to ask for a new one. Opening a link starts a
session limited to that run.

The session cookie signs ``Session`` (the same secret, another salt) and lasts ``HAZEL_WEB_SESSION_SEC``:
``{"i": identity, "a": all_runs, "r": {run_id: person | None}, "m": {run_id: minted_by}, "c": csrf, "f": flash,
"k": token_key}`` (``"m"`` is new: a cookie without it loads, each of its person links showing its run only). A
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
    """What a valid link gives: the run, the person it names (None: view only) and the console operator who
    made it (``minted_by``: the holder acts for ``person`` as that operator's proxy; None on a view-only link,
    and on a person link from before links carried their maker, which is view only: ``outdated``).
    ``acts_until``: when the link it came from expires (Unix seconds; None: a session from before links
    bounded it), after which the session opened with it shows the run only (``lapsed``): an operator who made
    a link valid for 5 s did not hand its holder the person's vote for the session's 12 hours (s23 F10)."""

    run_id: str
    person: str | None
    minted_by: str | None = None
    acts_until: float | None = None

    @property
    def acts(self) -> bool:
        """True when the holder may act: the link names a person and who made it, and has not expired."""
        return self.person is not None and self.minted_by is not None and not self.lapsed

    @property
    def lapsed(self) -> bool:
        """True for a person link whose lifetime is over: the session that opened it shows the run only."""
        return (self.person is not None and self.minted_by is not None and self.acts_until is not None
                and time.time() >= self.acts_until)

    @property
    def outdated(self) -> bool:
        """True for a person link that does not say who made it (an older Hazel's): it shows the run only."""
        return self.person is not None and self.minted_by is None


OUTDATED_LINK = ("this link for {person} was made by an older Hazel, which did not record who made it: it shows "
                 "the run only; ask for a new one (hazel link {run_id} --for {person}) or sign in")
"""What a page says of an ``outdated`` person link (``{person}``: whom it names; ``{run_id}``: its run)."""
LAPSED_LINK = ("the link for {person} you opened this run with has expired (it acted until {until}): the run is "
               "shown only; ask for a new one (hazel link {run_id} --for {person}) or sign in")
"""What a page says of a ``lapsed`` person link (``{until}``: when it expired, UTC)."""


@dataclass(frozen=True)
class Session:
    """A signed-in browser. ``identity``: the REST token name of a sign-in, who acts on the channel ``web``
    (None: not signed in); ``all_runs``: signed in at ``/login`` (else only ``runs``, the runs of the links
    opened, with the person each names, and ``minted_by``, who made each of those person links: a run whose
    person has no maker here, from an older link or cookie, shows the run only); ``csrf``: the token every form
    must carry; ``flash``: a one-line message for the next page; ``token_key``: the key of the REST token
    signed in with (``Signer.token_key``), which must still be a configured token's for the sign-in to count."""

    identity: str | None = None
    all_runs: bool = False
    runs: dict[str, str | None] = field(default_factory=dict)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    flash: str | None = None
    token_key: str | None = None
    minted_by: dict[str, str] = field(default_factory=dict)
    until: dict[str, float] = field(default_factory=dict)

    def may_see(self, run_id: str) -> bool:
        return self.all_runs or run_id in self.runs

    def link_for(self, run_id: str) -> Grant | None:
        """The link this session opened ``run_id`` with (None: none)."""
        if run_id not in self.runs:
            return None
        return Grant(run_id=run_id, person=self.runs[run_id], minted_by=self.minted_by.get(run_id),
                     acts_until=self.until.get(run_id))

    def acts_on(self, run_id: str) -> bool:
        """True when someone acts on ``run_id`` from this session: a sign-in, or a person link with its maker."""
        if self.all_runs:
            return self.identity is not None
        grant = self.link_for(run_id)
        return grant is not None and grant.acts

    def with_link(self, grant: Grant) -> "Session":
        """This session with ``grant``'s run (the newest; the oldest of more than ``MAX_LINKED_RUNS`` forgotten)."""
        runs = {k: v for k, v in self.runs.items() if k != grant.run_id}
        runs[grant.run_id] = grant.person
        kept = dict(list(runs.items())[-MAX_LINKED_RUNS:])
        makers = {k: v for k, v in self.minted_by.items() if k in kept and k != grant.run_id}
        until = {k: v for k, v in self.until.items() if k in kept and k != grant.run_id}
        if grant.acts:
            makers[grant.run_id] = grant.minted_by  # type: ignore[assignment]  (acts: not None)
            if grant.acts_until is not None:
                until[grant.run_id] = grant.acts_until
        return replace(self, runs=kept, minted_by=makers, until=until)


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

    def token(self, run_id: str, person: str | None = None, *, minted_by: str | None = None) -> str:
        """The signed token of a link to ``run_id``: for ``person``, made by the console operator
        ``minted_by`` (``Hazel.operator().id``), or view only (neither; the same token as before links carried
        their maker).

        Raises:
            ValueError: ``person`` without ``minted_by`` (or ``minted_by`` without ``person``).
        """
        if (person is None) != (minted_by is None) or person == "" or minted_by == "":
            raise ValueError("a person link names both the person and the operator who made it")
        data: dict[str, Any] = {"r": run_id, "p": person, "e": self.link_ttl_sec}
        if minted_by is not None:
            data["m"] = minted_by
        return self._links.dumps(data)

    def link(self, run_id: str, person: str | None = None, *, minted_by: str | None = None) -> str | None:
        """``{base}/runs/{run_id}?t=…`` (None without ``HAZEL_BASE_URL``); see ``token``.

        Raises:
            ValueError: as ``token``.
        """
        if self.base_url is None:
            return None
        return f"{self.base_url}/runs/{run_id}?t={self.token(run_id, person, minted_by=minted_by)}"

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
        person, maker = data.get("p"), data.get("m")
        person = person if isinstance(person, str) and person else None
        lifetime = made_for if isinstance(made_for, (int, float)) else self.link_ttl_sec
        return Grant(run_id=data["r"], person=person,
                     minted_by=maker if person is not None and isinstance(maker, str) and maker else None,
                     acts_until=signed_at.timestamp() + lifetime if person is not None else None)

    def token_key(self, token: str) -> str:
        """What a session signed in with REST token ``token`` carries of it: 32 hex digits of an HMAC-SHA256 of
        the token under a key derived from ``HAZEL_WEB_SECRET`` (the cookie is signed, not encrypted: it holds
        neither the token nor a digest anyone could test guesses against without the secret)."""
        return hmac.new(self._token_keys, token.encode("utf-8"), hashlib.sha256).hexdigest()[:32]

    def dump_session(self, session: Session) -> str:
        return self._sessions.dumps({"i": session.identity, "a": session.all_runs, "r": session.runs,
                                     "m": session.minted_by, "c": session.csrf, "f": session.flash,
                                     "k": session.token_key, "u": session.until})

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
        makers = data.get("m") if isinstance(data.get("m"), dict) else {}  # (none in a cookie from before)
        until = data.get("u") if isinstance(data.get("u"), dict) else {}  # (none in a cookie from before)
        key = data.get("k")
        return Session(identity=data.get("i"), all_runs=bool(data.get("a")), runs=runs, csrf=data["c"],
                       flash=data.get("f"), token_key=key if isinstance(key, str) else None,
                       minted_by={k: v for k, v in makers.items() if k in runs and isinstance(v, str) and v},
                       until={k: float(v) for k, v in until.items()
                              if k in runs and isinstance(v, (int, float)) and not isinstance(v, bool)})


def link_maker(settings: Settings):  # noqa: ANN201
    """``run_id -> URL | None`` for the "View run" links of Slack cards and Jira issues (view only), or None
    when ``HAZEL_BASE_URL`` or ``HAZEL_WEB_SECRET`` is missing (then no link is rendered)."""
    if not settings.base_url or settings.web_secret is None or not settings.web_secret.get_secret_value().strip():
        return None
    signer = Signer(settings)
    return lambda run_id: signer.link(run_id)
