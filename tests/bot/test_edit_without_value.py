"""An edit that gives no new value is refused in words its sender can act on: the engine says what is missing
in no channel's terms (``an edit needs a new value for field 'plan'``, a ``MissingEditValueError``), and the
REST API adds what its schema takes (``payload.value`` or ``payload.text``). The engine's message used to name
``payload 'value', 'text' or 'entries'``, and the REST API's ``EditPayload`` has no ``entries``."""

from __future__ import annotations

import pytest

from bot.engine import InvalidDecisionError, MissingEditValueError
from store.models import Actor
from tests.bot.test_api_limits import error_of, served, snapshot  # noqa: F401  (served: the fixture)

REST_WORDS = ("an edit needs a new value for field 'plan': send payload.value (the new value as JSON) or "
              "payload.text (the new value as typed)")


def test_the_rest_api_names_the_fields_its_schema_takes(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    before = snapshot(hazel, run_id)
    for body in ({"action": "edit"}, {"action": "edit", "payload": {}},
                 {"action": "edit", "payload": {"allow_empty": True}}):
        assert error_of(api.decide(run_id, body), 422, "InvalidDecisionError") == REST_WORDS, body
    assert snapshot(hazel, run_id) == before  # nothing recorded
    sent = api.decide(run_id, {"action": "edit", "payload": {"value": {"steps": ["as told"], "minutes": 5}}})
    assert sent.status_code == 201, sent.text  # what it was told to send goes through
    assert hazel.decisions(run_id=run_id)[-1].payload["value"]["steps"] == ["as told"]


def test_the_engine_says_it_in_no_channels_terms(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    alice = Actor(id="alice", channel="console", name="alice")
    for payload in ({}, {"allow_empty": False}, {"text": ""}):
        with pytest.raises(MissingEditValueError) as refused:
            hazel.decide(run_id=run_id, action="edit", actor=alice, payload=payload)
        assert isinstance(refused.value, InvalidDecisionError)  # (what callers already catch)
        assert str(refused.value) == "an edit needs a new value for field 'plan'", payload
    assert hazel.decisions(run_id=run_id) == []
