"""Defects a fresh user of the run pages found, over real HTTP (the app on a loopback port, SQLite and
PostgreSQL): an out-of-date page's rewind, large and multi-line text typed on a page, the reason a person may
not rewind, the runs list's page label, and the page after a stale form as the signed-in person."""

from __future__ import annotations

import html
import re
import time
from typing import Iterator

import httpx
import pytest

from bot.inbound.web import pages
from store.models import RunStatus
from tests.bot.web.conftest import Browserless, Served
from tests.bot.web.scenario import ALICE, BOB, as_api
from tests.bot.web.test_pages import sign_in


def text_of(response) -> str:  # noqa: ANN001
    return html.unescape(response.text)


def wait_for(served: Served, *statuses: RunStatus) -> None:
    deadline = time.monotonic() + 10
    while served.hazel.get(run_id=served.run_id).status not in statuses:
        assert time.monotonic() < deadline, f"the run did not become {statuses}"
        time.sleep(0.02)


def rewind_forms(page: str) -> dict[str, dict[str, str]]:
    """What a run page's "rewind here" buttons send, by their checkpoint: the one rewind form's hidden fields
    and the button's ``here`` (a button of that form, ``form="rewind"``, outside it)."""
    [body] = re.findall(r'<form method="post" action="/runs/[^"]+/rewind" class="act act-rewind" id="rewind">'
                        r'(.*?)</form>', page, re.S)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', body))
    buttons = re.findall(r'<button [^>]*form="rewind" name="here" value="(\d+)"[^>]*>rewind here</button>', page)
    return {seq: {**fields, "here": seq} for seq in buttons}


def complete(served: Served) -> None:
    hazel = served.hazel
    hazel.decide(run_id=served.run_id, action="approve", actor=as_api(hazel, "alice"))
    hazel.drive(run_id=served.run_id)
    assert hazel.get(run_id=served.run_id).status is RunStatus.COMPLETED


# -- 1. an out-of-date page does not rewind away newer work --------------------------------------------------


def test_an_out_of_date_page_does_not_rewind_away_newer_work(served: Served, client: Browserless) -> None:
    hazel, run = served.hazel, served.run_id
    complete(served)
    sign_in(client, ALICE)
    old_page = client.get(f"/runs/{run}").text
    head = hazel.get(run_id=run).head_seq
    form = rewind_forms(old_page)["1"]
    assert form["head"] == str(head) and "request_id" not in form  # an ended run: the page's head is all it has

    olga = as_api(hazel, "olga")  # (who started the run may rewind it) moves it on: a new branch, waiting
    hazel.rewind(run_id=run, actor=olga, to=0, feedback="x")
    hazel.drive(run_id=run)
    moved = hazel.get(run_id=run)
    pending = hazel.pending_request(run_id=run)
    assert moved.status is RunStatus.WAITING and moved.head_seq != head

    stale = client.post(f"/runs/{run}/rewind", data=form)
    assert stale.status_code == 409 and stale.headers["content-type"].startswith("text/html")
    message = text_of(stale)
    assert (f"the run changed since this page was loaded (it is now at #{moved.head_seq}, waiting, not #{head}; "
            "last rewound to #0 by olga") in message and "reload the page" in message, message
    after = hazel.get(run_id=run)
    assert (after.head_seq, after.last_branch, after.status) == (moved.head_seq, moved.last_branch,
                                                                 RunStatus.WAITING)
    assert hazel.pending_request(run_id=run).id == pending.id  # olga's branch and its request are kept
    refused = hazel.audit(run_id=run)[-1]
    assert refused.action == "decision.refused" and refused.channel == "web" and refused.person == "alice"

    headless = {k: v for k, v in form.items() if k != "head"}  # a form without the head it showed: refused
    bare = client.post(f"/runs/{run}/rewind", data=headless)  # (it skipped the check: a fresh-user finding)
    assert bare.status_code in (400, 422) and bare.headers["content-type"].startswith("text/html"), bare.text
    assert "head" in text_of(bare), text_of(bare)
    assert hazel.get(run_id=run).head_seq == moved.head_seq

    fresh = rewind_forms(client.get(f"/runs/{run}").text)["1"]  # reloaded: the page's head is the run's
    assert fresh["head"] == str(moved.head_seq) and fresh["request_id"] == str(pending.id)
    assert client.post(f"/runs/{run}/rewind", data=fresh).status_code == 303
    wait_for(served, RunStatus.WAITING, RunStatus.READY)
    assert hazel.decisions(run_id=run)[-1].payload["to"] == 1


