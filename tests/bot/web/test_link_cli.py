"""``hazel link RUN [--for PERSON]``: the link it prints opens the run (as PERSON), and it refuses to print
one without HAZEL_BASE_URL and HAZEL_WEB_SECRET. Also: who a ``web`` identity is (the people file)."""

from __future__ import annotations

import time
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

import pytest

from bot.engine import People
from bot.inbound.web import Signer
from bot.inbound.web.links import LinkError
from bot.settings import Settings
from tests.bot.web.scenario import SECRET


def test_hazel_link_prints_a_signed_link(cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    run = cli.json("run", "doc-review", "--input", '{"topic": "links"}')["run"]
    refused = cli("link", run["id"], code=1)
    assert "HAZEL_BASE_URL and HAZEL_WEB_SECRET" in refused.output
    monkeypatch.setenv("HAZEL_BASE_URL", "https://hazel.example.com/")
    monkeypatch.setenv("HAZEL_WEB_SECRET", SECRET)
    url = cli("link", run["id"][:6], "--for", "priya").stdout.strip().splitlines()[0]
    parsed = urlparse(url)
    assert (parsed.scheme, parsed.netloc, parsed.path) == ("https", "hazel.example.com", f"/runs/{run['id']}")
    grant = Signer(Settings(HAZEL_WEB_SECRET=SECRET)).grant(parse_qs(parsed.query)["t"][0])
    assert (grant.run_id, grant.person) == (run["id"], "priya")
    viewer = cli.json("link", run["id"])
    assert viewer["for"] is None and Signer(Settings(HAZEL_WEB_SECRET=SECRET)).grant(
        parse_qs(urlparse(viewer["url"]).query)["t"][0]).person is None


def test_a_web_identity_is_its_rest_token_names_person() -> None:
    people = People.from_dict({"people": {"priya": {"api": ["priya-ci"], "slack": ["U1"]}}})
    assert people.person_of("web", "priya-ci") == "priya"
    assert people.person_of("web", "priya") == "priya"
    assert people.person_of("web", "bob") == "bob"  # unclaimed: a name is its own person


def test_a_link_expires_after_the_lifetime_it_was_made_with(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HAZEL_LINK_TTL_SEC=1 hazel link RUN`` said "valid for 1 s", but a server with the default 7 days took
    it later: the link carries its lifetime, and the shorter of it and the server's decides."""
    short = Signer(Settings(HAZEL_WEB_SECRET=SECRET, HAZEL_LINK_TTL_SEC=60))
    server = Signer(Settings(HAZEL_WEB_SECRET=SECRET))
    token = short.token("abcdef123456")
    assert server.grant(token).run_id == "abcdef123456"
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(LinkError, match="expired"):
        server.grant(token)
    assert server.grant(server.token("abcdef123456")).run_id == "abcdef123456"  # the server's own: 7 days
