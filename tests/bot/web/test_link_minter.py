"""A person link (``hazel link RUN --for PERSON``) is the console operator's proxy for PERSON, as ``--as PERSON``
is (a fresh-user finding, F9: one operator completed a two-person quorum alone with two links, and the audit
log named the two people with no trace of who made the links).

End to end on SQLite and PostgreSQL: links minted by the real ``hazel link`` (in-process, operator ``olga``),
opened and acted on over real HTTP against the run pages' app; ``hazel audit`` / ``hazel show`` read back.

- one operator's two links at a quorum point: refused, with the rule, nothing recorded but the refusals;
- a link at an ordinary point approves as "operator olga for priya" (decision, audit, run page, CLI);
- at a quorum point that lists PERSON in its ``users`` the link is PERSON's one vote;
- ``hazel audit`` shows the minting (``link.minted``);
- a person link (or a session cookie) from before links carried their maker shows the run only.

The workflows are defined at the top level of this module, which the CLI loads by path (``HAZEL_WORKFLOWS``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

import pytest
from itsdangerous import URLSafeTimedSerializer
from pydantic import BaseModel

from hazel import Approvers, StepContext, Workflow
from store.models import RunStatus
from tests.bot.web.conftest import Browserless
from tests.bot.web.scenario import SECRET, web_settings


class Note(BaseModel):
    text: str = ""


def _workflow(name: str, approvers: Approvers, approvals_required: int) -> Workflow:
    wf = Workflow(name, version=1, state=Note)

    @wf.step
    def write(state: Note, ctx: StepContext) -> Note:
        return state.model_copy(update={"text": "a draft"})

    wf.steer("sign_off", title="Sign off", show="text", actions=["approve", "reject", "feedback"],
             approvers=approvers, approvals_required=approvals_required)
    return wf


REVIEW = _workflow("link-review", Approvers(people=["priya"]), 1)
"""An ordinary point: one approval, no self-approval ban."""
QUORUM = _workflow("link-quorum", Approvers(people=["priya", "sam", "dana"]), 2)
"""Two of three people must approve: where a proxy may not vote."""
LISTED = _workflow("link-listed", Approvers(users=["priya", "sam", "dana"]), 2)
"""A quorum whose ``users`` name each person: a proxy for one of them may cast their one vote."""


@dataclass
class Linked:
    cli: Callable[..., Any]
    hazel: Any
    url: str

    def start(self, workflow: str) -> str:
        """Start ``workflow`` from the CLI (as olga); it waits at ``sign_off``. Returns the run id."""
        run = json.loads(self.cli("run", workflow, "--json").stdout)["run"]
        assert run["status"] == "waiting", run
        return run["id"]

    def link(self, run_id: str, person: str) -> str:
        """The path and query of ``hazel link RUN --for PERSON``'s link."""
        url = urlparse(self.cli("link", run_id, "--for", person).stdout.strip().splitlines()[0])
        return f"{url.path}?{url.query}"

    def opened(self, path: str) -> Browserless:
        """A browser session that opened the link at ``path``."""
        client = Browserless(self.url)
        response = client.get(path)
        assert response.status_code == 303, response.text
        return client

    def approve(self, client: Browserless, run_id: str) -> Any:
        """Post the run page's approve form (its CSRF token and nonce) for the pending request."""
        page = client.get(f"/runs/{run_id}").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf, page
        nonce = re.search(r'name="nonce" value="([^"]+)"', page)
        form = {"action": "approve", "csrf": csrf.group(1), "nonce": nonce.group(1) if nonce else "",
                "request_id": self.hazel.pending_request(run_id=run_id).id}
        return client.post(f"/runs/{run_id}/decide", data=form)


@pytest.fixture
def linked(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Linked]:
    from bot.inbound.web import web_router
    from bot.server.http import create_app
    from tests.support.cli import in_process_cli
    from tests.support.engine import make_hazel
    from tests.support.live import LiveServer

    monkeypatch.setenv("HAZEL_BASE_URL", "https://hazel.example.com")
    monkeypatch.setenv("HAZEL_WEB_SECRET", SECRET)
    cli = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=str(Path(__file__)), operator="olga")
    hazel = make_hazel(db_url, REVIEW, QUORUM, LISTED)
    with LiveServer(create_app(hazel, routers=[web_router(hazel, web_settings())])) as server:
        yield Linked(cli, hazel, server.url)


