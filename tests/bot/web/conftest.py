"""Fixtures of the run pages' tests: a run with two rewinds served by the real app on a loopback port, an
HTTP client that keeps the session cookie, and Debian's Chromium through Playwright.

Chromium: ``/usr/bin/chromium`` (``apt-get install -y chromium``). Without it the browser tests are skipped,
unless ``HAZEL_TEST_REQUIRE_CHROMIUM=1`` (CI, set by .ci/run), where they fail instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator

import httpx
import pytest

from bot.inbound.web import Signer, web_router
from bot.server.http import create_app
from tests.bot.web.scenario import run_with_two_rewinds, web_settings
from tests.support.engine import make_hazel
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow

CHROMIUM = "/usr/bin/chromium"
MINTER = "olga"
"""The console operator who made the tests' person links (``Served.link``)."""
REQUIRE_CHROMIUM = os.environ.get("HAZEL_TEST_REQUIRE_CHROMIUM") == "1"


@dataclass
class Served:
    hazel: Any
    url: str
    run_id: str
    signer: Signer

    def link(self, person: str | None = None, run_id: str | None = None, minted_by: str = MINTER) -> str:
        """The path of a signed link (``/runs/ID?t=…``): view only, or for ``person``, made by the console
        operator ``minted_by`` (as ``hazel link RUN --for PERSON`` run by ``olga`` makes it)."""
        run_id = run_id or self.run_id
        token = self.signer.token(run_id, person, minted_by=minted_by if person is not None else None)
        return f"/runs/{run_id}?t={token}"


@pytest.fixture
def served(db_url: str) -> Iterator[Served]:
    """The ``doc`` run with two rewinds (tests/bot/web/scenario.py), the app with the run pages, served."""
    hazel = make_hazel(db_url, doc_workflow())
    run_id = run_with_two_rewinds(hazel)
    settings = web_settings()
    app = create_app(hazel, routers=[web_router(hazel, settings)])
    with LiveServer(app) as server:
        yield Served(hazel, server.url, run_id, Signer(settings))


class Browserless:
    """An HTTP client of the live server that keeps the session cookie (httpx does not send a ``Secure``
    cookie over plain http; a browser does on 127.0.0.1, a secure context)."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30, follow_redirects=False)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self.http.request(method, path, **kwargs)
        cookie = response.cookies.get("hazel_session")
        if cookie is not None:
            self.http.cookies.set("hazel_session", cookie)
        return response

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, **kwargs)

    def csrf(self, path: str) -> str:
        """The CSRF token of the form on the page at ``path``."""
        import re

        found = re.search(r'name="csrf" value="([^"]+)"', self.get(path).text)
        assert found, f"no form with a CSRF token on {path}"
        return found.group(1)


@pytest.fixture
def client(served: Served) -> Browserless:
    return Browserless(served.url)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright (``playwright install`` downloads are not used). One per
    module, not per session: Playwright's sync API keeps an event loop running in this thread until it stops,
    and DBOS's sync calls (the bench's tests) refuse to run under one, so a session-wide browser failed them
    whenever xdist gave one worker both."""
    if not os.access(CHROMIUM, os.X_OK):
        message = f"{CHROMIUM} is missing: apt-get install -y chromium"
        if REQUIRE_CHROMIUM:
            pytest.fail(message)
        pytest.skip(message + " (HAZEL_TEST_REQUIRE_CHROMIUM=1 fails instead)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any, served: Served) -> Iterator[Any]:
    """A fresh browser context (no cookies) and page on the live server; JavaScript errors are collected
    in ``page.errors``."""
    context = chromium.new_context(base_url=served.url, viewport={"width": 1100, "height": 900})
    p = context.new_page()
    p.errors = []
    p.on("pageerror", lambda exc: p.errors.append(str(exc)))
    p.set_default_timeout(10_000)
    try:
        yield p
    finally:
        context.close()
