"""The run pages over real HTTP (the app on a loopback port, SQLite and PostgreSQL): who may see what (links,
sign-in, expiry, tampering), CSRF, security headers, escaping, the list's filters and paging, decisions from
the page through the engine on the channel ``web``."""

from __future__ import annotations

import time

import pytest

from bot.inbound.web import pages
from store.models import RunStatus
from tests.bot.web.conftest import Browserless, Served
from tests.bot.web.scenario import ALICE, BOB, SCRIPT_TOPIC, as_api


def sign_in(client: Browserless, token: str, next: str = "/runs") -> None:
    csrf = client.csrf("/login")
    response = client.post("/login", data={"token": token, "csrf": csrf, "next": next})
    assert response.status_code == 303, response.text
    assert response.headers["location"] == next


def wait_status(served: Served, status: RunStatus) -> None:
    deadline = time.monotonic() + 10
    while served.hazel.get(run_id=served.run_id).status is not status:
        assert time.monotonic() < deadline, f"the run did not become {status.value}"
        time.sleep(0.02)


def test_without_a_session_no_page_shows_a_run(served: Served, client: Browserless) -> None:
    for path in ("/runs", f"/runs/{served.run_id}", f"/runs/{served.run_id}/checkpoints/1",
                 f"/runs/{served.run_id}/diff", f"/runs/{served.run_id}/audit"):
        response = client.get(path)
        assert response.status_code == 303 and response.headers["location"].startswith("/login?next="), path
        assert served.run_id not in response.text
    login = client.get("/login")
    assert login.status_code == 200 and served.run_id not in login.text and "restore drill" not in login.text