def table(output: str) -> str:
    """A CLI table's text on one line, its column rules dropped."""
    return " ".join(re.sub(r"[│┃]", " ", output).split())


def text_of(response: Any) -> str:
    """A page's text, its markup and entities dropped, on one line."""
    import html

    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.text)).split())


def test_one_operator_cannot_complete_a_quorum_with_two_links(linked: Linked) -> None:
    """F9: olga's links for priya and sam, opened and approved, were two approvals: the quorum met by one
    person. A link is olga's proxy: refused at a quorum point, as `hazel approve --as priya` is."""
    run_id = linked.start("link-quorum")
    refused_as = linked.cli("approve", run_id, "--as", "priya", code=1)  # the console proxy's rule, for reference
    assert "the console may not approve for priya at 'Sign off': the point has a quorum" in refused_as.output
    before = {d.id for d in linked.hazel.decisions(run_id=run_id)}
    for person in ("priya", "sam"):
        client = linked.opened(linked.link(run_id, person))
        expected = (f"a link made by operator olga may not approve for {person} at 'Sign off': the point has a "
                    f"quorum, so {person} decides through their own identity (or the point lists {person!r} in "
                    "its console users)")
        page = client.get(f"/runs/{run_id}")
        assert 'value="approve"' not in page.text and expected in text_of(page), text_of(page)  # not offered
        refused = linked.approve(client, run_id)
        assert refused.status_code == 403 and expected in text_of(refused), text_of(refused)
    request = linked.hazel.pending_request(run_id=run_id)
    assert (request.approvals, request.approvals_required) == (0, 2)
    assert linked.hazel.get(run_id=run_id).status is RunStatus.WAITING
    assert {d.id for d in linked.hazel.decisions(run_id=run_id)} == before  # nothing recorded
    refusals = [e for e in linked.hazel.audit(run_id=run_id) if e.action == "decision.refused"
                and e.channel == "web"]
    assert [(e.actor_id, e.person, e.detail.get("acting_for")) for e in refusals] == [
        ("olga", "priya", "priya"), ("olga", "sam", "sam")]
    audit = table(linked.cli("audit", run_id).stdout)
    assert "operator olga for priya web olga decision.refused" in audit, audit
    assert "operator olga for sam web olga decision.refused" in audit, audit


def test_a_link_at_an_ordinary_point_approves_as_the_operator_for_the_person(linked: Linked) -> None:
    run_id = linked.start("link-review")
    client = linked.opened(linked.link(run_id, "priya"))
    page = client.get(f"/runs/{run_id}").text
    assert "priya (by link from operator olga)" in page
    assert "You act as <strong>operator olga for priya</strong> (web)" in page
    approved = linked.approve(client, run_id)
    assert approved.status_code == 303, text_of(approved)
    [decision] = [d for d in linked.hazel.decisions(run_id=run_id) if d.action.value == "approve"]
    assert (decision.channel, decision.actor_id, decision.person, decision.acting_for) == (
        "web", "olga", "priya", "priya")
    assert decision.label == "operator olga for priya"
    assert "Approved as operator olga for priya" in client.get(f"/runs/{run_id}").text
    [event] = [e for e in linked.hazel.audit(run_id=run_id) if e.action == "decision.approve"]
    assert (event.channel, event.actor_id, event.person, event.detail.get("acting_for")) == (
        "web", "olga", "priya", "priya")
    audit = table(linked.cli("audit", run_id).stdout)
    assert "operator olga for priya web olga decision.approve" in audit, audit
    shown = " ".join(linked.cli("history", run_id).stdout.split())
    assert "approve by operator olga for priya" in shown, shown
    audit_page = text_of(client.get(f"/runs/{run_id}/audit"))
    assert "operator olga for priya web olga decision.approve" in audit_page, audit_page
    assert "approved by operator olga for priya via web" in text_of(client.get(f"/runs/{run_id}"))


