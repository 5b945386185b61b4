"""docs/deploy.md's nginx config and the app ``hazel serve`` serves stay in step: every path of the app (built as
``hazel serve`` builds it: ``bot.server.wiring.http_routers`` in ``bot.server.http.create_app``) reaches a
``location`` that proxies it to Hazel, every proxying ``location`` reaches something the app serves, and every
path a run page links to or posts to (over real HTTP, signed in) is proxied. Without ``location = /logout`` the
guide's proxy answered "Sign out" with nginx's 404 and the session stayed valid; ``/docs`` and
``/openapi.json``, which README points to, were not forwarded either.

nginx picks a request's ``location`` as this test does for the guide's shapes (no regular expressions there):
an exact ``location = P`` that equals the path, else the longest prefix ``location P`` the path starts with."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable
from urllib.parse import urljoin, urlsplit

from bot.engine.registry import Registry
from bot.server.app import HazelApp
from bot.server.http import create_app
from bot.server.wiring import http_routers
from bot.settings import Settings
from tests.bot.web.conftest import Browserless, Served, client, served  # noqa: F401  (the run pages' fixtures)
from tests.bot.web.scenario import ALICE
from tests.bot.web.test_pages import sign_in

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
BLOCK = re.compile(r"```nginx\n(.*?)```", re.S)
LOCATION = re.compile(r"location\s+(?:(=|\^~|~\*?)\s+)?(\S+)\s*\{([^{}]*)\}")
PARAM = re.compile(r"\{[^{}]+\}")
UPSTREAM = "proxy_pass http://hazel;"
"""A proxying location passes the path on unchanged (no URI after the upstream's name)."""
CONFIGURED = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "slack-signing-secret-0123",
              "JIRA_URL": "https://example.atlassian.net", "JIRA_USER": "bot@example.com",
              "JIRA_API_TOKEN": "jira-token-0123456789", "JIRA_WEBHOOK_SECRET": "jira-webhook-secret-0123",
              "HAZEL_API_TOKEN": "tok-0123456789abcdef", "HAZEL_WEB_SECRET": "web-secret-for-tests-0123456789abcdef",
              "HAZEL_BASE_URL": "https://hazel.example.com"}


@dataclass(frozen=True)
class Location:
    """One ``location`` block of the guide: its modifier (``=`` exact, ``""`` or ``^~`` prefix), its path, and
    whether it forwards the request to Hazel unchanged."""

    modifier: str
    path: str
    proxies: bool

    def __str__(self) -> str:
        return f"location {self.modifier + ' ' if self.modifier else ''}{self.path}"


def guide_locations() -> list[Location]:
    """The ``location`` blocks of the guide's nginx config (the ``nginx`` code block with ``upstream hazel``)."""
    [config] = [b for b in BLOCK.findall(GUIDE.read_text(encoding="utf-8")) if "upstream hazel" in b]
    found = []
    for modifier, path, body in LOCATION.findall(config):
        assert not modifier.startswith("~"), f"regex location {path}: this test reads exact and prefix ones only"
        directives = {d.strip() for d in body.split(";")}
        proxies = UPSTREAM.rstrip(";") in directives and not any(d.startswith("return") for d in directives)
        found.append(Location(modifier, path, proxies))
    assert found, "no location in the guide's nginx config"
    return found


def chosen(locations: Iterable[Location], path: str) -> Location | None:
    """The location nginx uses for ``path``: the exact one equal to it, else the longest prefix of it."""
    locations = list(locations)
    for loc in locations:
        if loc.modifier == "=" and loc.path == path:
            return loc
    prefixes = [loc for loc in locations if loc.modifier != "=" and path.startswith(loc.path)]
    return max(prefixes, key=lambda loc: len(loc.path), default=None)


def served_paths(app) -> set[str]:  # noqa: ANN001  (a FastAPI app)
    """Every route path of ``app``, included routers' routes too (FastAPI may keep an included router whole
    rather than copy its routes into the app's list)."""
    paths: set[str] = set()

    def walk(routes: Iterable[object], prefix: str) -> None:
        for route in routes:
            path = getattr(route, "path", None)
            if path is not None:
                paths.add(prefix + path)
            inner = getattr(route, "original_router", None)
            if inner is not None:
                walk(inner.routes, prefix + getattr(getattr(route, "include_context", None), "prefix", ""))

    walk(app.routes, "")
    return paths


def sample(path: str) -> str:
    """A concrete request path for a route's template (``/runs/{run_id}`` -> ``/runs/x1``)."""
    return PARAM.sub("x1", path)


def app_paths(tmp_path: Path, **settings: str) -> set[str]:
    """The route paths of the app ``hazel serve`` builds with ``settings``."""
    config = Settings(HAZEL_DATABASE_URL=f"sqlite:///{tmp_path / 'routes.db'}", **settings)
    hazel = HazelApp(config, registry=Registry(), load_workflows=False)
    try:
        return served_paths(create_app(hazel, routers=http_routers(hazel, config)))
    finally:
        hazel.close()


def test_every_path_hazel_serve_serves_is_proxied_by_the_guide(tmp_path: Path) -> None:
    locations = guide_locations()
    paths = app_paths(tmp_path) | app_paths(tmp_path, **CONFIGURED)  # bare, and with every channel on
    assert {"/healthz", "/api/runs", "/runs/{run_id}", "/logout", "/docs", "/openapi.json"} <= paths, paths
    dropped = {p: str(chosen(locations, sample(p)) or "no location") for p in sorted(paths)
               if not (loc := chosen(locations, sample(p))) or not loc.proxies}
    assert not dropped, f"docs/deploy.md's nginx config does not forward these paths of hazel serve: {dropped}"
    reached = {chosen(locations, sample(p)) for p in paths}
    stray = [str(loc) for loc in locations if loc.proxies and loc not in reached]
    assert not stray, f"docs/deploy.md proxies locations hazel serve serves nothing at: {stray}"


def test_every_path_a_run_page_links_or_posts_to_is_proxied(served: Served, client: Browserless) -> None:
    """Signed in, every page reachable from ``/runs`` by its links (GET only; forms are read, not sent): each
    root-relative ``href``, ``src`` and form ``action`` is forwarded by the guide's nginx."""
    locations = guide_locations()
    sign_in(client, ALICE)
    todo, seen, targets = ["/login", "/runs", f"/runs/{served.run_id}"], set(), set()
    while todo and len(seen) < 40:
        page = todo.pop(0)
        if page in seen:
            continue
        seen.add(page)
        response = client.get(page)
        assert response.status_code == 200, (page, response.status_code)
        for kind, url in re.findall(r'\b(href|src|action)="([^"]*)"', response.text):
            url = urljoin(page, url.replace("&amp;", "&"))
            if urlsplit(url).netloc:
                continue  # another site (none today)
            targets.add(urlsplit(url).path)
            if kind == "href" and urlsplit(url).path.startswith("/runs"):
                todo.append(url.partition("#")[0])
    assert {"/login", "/logout", "/static/hazel.css", f"/runs/{served.run_id}/decide"} <= targets, targets
    dropped = sorted(t for t in targets if not (loc := chosen(locations, t)) or not loc.proxies)
    assert not dropped, f"run pages link or post to paths docs/deploy.md's nginx does not forward: {dropped}"
