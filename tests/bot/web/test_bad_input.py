"""The run pages given what a new user gives them: integers past any column's range, malformed queries and
forms (an HTML page with a one-line message, never FastAPI's JSON, never a 500), and stored text holding
terminal and bidi control characters (shown as visible escapes, as the CLI shows them)."""

from __future__ import annotations

import pytest

from bot.inbound.web.diff import line_diff
from tests.bot.web.conftest import Browserless, Served
from tests.bot.web.test_pages import sign_in
from tests.bot.web.scenario import ALICE, BOB, as_api

HUGE = "99999999999999999999"  # past 2**64
PAST_INT64 = str(2**63)
PAST_INT32 = str(2**31)


def assert_html_error(response, path: str, *words: str) -> None:  # noqa: ANN001
    assert response.status_code in (400, 404, 422), (path, response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("text/html"), (path, response.headers["content-type"])
    assert '<p class="error" role="alert">' in response.text, path
    message = response.text.split('<p class="error" role="alert">', 1)[1].split("</p>", 1)[0]
    assert "\n" not in message.strip() and message.strip(), (path, message)
    for word in words:
        assert word in message, (path, message)
    assert "content-security-policy" in response.headers, path


@pytest.mark.parametrize("number", [HUGE, PAST_INT64, PAST_INT32])
def test_integers_out_of_range_answer_a_page_not_a_500(served: Served, client: Browserless, number: str) -> None:
    sign_in(client, ALICE)
    run = served.run_id
    for path, word in ((f"/runs?page={number}", "page"), (f"/runs?mine=1&page={number}", "page"),
                       (f"/runs/{run}/checkpoints/{number}", "seq"), (f"/runs/{run}/diff?a={number}", "a"),
                       (f"/runs/{run}/diff?a=0&b={number}", "b")):
        assert_html_error(client.get(path), path, word)
    csrf = client.csrf(f"/runs/{run}")
    for path, form, word in ((f"/runs/{run}/rewind", {"to": number, "head": 0}, "to"),
                             (f"/runs/{run}/rewind", {"to": 1, "head": 0, "request_id": number}, "request_id"),
                             (f"/runs/{run}/rewind", {"to": 1, "head": number}, "head"),
                             (f"/runs/{run}/decide", {"action": "approve", "request_id": number}, "request_id")):
        assert_html_error(client.post(path, data={**form, "csrf": csrf}), path, word)
    assert served.hazel.get(run_id=run).status.value == "waiting"  # nothing decided
    assert client.get(f"/runs?page={2**31 - 1}").status_code == 200  # the largest page is an empty page


def test_malformed_queries_and_forms_answer_an_html_page(served: Served, client: Browserless) -> None:
    sign_in(client, ALICE)
    run = served.run_id
    for path, word in ((f"/runs/{run}/diff?a=x", "a"), ("/runs?page=-1", "page"), ("/runs?mine=perhaps", "mine"),
                       (f"/runs/{run}/checkpoints/-1", "seq"), (f"/runs/{run}/checkpoints/seven", "seq"),
                       # whole numbers written as ones that are not (s19 L4: each answered 200)
                       ("/runs?page=1.0", "page"), (f"/runs/{run}?page=0.0", "page"),
                       (f"/runs/{run}/checkpoints/1.0", "seq"), (f"/runs/{run}/diff?a=1.0&b=2", "a")):
        assert_html_error(client.get(path), path, word)
    csrf = client.csrf(f"/runs/{run}")
    assert_html_error(client.post(f"/runs/{run}/decide", data={"csrf": csrf}), "decide", "action")
    assert_html_error(client.post(f"/runs/{run}/rewind", data={"to": "first", "head": 0, "csrf": csrf}), "rewind", "to")


def test_a_bad_request_page_shows_who_is_signed_in(served: Served, client: Browserless) -> None:
    signed_out = client.get("/runs?page=-1")
    assert_html_error(signed_out, "/runs", "page")
    assert ">Sign in</a>" in signed_out.text
    sign_in(client, ALICE)
    run = served.run_id
    for path in ("/runs?page=-1", f"/runs/{run}/diff?a=x", f"/runs/{run}/checkpoints/seven"):
        page = client.get(path)
        assert_html_error(page, path)
        header = page.text.split("<main>", 1)[0]
        assert ">Sign in</a>" not in header and "Sign out" in header and '<span class="me">alice</span>' in header, \
            (path, header)


def test_a_no_such_run_page_shows_who_is_signed_in(served: Served, client: Browserless) -> None:
    sign_in(client, ALICE)
    page = client.get("/runs/ffffffffffff")
    assert page.status_code == 404 and "No such run" in page.text, page.text
    header = page.text.split("<main>", 1)[0]
    assert ">Sign in</a>" not in header and "Sign out" in header and '<span class="me">alice</span>' in header, header


def test_the_rest_api_keeps_its_json_errors(db_url: str) -> None:
    from bot.inbound.api import api_router
    from bot.inbound.web import web_router
    from bot.server.http import create_app
    from tests.bot.web.scenario import web_settings
    from tests.support.engine import make_hazel
    from tests.support.live import LiveServer
    from tests.workflows.doc import doc_workflow

    hazel, settings = make_hazel(db_url, doc_workflow()), web_settings()
    with LiveServer(create_app(hazel, routers=[api_router(hazel, settings), web_router(hazel, settings)])) as server:
        client = Browserless(server.url)
        api = client.get("/api/runs?limit=x", headers={"Authorization": f"Bearer {ALICE}"})
        assert api.status_code == 422 and api.headers["content-type"].startswith("application/json")
        assert api.json()["error"]["type"] == "InvalidRequestError"
        sign_in(client, ALICE)
        assert_html_error(client.get("/runs?page=x"), "/runs", "page")


CONTROLS = "fb \x1b]0;PWNED\x07 \x9b2J \u202eevil\u202c \u2066x\u2069 del\x7f"
SHOWN = r"fb \x1b]0;PWNED\x07 \x9b2J \u202eevil\u202c \u2066x\u2069 del\x7f"


def test_control_characters_in_stored_text_are_shown_as_escapes(served: Served, client: Browserless) -> None:
    hazel, run = served.hazel, served.run_id
    before = hazel.get(run_id=run).head_seq
    hazel.decide(run_id=run, action="feedback", actor=as_api(hazel, "bob"),
                 payload={"text": CONTROLS + "\nsecond line\ttabbed"})
    hazel.drive(run_id=run)
    head = hazel.get(run_id=run).head_seq
    sign_in(client, BOB)
    pages = {"run": client.get(f"/runs/{run}").text, "state": client.get(f"/runs/{run}/checkpoints/{head}").text,
             "diff": client.get(f"/runs/{run}/diff?a={before}&b={head}").text,
             "audit": client.get(f"/runs/{run}/audit").text}
    for name, text in pages.items():
        for raw in ("\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\u202c", "\u2066", "\u2069"):
            assert raw not in text, (name, repr(raw))
    assert SHOWN in pages["run"]  # the decision's text
    assert "second line\ttabbed" in pages["run"]  # newlines and tabs stay
    for shown in (r"\u202eevil\u202c", r"\x9b2J", r"\u2066x\u2069", r"del\x7f"):  # the feedback list, as JSON
        assert shown in pages["diff"], shown
    assert r"PWNED\u0007" in pages["diff"]  # json.dumps escapes C0 itself
    # the state as JSON: json.dumps escapes C0 itself (\u001b); C1, DEL and bidi characters get the escape
    assert "PWNED" in pages["state"] and r"\u202eevil" in pages["state"] and r"\x9b2J" in pages["state"]
    assert "&lt;script&gt;" in pages["state"]  # still escaped: the escape is before autoescape, not instead of


def test_a_diff_splits_lines_on_newlines_only() -> None:
    """Form feeds, vertical tabs, file/group/record separators, NEL and U+2028 stay inside their line (shown as
    escapes by the page), so no character vanishes into a line break."""
    (hunk,) = line_diff("a\x0bb\nc\r\nd", "a\x0bb\nc\r\nD\x1c\x85\u2028e")
    assert [(line.tag, line.text) for line in hunk] == [
        ("same", "a\x0bb"), ("same", "c"), ("del", "d"), ("add", "D\x1c\x85\u2028e")]
    (added,) = line_diff("", "x\n")
    assert [(line.tag, line.text) for line in added] == [("add", "x")]
    assert line_diff("", "") == () and line_diff("same\n", "same") == ()


def test_waiting_on_me_lists_a_request_anyone_may_decide(db_url: str) -> None:
    """The page offers ``approve`` to the signed-in person on a point with no approvers ("Who may decide:
    anyone"), so "Waiting on me" should list the run too."""
    from bot.inbound.web import web_router
    from bot.server.http import create_app
    from hazel import StepContext, Workflow
    from tests.bot.web.scenario import web_settings
    from tests.support.engine import make_hazel
    from tests.support.live import LiveServer
    from tests.workflows.doc import Doc

    wf = Workflow("open", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer("go", title="Go ahead?")
    hazel, settings = make_hazel(db_url, wf), web_settings()
    run = hazel.start(workflow="open", input={"topic": "anyone decides"}, actor=as_api(hazel, "olga"))
    hazel.drive(run_id=run.id)
    with LiveServer(create_app(hazel, routers=[web_router(hazel, settings)])) as server:
        client = Browserless(server.url)
        sign_in(client, ALICE)
        assert 'value="approve"' in client.get(f"/runs/{run.id}").text
        assert run.id in client.get("/runs?mine=1").text


def test_a_form_that_sends_a_field_twice_or_an_unknown_action_is_malformed(served: Served,
                                                                           client: Browserless) -> None:
    """A fresh-user finding (s27 F9): ``action=reject&text=r&action=approve`` recorded the last value (approve),
    which a filter in front reading the first would not see; an unknown action answered 403 "not allowed"
    though it is malformed. Both are 422 now, nothing decided."""
    from urllib.parse import urlencode

    sign_in(client, ALICE)
    run = served.run_id
    before = served.hazel.decisions(run_id=run)
    csrf = client.csrf(f"/runs/{run}")
    body = urlencode([("csrf", csrf), ("action", "reject"), ("text", "r"), ("action", "approve")])
    response = client.post(f"/runs/{run}/decide", content=body,
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 422, response.text[:300]
    assert_html_error(response, "decide", "the form sends &#39;action&#39; more than once")
    response = client.post(f"/runs/{run}/decide", data={"csrf": csrf, "action": "bogus"})
    assert response.status_code == 422 and "&#39;bogus&#39; is not a decision the page takes (approve, reject, " \
        "feedback)" in response.text, response.text[:300]
    for empty in ({"csrf": csrf, "action": ""}, {"csrf": csrf}):  # (s29 F9: "action: Field required")
        response = client.post(f"/runs/{run}/decide", data=empty)
        assert response.status_code == 422 and "the form sends no action: choose one of approve, reject, " \
            "feedback" in response.text, response.text[:300]
    assert served.hazel.get(run_id=run).status.value == "waiting" and served.hazel.decisions(run_id=run) == before