def test_a_person_link_acts_only_while_it_is_valid(linked: Linked, monkeypatch: pytest.MonkeyPatch) -> None:
    """s23 F10: a link "valid for 60 s" opened in time let its holder act for the person for the session's 12
    hours. Its session acts until the link expires, then shows the run only, saying so; nothing is recorded."""
    import time

    run_id = linked.start("link-review")
    monkeypatch.setenv("HAZEL_LINK_TTL_SEC", "60")
    client = linked.opened(linked.link(run_id, "priya"))
    page = client.get(f"/runs/{run_id}").text
    assert "You act as <strong>operator olga for priya</strong> (web)" in page
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf, page
    form = {"action": "approve", "csrf": csrf.group(1), "nonce": "n1",
            "request_id": linked.hazel.pending_request(run_id=run_id).id}
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    page = text_of(client.get(f"/runs/{run_id}"))
    assert "The link for priya you opened this run with has expired (it acted until " in page, page
    assert "You act as" not in page
    refused = client.post(f"/runs/{run_id}/decide", data=form)  # the form of the page it had before
    assert refused.status_code == 403 and "has expired (it acted until" in text_of(refused), text_of(refused)
    assert [d for d in linked.hazel.decisions(run_id=run_id) if d.action.value == "approve"] == []


def test_hazel_audit_shows_who_minted_a_link(linked: Linked, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = linked.start("link-review")
    linked.cli("link", run_id)  # a view-only link acts for nobody: not recorded
    assert "link.minted" not in [e.action for e in linked.hazel.audit(run_id=run_id)]
    monkeypatch.setenv("HAZEL_LINK_TTL_SEC", "7200")
    shown = json.loads(linked.cli("link", run_id, "--for", "priya", "--json").stdout)
    assert (shown["for"], shown["minted_by"], shown["ttl_sec"]) == ("priya", "olga", 7200)
    [minted] = [e for e in linked.hazel.audit(run_id=run_id) if e.action == "link.minted"]
    assert (minted.channel, minted.actor_id, minted.person, minted.detail) == (
        "console", "olga", "olga", {"for": "priya", "ttl_sec": 7200})
    audit = table(linked.cli("audit", run_id).stdout)
    assert "olga console olga link.minted link for priya, valid for 2 h" in audit, audit
    said = " ".join(linked.cli("link", run_id, "--for", "sam").stderr.split())
    assert "acts as operator olga for sam (recorded in hazel audit)" in said, said
    audit_page = linked.opened(linked.link(run_id, "priya")).get(f"/runs/{run_id}/audit")
    assert "olga console olga link.minted for=sam ttl_sec=7200 " in text_of(audit_page), text_of(audit_page)


def test_a_link_at_a_quorum_listing_the_person_is_their_one_vote(linked: Linked) -> None:
    """Where the point's ``users`` name priya, a link for her may approve (as ``--as priya`` may): her one
    vote, which her own identity then cannot cast again."""
    run_id = linked.start("link-listed")
    client = linked.opened(linked.link(run_id, "priya"))
    assert linked.approve(client, run_id).status_code == 303
    request = linked.hazel.pending_request(run_id=run_id)
    assert (request.approvals, request.approvals_required) == (1, 2)
    again = linked.cli("approve", run_id, "--as", "priya", code=1)
    said = " ".join(again.output.split())
    assert ("priya already approved this request through a link made by operator olga (for priya) at" in said
            and "one person has one vote" in said), said


def _old_token(run_id: str, person: str) -> str:
    """A person link as Hazel made it before links carried their maker: ``{"r", "p", "e"}``, signed alike."""
    from bot.inbound.web.links import LINK_SALT

    return URLSafeTimedSerializer(SECRET, salt=LINK_SALT).dumps({"r": run_id, "p": person, "e": 604800})


OUTDATED = ("this link for priya was made by an older Hazel, which did not record who made it: it shows the run "
            "only; ask for a new one (hazel link {run_id} --for priya) or sign in")


def test_a_person_link_from_an_older_hazel_shows_the_run_only(linked: Linked) -> None:
    run_id = linked.start("link-review")
    client = linked.opened(f"/runs/{run_id}?t={_old_token(run_id, 'priya')}")
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200 and 'value="approve"' not in page.text
    said = text_of(page)
    assert "priya (older link: view only)" in said, said
    assert "T" + OUTDATED.format(run_id=run_id)[1:] in said, said
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    refused = client.post(f"/runs/{run_id}/decide", data={"action": "approve", "csrf": csrf})
    assert refused.status_code == 403 and OUTDATED.format(run_id=run_id) in text_of(refused), text_of(refused)
    assert [d for d in linked.hazel.decisions(run_id=run_id)] == []
    assert linked.hazel.get(run_id=run_id).status is RunStatus.WAITING


def test_a_session_cookie_from_an_older_hazel_shows_its_person_links_runs_only(linked: Linked) -> None:
    """A cookie whose runs name a person but no maker (``"m"`` is new) still loads: those runs show only."""
    from bot.inbound.web.links import SESSION_SALT

    run_id = linked.start("link-review")
    cookie = URLSafeTimedSerializer(SECRET, salt=SESSION_SALT).dumps(
        {"i": None, "a": False, "r": {run_id: "priya"}, "c": "csrf-of-an-old-cookie", "f": None, "k": None})
    client = Browserless(linked.url)
    client.http.cookies.set("hazel_session", cookie)
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200 and 'value="approve"' not in page.text
    assert "T" + OUTDATED.format(run_id=run_id)[1:] in text_of(page), text_of(page)
    refused = client.post(f"/runs/{run_id}/decide", data={"action": "approve", "csrf": "csrf-of-an-old-cookie"})
    assert refused.status_code == 403 and OUTDATED.format(run_id=run_id) in text_of(refused), text_of(refused)
    assert [d for d in linked.hazel.decisions(run_id=run_id)] == []
    again = linked.opened(linked.link(run_id, "priya"))  # a new link made now acts
    assert linked.approve(again, run_id).status_code == 303


def test_the_session_remembers_each_runs_maker() -> None:
    """The cookie keeps who made each run's person link (and forgets it with the run); a view-only link of a run
    drops the person and the maker of its earlier link."""
    from bot.inbound.web.links import MAX_LINKED_RUNS, Grant, Session, Signer
    from bot.settings import Settings

    signer = Signer(Settings(HAZEL_WEB_SECRET=SECRET))
    grant = signer.grant(signer.token("run-a", "priya", minted_by="olga"))
    assert (grant.person, grant.minted_by, grant.acts, grant.outdated) == ("priya", "olga", True, False)
    assert signer.grant(signer.token("run-a")).minted_by is None
    with pytest.raises(ValueError):
        signer.token("run-a", "priya")  # a person link names its maker
    session = Session().with_link(grant).with_link(Grant("run-b", "sam", "olga"))
    loaded = signer.load_session(signer.dump_session(session))
    assert loaded is not None and loaded.link_for("run-a") == grant and loaded.acts_on("run-b")
    viewing = loaded.with_link(Grant("run-a", None))
    assert viewing.link_for("run-a") == Grant("run-a", None) and not viewing.acts_on("run-a")
    many = session
    for n in range(MAX_LINKED_RUNS):
        many = many.with_link(Grant(f"run-{n}", "dana", "olga"))
    assert "run-a" not in many.runs and "run-a" not in many.minted_by and many.acts_on(f"run-{MAX_LINKED_RUNS - 1}")


def test_a_sign_in_keeps_who_made_the_links_opened_before(linked: Linked) -> None:
    """Signing in keeps the runs of the links opened before, and who made each: were the sign-in revoked later
    (its token removed), those runs would act again as their links do, not turn into outdated links."""
    from bot.inbound.web import Signer
    from bot.settings import Settings
    from tests.bot.web.scenario import ALICE

    run_id = linked.start("link-review")
    client = linked.opened(linked.link(run_id, "priya"))
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    assert client.post("/login", data={"token": ALICE, "csrf": csrf, "next": "/runs"}).status_code == 303
    [cookie] = {c.value for c in client.http.cookies.jar if c.name == "hazel_session"}
    session = Signer(Settings(HAZEL_WEB_SECRET=SECRET)).load_session(cookie)
    assert session is not None and session.all_runs and session.identity == "alice"
    assert session.link_for(run_id).minted_by == "olga"
