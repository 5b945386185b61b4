"""A page's form whose percent-encoded bytes are not UTF-8 (``feedback=%ff%fe``) is refused with one line (422)
and nothing is written: Starlette's form parser read the bytes as U+FFFD and a rewind was recorded with the
feedback ``"\\ufffd\\ufffd"``. A U+FFFD the person typed (``%EF%BF%BD``) is taken."""

from __future__ import annotations

import pytest
from markupsafe import escape

from tests.bot.web.conftest import Browserless, Served
from tests.bot.web.scenario import ALICE
from tests.bot.web.test_bad_input import assert_html_error
from tests.bot.web.test_pages import sign_in

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def written(served: Served) -> tuple:
    """What a refused form must leave as it was: the run, its decisions and its audit log."""
    hazel, run = served.hazel, served.hazel.get(run_id=served.run_id)
    return (run.status, run.head_seq, run.branch, hazel.decisions(run_id=run.id), len(hazel.audit(run_id=run.id)))


def post(client: Browserless, path: str, body: str):  # noqa: ANN201
    return client.post(path, content=body.encode("ascii"), headers=FORM)


@pytest.mark.parametrize("action,field", [("rewind", "feedback"), ("feedback", "text"), ("reject", "text"),
                                          ("approve", "text")])
def test_a_form_that_is_not_utf8_is_refused_and_writes_nothing(served: Served, client: Browserless,
                                                               action: str, field: str) -> None:
    run = served.run_id
    sign_in(client, ALICE)
    csrf = client.csrf(f"/runs/{run}")
    head, request_id = served.hazel.get(run_id=run).head_seq, served.hazel.pending_request(run_id=run).id
    path, form = ((f"/runs/{run}/rewind", f"csrf={csrf}&nonce=x6&head={head}&to=1&request_id={request_id}")
                  if action == "rewind" else
                  (f"/runs/{run}/decide", f"csrf={csrf}&nonce=x6&action={action}&request_id={request_id}"))
    before = written(served)

    refused = post(client, path, f"{form}&{field}=%ff%fe")
    assert refused.status_code == 422
    assert_html_error(refused, path, escape(f"the form's field {field} holds a byte that is not UTF-8 (0xFF, sent "
                                            "as %FF): send the form in UTF-8"))  # (HTML: the ' escaped)
    assert f'href="/runs/{run}"' in refused.text  # back to the run
    assert written(served) == before

    taken = post(client, path, f"{form}&{field}=typed%EF%BF%BD")  # U+FFFD, as UTF-8: text like any other
    assert taken.status_code == 303, taken.text[:500]
    decision = served.hazel.decisions(run_id=run)[-1]
    assert decision.action == action
    if action != "approve":
        assert decision.payload[{"rewind": "feedback", "feedback": "text", "reject": "reason"}[action]] == "typed\ufffd"


def test_a_body_not_utf8_unescaped_or_multipart_or_a_bad_field_name_is_refused(served: Served,
                                                                              client: Browserless) -> None:
    run = served.run_id
    sign_in(client, ALICE)
    csrf = client.csrf(f"/runs/{run}")
    request_id = served.hazel.pending_request(run_id=run).id
    before = written(served)
    path = f"/runs/{run}/decide"
    form = f"csrf={csrf}&action=feedback&request_id={request_id}&text=".encode("ascii")
    raw = client.post(path, content=form + b"ok\xff", headers=FORM)  # a byte sent as it is, not percent-encoded
    assert_html_error(raw, path, f"the body is not valid UTF-8 (byte {len(form) + 2}): send the form in UTF-8")
    unescaped = client.post(path, content=form + "café".encode(), headers=FORM)  # UTF-8, not percent-encoded:
    assert_html_error(unescaped, path, f"the form holds a character that is not percent-encoded (byte "  # it was
                      f"{len(form) + 3}): send it URL-encoded, as a browser does")  # stored as "cafÃ©"
    named = post(client, path, f"csrf={csrf}&action=feedback&request_id={request_id}&te%C3xt=a")
    assert_html_error(named, path, "holds a byte that is not UTF-8 (0xC3, sent as %C3)")
    # the pages send URL-encoded forms; a multipart one (``curl -F``) had its fields read as latin-1, a byte
    # that is not UTF-8 taken as ``ÿ``
    multipart = client.post(path, data={"csrf": csrf, "action": "feedback", "request_id": str(request_id)},
                            files={"text": ("t.txt", b"bad\xff", "text/plain")})
    assert multipart.status_code == 415 and multipart.headers["content-type"].startswith("text/html")
    assert "forms are sent URL-encoded (application/x-www-form-urlencoded)" in multipart.text
    # a JSON body, as the REST API takes (s19 L3: it answered "action: Field required", the action it held unread)
    for media in ("application/json", "application/json; charset=utf-8", "application/merge-patch+json"):
        as_json = client.post(path, json={"csrf": csrf, "action": "approve"}, headers={"Content-Type": media})
        assert as_json.status_code == 415 and as_json.headers["content-type"].startswith("text/html"), media
        assert "not JSON, which the REST API under /api takes" in as_json.text, as_json.text
    assert written(served) == before


def test_the_sign_in_form_that_is_not_utf8_is_refused(served: Served, client: Browserless) -> None:
    csrf = client.csrf("/login")
    refused = post(client, "/login", f"csrf={csrf}&next=%2Fruns&token=tok%80")
    assert_html_error(refused, "/login", "field token holds a byte that is not UTF-8 (0x80, sent as %80)")
    assert "hazel_session" not in refused.cookies