def test_the_engine_checks_the_head_only_when_asked(served: Served) -> None:
    hazel, run = served.hazel, served.run_id
    from bot.engine import AlreadyDecidedError

    alice = as_api(hazel, "alice")
    head = hazel.get(run_id=run).head_seq
    with pytest.raises(AlreadyDecidedError, match=r"it is now at #\d+, waiting, not #0"):
        hazel.rewind(run_id=run, actor=alice, to=1, expect_head=0)
    assert hazel.get(run_id=run).head_seq == head  # nothing written
    hazel.rewind(run_id=run, actor=alice, to=1, expect_head=head)
    hazel.drive(run_id=run)
    hazel.rewind(run_id=run, actor=alice, to=1)  # without it: as before
    assert [d.payload["to"] for d in hazel.decisions(run_id=run)[-2:]] == [1, 1]


# -- 2. large text: the engine's refusal on the page, a form cap that follows HAZEL_MAX_STATE_BYTES ----------


def test_large_feedback_answers_the_run_page_with_the_engines_refusal(served: Served, client: Browserless) -> None:
    run = served.run_id
    sign_in(client, ALICE)
    csrf = client.csrf(f"/runs/{run}")
    request_id = served.hazel.pending_request(run_id=run).id
    form = {"action": "feedback", "csrf": csrf, "request_id": request_id, "text": "a" * 1_100_000}
    refused = client.post(f"/runs/{run}/decide", data=form)
    assert refused.status_code == 422 and refused.headers["content-type"].startswith("text/html")
    assert ("the feedback is 1,100,000 bytes; the limit is 1,048,576 (HAZEL_MAX_STATE_BYTES)"
            in text_of(refused)), refused.text[:500]
    assert 'id="pending"' in refused.text  # the run page itself, the pending request still there
    rewound = client.post(f"/runs/{run}/rewind", data={"to": 1, "csrf": csrf, "feedback": "b" * 1_100_000,
                                                             "head": served.hazel.get(run_id=run).head_seq})
    assert rewound.status_code == 422 and "the feedback is 1,100,000 bytes" in text_of(rewound)
    assert served.hazel.get(run_id=run).status is RunStatus.WAITING

    # within the limit, a text URL-encoded to over Starlette's 1024 KB part limit is taken whole (not cut short)
    long = "é" * 300_000  # 600,000 bytes of UTF-8, 1,800,000 URL-encoded
    taken = client.post(f"/runs/{run}/decide", data={**form, "text": long})
    assert taken.status_code == 303, taken.text[:500]
    assert served.hazel.decisions(run_id=run)[-1].payload["text"] == long


def test_a_form_over_the_body_limit_answers_a_page_the_api_json(served: Served, client: Browserless) -> None:
    """s23 F2: 400,000 × "é" (800,000 bytes, within HAZEL_MAX_STATE_BYTES; 2,400,000 URL-encoded, over the
    2 MiB HAZEL_MAX_BODY_BYTES) typed on the run page got the API's bare JSON in the browser. A page's form gets
    a page saying why, with a link back to its run; the REST API keeps its JSON."""
    run = served.run_id
    sign_in(client, ALICE)
    csrf = client.csrf(f"/runs/{run}")
    form = {"action": "feedback", "csrf": csrf, "request_id": served.hazel.pending_request(run_id=run).id,
            "text": "é" * 400_000}
    before = served.hazel.decisions(run_id=run)
    refused = client.post(f"/runs/{run}/decide", data=form)
    assert refused.status_code == 413 and refused.headers["content-type"].startswith("text/html"), refused.text[:300]
    assert re.search(r"the request body is 2,400,\d{3} bytes; the limit is 2,097,152 \(HAZEL_MAX_BODY_BYTES\); "
                     r"nothing was done", text_of(refused)), text_of(refused)
    assert f'href="/runs/{run}"' in refused.text
    assert served.hazel.get(run_id=run).status is RunStatus.WAITING and served.hazel.decisions(run_id=run) == before
    api = httpx.post(f"{served.url}/api/runs/{run}/decisions", content=b"x" * 2_200_000,
                     headers={"Content-Type": "application/x-www-form-urlencoded"}, timeout=10)
    assert api.status_code == 413 and api.json()["error"]["type"] == "PayloadTooLargeError"


