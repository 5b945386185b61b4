"""A NUL character (U+0000, JSON ``"\\u0000"``) anywhere in what a person sends is refused by the engine in one
line (422 on the REST API) on SQLite and PostgreSQL alike, with nothing written: PostgreSQL stores no NUL in
text or JSONB (it answered 500), and SQLite took it. Over real HTTP: a feedback's text, a rejection's reason,
an edit's value, a rewind's feedback and edits, a cancel's reason, a start's input; and from the engine
directly, as the CLI and the chat channels call it."""

from __future__ import annotations

import json

import pytest

from bot.engine import InvalidDecisionError, InvalidInputError
from store.models import Actor
from tests.bot.test_api_limits import error_of, served, snapshot  # noqa: F401  (served: the fixture)
from tests.bot.test_not_text import raw  # (the body as ASCII JSON: a NUL travels as \\u0000)

NUL = "NUL character"


def test_a_nul_is_refused_on_the_api_and_nothing_is_written(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    for body in ({"workflow": "doc", "input": {"topic": "ab\x00c"}},
                 {"workflow": "loose", "input": {"data": {"k": ["x\x00"]}}},
                 {"workflow": "loose", "input": {"data": {"k\x00": 1}}}):
        assert NUL in error_of(raw(api, "POST", "/api/runs", body), 422, "InvalidInputError"), body
    assert hazel.runs() == []
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    before = snapshot(hazel, run_id)
    path = f"/api/runs/{run_id}/decisions"
    for body, noun in (({"action": "feedback", "payload": {"text": "nul\x00here"}}, "the feedback"),
                       ({"action": "reject", "payload": {"reason": "no\x00"}}, "the reason"),
                       ({"action": "edit", "payload": {"value": {"steps": ["x \x00"], "minutes": 5}}}, "the edit"),
                       ({"action": "edit", "payload": {"text": json.dumps({"steps": ["t\x00"], "minutes": 5})}},
                        "the edited state"),  # (the NUL is in the text's JSON: found once it is parsed)
                       ({"action": "rewind", "payload": {"to": 1, "feedback": "f\x00"}}, "the feedback"),
                       ({"action": "rewind", "payload": {"to": 1, "edits": {"topic": "t\x00"}}}, "the rewind")):
        message = error_of(raw(api, "POST", path, body), 422, "InvalidDecisionError")
        assert message.startswith(f"{noun} holds a {NUL}"), (body, message)  # (s20 L4: "the decision" said of
        # the feedback's, the reason's or the edit's text, where their other checks name them)
    assert NUL in error_of(raw(api, "POST", f"/api/runs/{run_id}/cancel", {"reason": "nul\x00x"}), 422,
                           "InvalidDecisionError")
    assert snapshot(hazel, run_id) == before
    # an escaped backslash before "u0000" is text, not a NUL: taken
    response = raw(api, "POST", path, {"action": "feedback", "payload": {"text": "a \\u0000 b"}})
    assert response.status_code == 201, response.text


def test_the_engine_refuses_a_nul_from_any_channel(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    before = snapshot(hazel, run_id)
    alice = Actor(channel="slack", id="alice")
    for action, payload in (("feedback", {"text": "bad\x00"}), ("reject", {"reason": "no\x00"}),
                            ("edit", {"entries": {"x\x00": "1"}}),
                            ("approve", {"note": "a\x00"})):
        with pytest.raises(InvalidDecisionError, match=NUL):
            hazel.decide(run_id=run_id, action=action, actor=alice, payload=payload)
    with pytest.raises(InvalidDecisionError, match=NUL):
        hazel.rewind(run_id=run_id, actor=alice, to=1, edits={"topic": "\x00"})
    with pytest.raises(InvalidDecisionError, match=NUL):
        hazel.cancel(run_id=run_id, actor=alice, reason="c\x00")
    with pytest.raises(InvalidInputError, match=NUL):
        hazel.start(workflow="loose", input={"data": "\x00"}, actor=alice)
    assert snapshot(hazel, run_id) == before


def test_a_person_not_allowed_is_told_so_whatever_they_sent(db_url: str) -> None:
    """Who, may they, then what they sent: a NUL or a lone surrogate from a person who may not decide here
    answers NotAllowedError (403), audited as a refusal, as any payload of theirs would; from a person who
    may, the text is refused (422)."""
    from bot.engine import NotAllowedError
    from tests.bot.test_api_limits import loose_workflow
    from tests.support.engine import make_hazel

    hazel = make_hazel(db_url, loose_workflow())
    alice, mallory = Actor(channel="api", id="alice"), Actor(channel="api", id="mallory")
    run_id = hazel.start(workflow="loose", input={"data": {"k": "v"}}, actor=alice).id
    hazel.drive(run_id=run_id)
    for bad in ("nul\x00", "lone \udc9b"):
        for action, payload in (("feedback", {"text": bad}), ("reject", {"reason": bad}),
                                ("edit", {"value": {"k": bad}}), ("rewind", {"to": 1, "feedback": bad}),
                                ("rewind", {"to": 1, "edits": {"data": bad}})):
            with pytest.raises(NotAllowedError):
                hazel.decide(run_id=run_id, action=action, actor=mallory, payload=payload)
            with pytest.raises(InvalidDecisionError):
                hazel.decide(run_id=run_id, action=action, actor=alice, payload=payload)
        with pytest.raises(NotAllowedError):
            hazel.cancel(run_id=run_id, actor=mallory, reason=bad)
    refused = [e for e in hazel.audit(run_id=run_id) if e.action == "decision.refused"]
    assert len(refused) >= 10 and hazel.decisions(run_id=run_id) == []
    hazel.close()
