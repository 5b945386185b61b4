"""Who looks at the run pages: the session cookie, opening a signed link, signing in with a REST token,
CSRF checks, and the security headers of every page.

The cookie is ``hazel_session``: signed (``links.Signer``), ``Secure``, ``HttpOnly``, ``SameSite=Lax`` (Lax,
not Strict: a link opened from Slack or Jira is a cross-site navigation, and its redirect must keep the
cookie). Every form carries the session's CSRF token in a hidden field, compared in constant time on POST;
SameSite alone is not relied on. A sign-in lasts while the REST token it was made with is configured: a token
removed from ``HAZEL_API_TOKENS`` (or changed) signs its sessions out at their next request (the runs of links
they opened stay).
"""

from __future__ import annotations

import hmac
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from fastapi import Request, Response
from pydantic import SecretStr

from bot.inbound.api import TokenAuth
from bot.inbound.web.links import LAPSED_LINK, OUTDATED_LINK, Grant, LinkError, Session, Signer

if TYPE_CHECKING:
    from bot.engine import Hazel
    from store.models import Actor

COOKIE = "hazel_session"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
"""The Content-Security-Policy of every page: nothing from another host, no inline script (the pages have
no script at all), no framing."""
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
"""Headers of every page (``no-referrer``: a link's token never leaks to another site)."""


class Refused(Exception):
    """A request the pages refuse: ``status`` (401 sign in, 403 forbidden) and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class WebAuth:
    """Sessions for ``hazel``: ``signer`` signs them, ``tokens`` are the REST API's ``(name, token)`` pairs
    (``bot.inbound.api.api_tokens``) a person signs in with."""

    def __init__(self, hazel: "Hazel", signer: Signer, tokens: list[tuple[str, SecretStr]]) -> None:
        self.hazel = hazel
        self.signer = signer
        self.tokens = TokenAuth(tokens, lambda name: hazel.identify(channel="web", id=name, name=name))
        self.sign_in_enabled = bool(tokens)
        self._signed_in_by = {(name, signer.token_key(token.get_secret_value())) for name, token in tokens}
        """``(identity, token key)`` of every configured token: what a signed-in session must still match."""

    # -- the session -----------------------------------------------------------------------------------

    def session(self, request: Request) -> Session | None:
        """The request's valid session, if any: a sign-in whose token is no longer configured (removed from
        ``HAZEL_API_TOKENS``, or changed; or a session from before sign-ins carried their token's key) counts
        as signed out, keeping the runs of the links it opened."""
        session = self.signer.load_session(request.cookies.get(COOKIE))
        if session is not None and session.all_runs and (
                (session.identity, session.token_key) not in self._signed_in_by):
            return replace(session, identity=None, all_runs=False, token_key=None)
        return session

    def save(self, response: Response, session: Session) -> None:
        """Set the session cookie on ``response``."""
        response.set_cookie(COOKIE, self.signer.dump_session(session), max_age=int(self.signer.session_sec),
                            path="/", secure=True, httponly=True, samesite="lax")

    def forget(self, response: Response) -> None:
        response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="lax")

    def open_link(self, request: Request, run_id: str, token: str) -> Session:
        """The session after opening a link to ``run_id`` with ``token`` (the caller saves it).

        Raises:
            Refused: 401, the token is expired, tampered with, or for another run.
        """
        try:
            grant: Grant = self.signer.grant(token)
        except LinkError as exc:
            raise Refused(401, str(exc)) from None
        if grant.run_id != run_id:
            raise Refused(401, "this link is for another run: ask for a new one or sign in")
        current = self.session(request) or Session()
        return current.with_link(grant)

    def sign_in(self, request: Request, presented: str) -> Session:
        """A new session for the holder of REST token ``presented`` (a fresh CSRF token; the runs of links
        opened before are kept, with who made each person link).

        Raises:
            Refused: 401, unknown token; 403, sign-in is off (no ``HAZEL_API_TOKEN(S)``).
        """
        if not self.sign_in_enabled:
            raise Refused(403, "sign-in is off: set HAZEL_API_TOKENS (or HAZEL_API_TOKEN)")
        name = self.tokens.identify(presented.strip()) if presented.strip() else None
        if name is None:
            raise Refused(401, "unknown token: use a token of HAZEL_API_TOKENS")
        before = self.session(request) or Session()
        return Session(identity=name, all_runs=True, runs=before.runs, minted_by=before.minted_by,
                       until=before.until, token_key=self.signer.token_key(presented.strip()))

    # -- checks ----------------------------------------------------------------------------------------

    def viewer(self, request: Request, run_id: str | None = None) -> Session:
        """The session, if it may see ``run_id`` (None: the list of runs, which needs a sign-in).

        Raises:
            Refused: 401, no session, or one that may not see this.
        """
        session = self.session(request)
        if session is None:
            raise Refused(401, "sign in to see runs")
        if run_id is None and not session.all_runs:
            raise Refused(401, "sign in to see every run (your link shows one run)")
        if run_id is not None and not session.may_see(run_id):
            raise Refused(401, "sign in to see this run (or open a link to it)")
        return session

    def actor(self, session: Session, run_id: str) -> "Actor | None":
        """Who acts on ``run_id`` from this session (channel ``web``), or None (view only): the signed-in
        identity; else, for a run opened by a person link, the engine's proxy of the operator who made it for
        the person it names (``Hazel.link_actor``: "operator M for PERSON"); a person link (or a session) that
        does not say who made it is view only (``Grant.outdated``)."""
        if session.all_runs:
            if session.identity is None:
                return None
            return self.hazel.identify(channel="web", id=session.identity, name=session.identity)
        grant = session.link_for(run_id)
        if grant is None or not grant.acts:
            return None
        return self.hazel.link_actor(minted_by=grant.minted_by, person=grant.person)  # type: ignore[arg-type]

    @staticmethod
    def view_only(session: Session, run_id: str) -> str:
        """Why ``session`` may not act on ``run_id`` (the refusal of a form it posts): an outdated person link
        says so and how to get a new one (``OUTDATED_LINK``), an expired one when it acted until
        (``LAPSED_LINK``); any other session is offered the sign-in."""
        grant = None if session.all_runs else session.link_for(run_id)
        if grant is not None and grant.outdated:
            return OUTDATED_LINK.format(person=grant.person, run_id=run_id)
        if grant is not None and grant.lapsed:
            until = datetime.fromtimestamp(grant.acts_until or 0, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
            return LAPSED_LINK.format(person=grant.person, run_id=run_id, until=until)
        return "this link shows the run only: sign in to act on it"

    @staticmethod
    def check_csrf(session: Session | None, presented: str | None) -> None:
        """Raises ``Refused`` (403) unless ``presented`` is the session's CSRF token."""
        if session is None or not presented or not hmac.compare_digest(presented.encode(), session.csrf.encode()):
            raise Refused(403, "this form is out of date or did not come from this page: reload and try again")

    @staticmethod
    def flashed(session: Session, message: str | None) -> Session:
        return replace(session, flash=message)