def test_a_tampered_or_foreign_or_expired_link_is_refused(served: Served, client: Browserless,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    good = served.link("alice")
    tampered = good[:-3] + ("AAA" if not good.endswith("AAA") else "BBB")
    response = client.get(tampered)
    assert response.status_code == 401 and "not valid" in response.text and "restore drill" not in response.text
    other = served.hazel.start(workflow="doc", input={"topic": "other run"}, actor=as_api(served.hazel, "olga"))
    response = client.get(f"/runs/{served.run_id}?t={served.signer.token(other.id, 'alice', minted_by='olga')}")
    assert response.status_code == 401 and "another run" in response.text
    real = time.time
    monkeypatch.setattr("itsdangerous.timed.time.time", lambda: real() - served.signer.link_ttl_sec - 5)
    old = served.link("alice")
    monkeypatch.setattr("itsdangerous.timed.time.time", real)
    response = client.get(old)
    assert response.status_code == 401 and "expired" in response.text
    assert client.get(f"/runs/{served.run_id}").status_code == 303  # none of them started a session


def test_a_link_opens_one_run_and_drops_its_token(served: Served, client: Browserless) -> None:
    response = client.get(served.link())
    assert response.status_code == 303 and response.headers["location"] == f"/runs/{served.run_id}"
    cookie = response.headers["set-cookie"].lower()
    for flag in ("secure", "httponly", "samesite=lax", "path=/"):
        assert flag in cookie
    page = client.get(f"/runs/{served.run_id}")
    assert page.status_code == 200 and "Review the plan" in page.text
    assert "Sign in</a> to decide" in page.text and 'value="approve"' not in page.text  # view only
    other = served.hazel.start(workflow="doc", input={"topic": "other run"}, actor=as_api(served.hazel, "olga"))
    assert client.get(f"/runs/{other.id}").status_code == 303
    assert client.get("/runs").status_code == 303  # the list needs a sign-in


def test_security_headers_and_escaping(served: Served, client: Browserless) -> None:
    client.get(served.link("alice"))
    run = served.run_id
    for path in (f"/runs/{run}", f"/runs/{run}/checkpoints/7", f"/runs/{run}/diff?a=0&b=7", f"/runs/{run}/audit",
                 "/login"):
        response = client.get(path)
        assert response.status_code == 200, path
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
        assert response.headers["referrer-policy"] == "no-referrer"
        assert "<script" not in response.text.lower(), path  # stored <script> is text, and we send no script
    state = client.get(f"/runs/{served.run_id}/checkpoints/0").text
    assert "backups &lt;script&gt;document.title=" in state and SCRIPT_TOPIC not in state


def test_sign_in_with_a_rest_token(served: Served, client: Browserless) -> None:
    csrf = client.csrf("/login")
    wrong = client.post("/login", data={"token": "nope", "csrf": csrf, "next": "/runs"})
    assert wrong.status_code == 401 and "unknown token" in wrong.text
    no_csrf = client.post("/login", data={"token": ALICE, "next": "/runs"})
    assert no_csrf.status_code == 403
    sign_in(client, ALICE, next=f"/runs/{served.run_id}")
    assert client.get(f"/runs/{served.run_id}").status_code == 200
    runs = client.get("/runs")
    assert runs.status_code == 200 and served.run_id in runs.text
    evil = client.post("/login", data={"token": ALICE, "csrf": client.csrf("/login"), "next": "//evil.example"})
    assert evil.headers["location"] == "/runs"
    # a unique prefix (4 characters or more) goes to the run, as in the CLI and the REST API
    prefix = client.get(f"/runs/{served.run_id[:6]}")
    assert prefix.status_code == 303 and prefix.headers["location"] == f"/runs/{served.run_id}", prefix.text
    assert client.get(f"/runs/{served.run_id[:3]}").status_code == 404
    # and so does every page of the run, its query kept (a fresh-user finding: they answered "no run")
    run, short = served.run_id, served.run_id[:6]
    for page in ("/audit", "/checkpoints/2", "/diff?a=0&b=1"):
        moved = client.get(f"/runs/{short}{page}")
        assert moved.status_code == 303 and moved.headers["location"] == f"/runs/{run}{page}", (page, moved.text)
        assert client.get(moved.headers["location"]).status_code == 200, page
    assert client.get(f"/runs/{run[:3]}/audit").status_code == 404


def test_a_link_for_one_run_does_not_resolve_prefixes(served: Served, client: Browserless) -> None:
    client.get(served.link())
    assert client.get(f"/runs/{served.run_id[:6]}").status_code == 303  # to the sign-in: not the run
    assert client.get(f"/runs/{served.run_id[:6]}").headers["location"].startswith("/login")


def test_runs_filters_and_paging(served: Served, client: Browserless, monkeypatch: pytest.MonkeyPatch) -> None:
    hazel = served.hazel
    done = hazel.start(workflow="doc", input={"topic": "finished one"}, actor=as_api(hazel, "olga"))
    hazel.drive(run_id=done.id)
    hazel.decide(run_id=done.id, action="approve", actor=as_api(hazel, "alice"))
    hazel.drive(run_id=done.id)
    assert hazel.get(run_id=done.id).status is RunStatus.COMPLETED
    sign_in(client, ALICE)
    waiting = client.get("/runs?status=waiting").text
    assert served.run_id in waiting and done.id not in waiting
    completed = client.get("/runs?status=completed").text
    assert done.id in completed and served.run_id not in completed
    assert served.run_id in client.get("/runs?mine=1").text  # alice approves at review
    nope = client.get("/runs?workflow=nope&status=waiting").text
    assert done.id not in nope and served.run_id not in nope
    assert ("No runs of workflow <code>nope</code> with status waiting (<code>nope</code> is not a registered "
            "workflow; registered: doc).") in nope, nope  # s23 F11: "No runs with status waiting."
    assert "No runs of workflow <code>doc</code> with status cancelled." in \
        client.get("/runs?workflow=doc&status=cancelled").text
    monkeypatch.setattr(pages, "PAGE_SIZE", 1)
    first, second = client.get("/runs").text, client.get("/runs?page=1").text
    assert done.id in first and served.run_id not in first and "Older" in first  # newest first
    assert served.run_id in second and "Newer" in second
    bob = Browserless(served.url)
    sign_in(bob, BOB)
    assert served.run_id not in bob.get("/runs?mine=1").text  # bob may give feedback, not decide


def test_a_decision_without_the_csrf_token_is_refused(served: Served, client: Browserless) -> None:
    client.get(served.link("alice"))
    request_id = served.hazel.pending_request(run_id=served.run_id).id
    for csrf in (None, "forged"):
        data = {"action": "approve", "request_id": request_id, **({"csrf": csrf} if csrf else {})}
        response = client.post(f"/runs/{served.run_id}/decide", data=data)
        assert response.status_code == 403 and "reload" in response.text
    assert served.hazel.get(run_id=served.run_id).status is RunStatus.WAITING
    assert served.hazel.decisions(run_id=served.run_id)[-1].channel == "api"  # nothing recorded


def test_a_view_only_link_cannot_decide(served: Served, client: Browserless) -> None:
    client.get(served.link())
    csrf = client.csrf("/login")  # the run page has no form for a view-only session; its token is the session's
    response = client.post(f"/runs/{served.run_id}/decide", data={"action": "approve", "csrf": csrf})
    assert response.status_code == 403 and "sign in to act" in response.text
    assert served.hazel.get(run_id=served.run_id).status is RunStatus.WAITING


def test_decisions_from_the_page_go_through_the_engine_as_the_person(served: Served, client: Browserless) -> None:
    bob = Browserless(served.url)
    bob.get(served.link("bob"))
    csrf = bob.csrf(f"/runs/{served.run_id}")
    page = bob.get(f"/runs/{served.run_id}").text
    assert 'value="feedback"' in page and 'value="approve"' not in page and "may not approve" in page
    refused = bob.post(f"/runs/{served.run_id}/decide", data={"action": "approve", "csrf": csrf})
    assert refused.status_code == 403 and "may not approve" in refused.text
    audit = served.hazel.audit(run_id=served.run_id)
    assert audit[-1].action == "decision.refused" and audit[-1].channel == "web" and audit[-1].person == "bob"
    client.get(served.link("alice"))
    csrf = client.csrf(f"/runs/{served.run_id}")
    request_id = served.hazel.pending_request(run_id=served.run_id).id
    form = {"action": "approve", "csrf": csrf, "request_id": request_id, "nonce": "n1"}
    response = client.post(f"/runs/{served.run_id}/decide", data=form)
    assert response.status_code == 303
    again = client.post(f"/runs/{served.run_id}/decide", data=form)  # a double submit: the same decision
    assert again.status_code == 303
    wait_status(served, RunStatus.COMPLETED)
    approvals = [d for d in served.hazel.decisions(run_id=served.run_id) if d.action.value == "approve"]
    # the link's holder acts for alice as the proxy of olga, who made the link (as `hazel approve --as alice`)
    assert [(d.channel, d.actor_id, d.person, d.acting_for) for d in approvals] == [("web", "olga", "alice",
                                                                                     "alice")]
    assert "Approved as operator olga for alice" in client.get(f"/runs/{served.run_id}").text
    late = client.post(f"/runs/{served.run_id}/decide", data={**form, "nonce": "n2"})
    assert late.status_code == 409 and "already" in late.text


def test_rewind_to_here(served: Served, client: Browserless) -> None:
    sign_in(client, ALICE)
    csrf = client.csrf(f"/runs/{served.run_id}")
    head = served.hazel.get(run_id=served.run_id).head_seq
    response = client.post(f"/runs/{served.run_id}/rewind", data={"to": 1, "csrf": csrf, "feedback": "once more",
                                                                  "head": head})
    assert response.status_code == 303
    rewinds = [d for d in served.hazel.decisions(run_id=served.run_id) if d.action.value == "rewind"]
    assert (rewinds[-1].channel, rewinds[-1].payload["to"], rewinds[-1].payload["feedback"]) == ("web", 1, "once more")
    wait_status(served, RunStatus.WAITING)
    # a feedback field of blanks is refused as the CLI and REST refuse it, spaces as zero-width ones (s23 F4:
    # spaces were dropped, the rewind done without feedback); an empty field is no feedback
    before = served.hazel.decisions(run_id=served.run_id)
    for blank in ("   ", "\u200b\u2060", " \r\n "):
        refused = client.post(f"/runs/{served.run_id}/rewind", data={
            "to": 1, "csrf": csrf, "feedback": blank, "head": served.hazel.get(run_id=served.run_id).head_seq})
        assert refused.status_code == 422 and "the feedback is blank: give some text" in refused.text, blank
    assert served.hazel.decisions(run_id=served.run_id) == before
    for form in ("decide", "rewind"):  # a form's address opened as a page: the run's (s23 F9: "no run 'R/decide'")
        opened = client.get(f"/runs/{served.run_id}/{form}")
        assert opened.status_code == 303 and opened.headers["location"] == f"/runs/{served.run_id}", opened.text
    bad = client.post(f"/runs/{served.run_id}/rewind", data={"to": 99, "csrf": csrf,
                                                              "head": served.hazel.get(run_id=served.run_id).head_seq})
    assert bad.status_code in (404, 409) and "#99" in bad.text


def test_pages_are_off_without_a_secret(db_url: str) -> None:
    from bot.inbound.web import web_router
    from bot.server.http import create_app
    from bot.settings import Settings
    from tests.support.engine import make_hazel
    from tests.support.live import LiveServer
    from tests.workflows.doc import doc_workflow

    hazel = make_hazel(db_url, doc_workflow())
    with LiveServer(create_app(hazel, routers=[web_router(hazel, Settings())])) as server:
        for method, path in (("GET", "/runs"), ("GET", "/runs/abc/diff"), ("POST", "/login")):
            off = Browserless(server.url).request(method, path)
            assert off.status_code == 503 and "HAZEL_WEB_SECRET" in off.text
        assert Browserless(server.url).get("/healthz").status_code == 200


def test_the_pages_leave_other_routes_alone(db_url: str) -> None:
    """Mounted before the Jira webhook (bot.server.wiring), with or without a secret."""
    from fastapi import APIRouter

    from bot.inbound.web import web_router
    from bot.server.http import create_app
    from bot.settings import Settings
    from tests.bot.web.scenario import web_settings
    from tests.support.engine import make_hazel
    from tests.support.live import LiveServer
    from tests.workflows.doc import doc_workflow

    later = APIRouter()
    later.add_api_route("/jira/webhook", lambda: {"ok": True}, methods=["POST"])
    hazel = make_hazel(db_url, doc_workflow())
    for settings in (Settings(), web_settings()):
        with LiveServer(create_app(hazel, routers=[web_router(hazel, settings), later])) as server:
            assert Browserless(server.url).post("/jira/webhook").json() == {"ok": True}


def test_a_page_opened_by_a_link_for_a_person_names_who_acts(served: Served, client: Browserless) -> None:
    client.get(served.link("alice<b>"))  # (escaped as every stored text is)
    page = client.get(f"/runs/{served.run_id}").text
    assert '<span class="me">alice&lt;b&gt; (by link from operator olga)</span>' in page
    assert "opened by link" not in page
    client.get(served.link())  # a view-only link of the same run: nobody named any more
    page = client.get(f"/runs/{served.run_id}").text
    assert "opened by link" in page and "(by link" not in page



def test_a_sign_in_ends_when_its_token_is_removed(served: Served, client: Browserless) -> None:
    """A session signed in with a REST token lasts while that token is configured: served again (the same
    ``HAZEL_WEB_SECRET``) with alice's token kept, her cookie still works; with it removed from
    ``HAZEL_API_TOKENS``, or changed, the cookie neither shows the runs nor decides (a fresh-user finding: a
    revoked token kept steering runs from the pages for the session's 12 hours)."""
    from bot.inbound.web import web_router
    from bot.server.http import create_app
    from bot.settings import Settings
    from tests.bot.web.scenario import ALICE, BOB, SECRET
    from tests.support.live import LiveServer

    sign_in(client, ALICE)
    [cookie] = {c.value for c in client.http.cookies.jar if c.name == "hazel_session"}
    run = served.run_id
    for tokens, kept in ((f"alice={ALICE}, bob={BOB}", True), (f"bob={BOB}", False),
                         (f"alice=tok-alice-rotated-000000, bob={BOB}", False)):
        settings = Settings(HAZEL_WEB_SECRET=SECRET, HAZEL_API_TOKENS=tokens)
        app = create_app(served.hazel, routers=[web_router(served.hazel, settings)])
        with LiveServer(app) as restarted:
            again = Browserless(restarted.url)
            again.http.cookies.set("hazel_session", cookie)
            for path in ("/runs", f"/runs/{run}"):
                shown = again.get(path)
                assert (shown.status_code == 200) is kept, (tokens, path, shown.status_code)
                if not kept:
                    assert shown.headers["location"].startswith("/login?next="), shown.headers
            if not kept:
                before = len(served.hazel.audit(run_id=run))
                refused = again.post(f"/runs/{run}/decide", data={"csrf": "x", "action": "feedback",
                                                                   "text": "still here"})
                assert refused.status_code in (303, 401, 403), refused.status_code
                assert served.hazel.audit(run_id=run)[before:] == []
