"""``HAZEL_BASE_URL`` names the root of the site people reach ``hazel serve`` at: a URL with a path
(``http://host/hazel``) is refused when a command starts, with the one line every malformed setting gets. It was
accepted and put in every link (``hazel link``, Slack cards, Jira issues), while the run pages link and redirect
to root paths (``/runs/…``, ``/login``, ``/static/…``): behind a proxy serving Hazel under ``/hazel/`` the link
redirected out of the prefix and 404'd."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from bot.inbound.web import web_router
from bot.server.http import create_app
from bot.settings import Settings
from tests.bot.web.conftest import Browserless
from tests.support.engine import make_hazel
from tests.support.live import LiveServer
from tests.workflows.sample import docs

SECRET = "a-long-random-web-secret-0123456789"


def refusal(url: str) -> str:
    return (f"error: invalid settings: HAZEL_BASE_URL: must be the site's root URL, without a path (the run "
            f"pages link to /runs/…: serve Hazel at the root of a host name or port), not {url!r}\n")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8444/hazel", "https://example.com/hazel/",
                                 "http://h.example:8080/hazel/runs"])
def test_a_base_url_with_a_path_is_refused_at_start(cli, monkeypatch, url: str) -> None:  # noqa: ANN001
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    monkeypatch.setenv("HAZEL_WEB_SECRET", SECRET)
    monkeypatch.setenv("HAZEL_BASE_URL", url)
    assert cli("link", run_id, code=1).stderr == refusal(url)
    assert cli("runs", code=1).stderr == refusal(url)
    assert cli("serve", "--port", "1", code=1).stderr == refusal(url)  # before it binds or opens anything
    with pytest.raises(ValidationError, match="must be the site's root URL, without a path"):
        Settings(HAZEL_BASE_URL=url)  # embedding Hazel: the same check


@pytest.mark.parametrize("url", ["http://user:pw@127.0.0.1:18924", "https://token@hazel.example.com/"])
def test_a_base_url_with_a_user_or_password_is_refused_at_start(cli, monkeypatch, url: str) -> None:  # noqa: ANN001
    """s23 F5: the password went into every link ``hazel link`` printed and every Slack card and Jira issue."""
    monkeypatch.setenv("HAZEL_WEB_SECRET", SECRET)
    monkeypatch.setenv("HAZEL_BASE_URL", url)
    shown = url.replace("user:pw@", "").replace("token@", "")
    said = cli("runs", code=1).stderr
    assert said == (f"error: invalid settings: HAZEL_BASE_URL: must be the site's root URL without a user or "
                    f"password (every Slack card and Jira issue links to it), not {shown!r}\n"), said
    assert "pw" not in said and "token" not in said


def test_a_root_url_is_taken_and_its_links_open_the_run_page(cli, monkeypatch, db_url: str) -> None:  # noqa: ANN001
    """With or without the root's ``/`` and a port: the link works over real HTTP on the app's run pages."""
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    monkeypatch.setenv("HAZEL_WEB_SECRET", SECRET)
    hazel = make_hazel(db_url, docs)
    app = create_app(hazel, routers=[web_router(hazel, Settings(HAZEL_WEB_SECRET=SECRET))])
    with LiveServer(app) as server:
        for base in (server.url, server.url + "/"):
            monkeypatch.setenv("HAZEL_BASE_URL", base)
            link = cli("link", run_id).stdout.strip()
            assert link.startswith(server.url + f"/runs/{run_id}?t="), link
            client = Browserless(server.url)  # (keeps the link's session cookie, Secure, over plain http)
            opened = client.get(link.removeprefix(server.url))
            if opened.status_code == 303:  # the link's session, then the run's page without the token
                assert opened.headers["location"] == f"/runs/{run_id}", opened.headers
                opened = client.get(opened.headers["location"])
            assert opened.status_code == 200 and run_id in opened.text, (base, opened.status_code)
