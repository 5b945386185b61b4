"""``hazel link RUN [--for PERSON]``: the link it prints opens the run (as PERSON), and it refuses to print
one without HAZEL_BASE_URL and HAZEL_WEB_SECRET. Also: who a ``web`` identity is (the people file)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

import pytest

from bot.engine import People
from bot.inbound.web import Signer
from bot.inbound.web.links import LinkError
from bot.settings import Settings
from tests.bot.web.scenario import SECRET
from tests.support.cli import in_process_cli


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
    for ttl_sec, said in (("1", "valid for 1 s;"), ("120", "valid for 2 min;"), ("5400", "valid for 1.5 h;"), ("604800", "valid for 168 h;")):
        monkeypatch.setenv("HAZEL_LINK_TTL_SEC", ttl_sec)  # (a second was "valid for 0.000277778 h")
        assert said in cli("link", run["id"]).stderr


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


LISTED = '''
from pydantic import BaseModel
from hazel import Approvers, StepContext, Workflow


class Doc(BaseModel):
    text: str = ""


wf = Workflow("listed", version=1, state=Doc, starters=Approvers(users=["stan"]))


@wf.step
def write(state: Doc, ctx: StepContext) -> Doc:
    return state.model_copy(update={"text": "a draft"})


wf.steer("review", show="text", approvers=Approvers(users=["sam"], people=["priya"]),
         escalate_to=Approvers(users=["dana"]), escalate_after_sec=3600)
'''


def test_hazel_link_for_a_name_nobody_configured_says_so(monkeypatch: pytest.MonkeyPatch, db_url: str,
                                                         tmp_path: Path) -> None:
    """People need not be listed (README, "Who is who"): an unknown name still gets its link, acting as a person
    of its own, but the command says that Hazel knows no one of that name (a misspelt person, most often)."""
    (tmp_path / "link_listed.py").write_text(LISTED)
    (tmp_path / "people.toml").write_text('[people.priya]\napi = ["priya-ci"]\nconsole = ["pk"]\n'
                                          'slack = ["U0000000001"]\n')
    monkeypatch.setenv("HAZEL_PEOPLE_FILE", str(tmp_path / "people.toml"))
    monkeypatch.setenv("HAZEL_API_TOKENS", "ci-bot=tok-ci-bot-0123456789")
    monkeypatch.setenv("HAZEL_BASE_URL", "https://hazel.example.com")
    monkeypatch.setenv("HAZEL_WEB_SECRET", SECRET)
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=str(tmp_path / "link_listed.py"))
    run_id = json.loads(hazel("run", "listed", "--as", "stan", "--json").stdout)["run"]["id"]
    for known in ("priya", "pk", "priya-ci", "ci-bot", "olga", "sam", "dana", "stan"):
        shown = hazel("link", run_id, "--for", known)
        assert "note:" not in shown.stderr and "no name Hazel knows" not in shown.stderr, (known, shown.stderr)
        assert json.loads(hazel("link", run_id, "--for", known, "--json").stdout)["note"] is None, known
    for identity in ("pk", "priya-ci", "U0000000001"):  # her identities: the link names her (s23 F6: the raw id)
        made = json.loads(hazel("link", run_id, "--for", identity, "--json").stdout)
        assert made["for"] == "priya" and made["note"] is None, (identity, made)
        assert Signer(Settings(HAZEL_WEB_SECRET=SECRET)).grant(parse_qs(urlparse(made["url"]).query)["t"][0]).person \
            == "priya"
    misspelt = hazel("link", run_id, "--for", "priyaa")  # exit status 0: the link works, as priyaa
    grant = Signer(Settings(HAZEL_WEB_SECRET=SECRET)).grant(parse_qs(urlparse(misspelt.stdout.strip()).query)["t"][0])
    assert grant.person == "priyaa"
    assert " ".join(misspelt.stderr.split()).endswith(
        "note: 'priyaa' is no name Hazel knows (not a person of the people file, a REST token name, an approver "
        "of this run's workflow, or who started the run): the link acts as 'priyaa', a person of their own who may "
        "decide only where anyone may (people need not be listed: see \"Who is who\" in the README); check the "
        "spelling")
    note = json.loads(hazel("link", run_id, "--for", "priyaa", "--json").stdout)["note"]
    assert note.startswith("'priyaa' is no name Hazel knows")
