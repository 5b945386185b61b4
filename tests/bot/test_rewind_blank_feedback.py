"""A rewind's feedback that shows nothing (spaces, characters that print as nothing: a zero-width space, U+FEFF)
is refused as a feedback decision's is, once the person may rewind (fresh-user s19 M1: a zero-width space was
stored as feedback and the drafting step "addressed" it, while spaces were dropped without a word and the step
got the earlier feedback again). Nothing is written."""

from __future__ import annotations

import pytest

from bot.engine.errors import InvalidDecisionError, NotAllowedError
from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from tests.bot.test_api import ALICE, TOKENS, Api
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow

BLANKS = ("", "   ", "\u200b", "\u200b \ufeff\u00ad", "\n\t")


def test_blank_rewind_feedback_is_refused_and_nothing_is_written(db_url: str) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    run = hazel.start(workflow="doc", input={"topic": "tests"}, actor=person("author"))
    hazel.drive(run_id=run.id)
    before = [c.seq for c in hazel.checkpoints(run_id=run.id)]
    for blank in BLANKS:
        with pytest.raises(InvalidDecisionError, match="^the feedback is blank: give some text, or no feedback"):
            hazel.rewind(run_id=run.id, actor=person("alice"), to="draft", feedback=blank)
        with pytest.raises(InvalidDecisionError, match="^the feedback is blank"):  # the same through decide
            hazel.decide(run_id=run.id, action="rewind", actor=person("alice"),
                         payload={"to": "draft", "feedback": blank})
    with pytest.raises(NotAllowedError):  # who, may they, then what they sent
        hazel.rewind(run_id=run.id, actor=person("bob"), to="draft", feedback="\u200b")
    assert [c.seq for c in hazel.checkpoints(run_id=run.id)] == before
    assert hazel.decisions(run_id=run.id) == []
    # feedback with words in it still goes to the step, trimmed; none at all is a rewind without feedback
    hazel.rewind(run_id=run.id, actor=person("alice"), to="draft", feedback="  \u200bshorter  ")
    hazel.drive(run_id=run.id)
    assert hazel.state_at(run_id=run.id).feedback == ["\u200bshorter"]
    hazel.rewind(run_id=run.id, actor=person("alice"), to="draft")
    assert [d.payload.get("feedback") for d in hazel.decisions(run_id=run.id)] == ["\u200bshorter", None]


def test_rest_answers_422(db_url: str) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    with LiveServer(create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        run_id = api.wait_status(api.start()["id"], "waiting")["id"]
        for blank in BLANKS:
            answer = api.decide(run_id, {"action": "rewind", "payload": {"to": "draft", "feedback": blank}},
                                token=ALICE)
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["message"].startswith("the feedback is blank"), answer.text
    assert hazel.decisions(run_id=run_id) == []