@pytest.fixture
def roomy(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """The scenario's run served with ``HAZEL_MAX_STATE_BYTES`` 2 MiB and ``HAZEL_MAX_BODY_BYTES`` 16 MiB."""
    from bot.inbound.web import Signer, web_router
    from bot.server.http import create_app
    from tests.bot.web.scenario import run_with_two_rewinds, web_settings
    from tests.support.engine import make_hazel
    from tests.support.live import LiveServer
    from tests.workflows.doc import doc_workflow

    monkeypatch.setenv("HAZEL_MAX_STATE_BYTES", str(2 * 1024 * 1024))
    monkeypatch.setenv("HAZEL_MAX_BODY_BYTES", str(16 * 1024 * 1024))
    hazel = make_hazel(db_url, doc_workflow())
    assert hazel.settings.max_state_bytes == 2 * 1024 * 1024
    run_id = run_with_two_rewinds(hazel)
    settings = web_settings()
    with LiveServer(create_app(hazel, routers=[web_router(hazel, settings)])) as server:
        yield Served(hazel, server.url, run_id, Signer(settings))


def test_the_forms_size_cap_follows_hazel_max_state_bytes(roomy: Served) -> None:
    run, client = roomy.run_id, Browserless(roomy.url)
    sign_in(client, ALICE)
    csrf = client.csrf(f"/runs/{run}")
    request_id = roomy.hazel.pending_request(run_id=run).id
    form = {"action": "reject", "csrf": csrf, "request_id": request_id}
    refused = client.post(f"/runs/{run}/decide", data={**form, "text": "a" * 2_500_000})
    assert refused.status_code == 422 and refused.headers["content-type"].startswith("text/html")
    assert "the reason is 2,500,000 bytes; the limit is 2,097,152 (HAZEL_MAX_STATE_BYTES)" in text_of(refused)
    far = client.post(f"/runs/{run}/decide", data={**form, "text": "a" * 7_000_000})  # past what the form parses
    assert far.status_code == 413 and far.headers["content-type"].startswith("text/html"), far.text[:300]
    assert "a text may be at most 2,097,152 bytes (HAZEL_MAX_STATE_BYTES)" in text_of(far)
    assert '<span class="me">alice</span>' in far.text and f'href="/runs/{run}"' in far.text
    assert roomy.hazel.get(run_id=run).status is RunStatus.WAITING
    reason = "r" * 1_500_000  # over Starlette's fixed 1024 KB, within HAZEL_MAX_STATE_BYTES
    assert client.post(f"/runs/{run}/decide", data={**form, "text": reason}).status_code == 303
    assert roomy.hazel.decisions(run_id=run)[-1].payload["reason"] == reason


# -- 3. multi-line text typed on a page is stored with \n -------------------------------------------------


def test_text_typed_on_a_page_is_stored_with_newlines(served: Served, client: Browserless) -> None:
    hazel, run = served.hazel, served.run_id
    sign_in(client, ALICE)
    csrf = client.csrf(f"/runs/{run}")
    request_id = hazel.pending_request(run_id=run).id
    sent = client.post(f"/runs/{run}/decide", data={"action": "feedback", "csrf": csrf, "request_id": request_id,
                                                    "text": "one\r\ntwo\rthree\r\n"})
    assert sent.status_code == 303
    assert hazel.decisions(run_id=run)[-1].payload["text"] == "one\ntwo\nthree"
    wait_for(served, RunStatus.WAITING)
    request_id = hazel.pending_request(run_id=run).id
    assert client.post(f"/runs/{run}/rewind", data={"to": 1, "csrf": csrf, "request_id": request_id,
                                                    "head": hazel.get(run_id=run).head_seq,
                                                    "feedback": "a\r\nb"}).status_code == 303
    assert hazel.decisions(run_id=run)[-1].payload["feedback"] == "a\nb"
    wait_for(served, RunStatus.WAITING)
    request_id = hazel.pending_request(run_id=run).id
    assert client.post(f"/runs/{run}/decide", data={"action": "reject", "csrf": csrf, "request_id": request_id,
                                                    "text": "no\r\n\r\nnot this"}).status_code == 303
    assert hazel.decisions(run_id=run)[-1].payload["reason"] == "no\n\nnot this"


def test_a_browsers_textarea_newlines_are_stored_as_newlines(page, served: Served) -> None:  # noqa: ANN001
    run = served.run_id
    page.goto(f"/runs/{run}")
    page.fill("#token", ALICE)
    page.click("button[type=submit]")
    page.wait_for_url(f"**/runs/{run}")
    page.fill("#feedback", "first line\nsecond line")
    page.click("form.act-feedback button[type=submit]")
    page.wait_for_url(f"**/runs/{run}")
    feedback = [d for d in served.hazel.decisions(run_id=run) if d.action.value == "feedback"]
    assert feedback[-1].channel == "web" and feedback[-1].payload["text"] == "first line\nsecond line"


# -- 4. why someone may not rewind ------------------------------------------------------------------------


def test_the_page_says_why_someone_may_not_rewind(served: Served) -> None:
    bob = Browserless(served.url)
    sign_in(bob, BOB)  # bob may give feedback (anyone may), not rewind (the approvers and who started the run)
    page = bob.get(f"/runs/{served.run_id}").text
    assert "act-rewind" not in page and "rewind here" not in page
    shown = re.search(r'<p class="refused"><strong>Rewind</strong>: ([^<]+)</p>', page)
    assert shown, page
    assert html.unescape(shown.group(1)).startswith("bob may not rewind at 'Review the plan'")
    alice = Browserless(served.url)
    sign_in(alice, ALICE)
    assert "<strong>Rewind</strong>:" not in alice.get(f"/runs/{served.run_id}").text


# -- 5. the runs list's page label; a stale form's page as the signed-in person ----------------------------


def test_the_page_label_agrees_with_the_page_query(served: Served, client: Browserless,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sign_in(client, ALICE)
    far = client.get("/runs?page=999").text
    assert "page 1000" not in far and "no runs from run 24976 on" in far and "First page" in far
    assert "runs 1–1" in client.get("/runs").text
    monkeypatch.setattr(pages, "PAGE_SIZE", 1)
    served.hazel.start(workflow="doc", input={"topic": "another run"}, actor=as_api(served.hazel, "olga"))
    assert "runs 1–1" in client.get("/runs").text and "runs 2–2" in client.get("/runs?page=1").text


def test_a_stale_form_shows_the_page_as_the_signed_in_person(served: Served, client: Browserless) -> None:
    sign_in(client, ALICE)
    for path, form in ((f"/runs/{served.run_id}/decide", {"action": "approve"}),
                       (f"/runs/{served.run_id}/rewind", {"to": 1, "head": 0}), ("/logout", {})):
        refused = client.post(path, data={**form, "csrf": "stale"})
        assert refused.status_code == 403 and "this form is out of date" in refused.text, path
        header = refused.text.split("<main>", 1)[0]
        assert ">Sign in</a>" not in refused.text and "Sign out" in header, (path, header)
        assert '<span class="me">alice</span>' in header, path
    assert served.hazel.get(run_id=served.run_id).status is RunStatus.WAITING
    view_only = Browserless(served.url)
    view_only.get(served.link())
    csrf = view_only.csrf("/login")
    refused = view_only.post(f"/runs/{served.run_id}/decide", data={"action": "approve", "csrf": csrf})
    assert refused.status_code == 403 and "Sign in" in refused.text  # a view-only link is offered the sign-in


def test_a_vote_since_the_page_was_loaded_makes_its_rewind_stale(db_url: str) -> None:
    """A fresh-user finding (s32 F7, HIGH): a decision that writes no checkpoint (a quorum's vote; one of a
    graph's parallel requests) left the run's head where it was, so a page loaded before it rewound the run,
    and the decision was discarded on the old branch unseen. The form sends the newest decision it showed."""
    from pydantic import BaseModel

    from bot.inbound.web import web_router
    from bot.server.http import create_app
    from hazel import Approvers, StepContext, Workflow
    from tests.bot.web.conftest import Browserless
    from tests.bot.web.scenario import web_settings
    from tests.support.engine import make_hazel
    from tests.support.live import LiveServer

    class S(BaseModel):
        text: str = ""

    wf = Workflow("two-say", version=1, state=S)

    @wf.step
    def write(state: S, ctx: StepContext) -> S:
        return S(text="a draft")

    wf.steer("sign", show="text", actions=["approve", "rewind"], approvals_required=2,
             approvers=Approvers(users=["alice", "bob"]))
    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="two-say", input={}, actor=as_api(hazel, "olga"))
    hazel.drive(run_id=run.id)
    with LiveServer(create_app(hazel, routers=[web_router(hazel, web_settings())])) as server:
        client = Browserless(server.url)
        sign_in(client, ALICE)
        form = rewind_forms(client.get(f"/runs/{run.id}").text)["0"]
        assert form["decided"] == "0", form
        vote = hazel.decide(run_id=run.id, action="approve", actor=as_api(hazel, "bob"))  # 1 of 2: no checkpoint
        assert not vote.settled and hazel.get(run_id=run.id).head_seq == int(form["head"])
        stale = client.post(f"/runs/{run.id}/rewind", data=form)
        assert stale.status_code == 409, stale.text
        assert (f"the run changed since this page was loaded (it is still at #{form['head']}, waiting; last "
                "approved by bob") in text_of(stale), text_of(stale)
        assert [d.actor_id for d in hazel.decisions(run_id=run.id)] == ["bob"]  # his vote stands
        fresh = rewind_forms(client.get(f"/runs/{run.id}").text)["0"]
        assert fresh["decided"] == str(vote.decision.id)
        assert client.post(f"/runs/{run.id}/rewind", data=fresh).status_code == 303  # (seen: taken)
