"""The REST API's numbers are JSON integers: a boolean was taken as a number (``{"action": "rewind", "payload":
{"to": true}}`` was recorded as a rewind to #1, 201; ``"request_id": true`` answered "no steering request 1").
Each answers 422 ``InvalidRequestError`` naming the field, and nothing is recorded. A string of digits for
``to`` still names that checkpoint."""

from __future__ import annotations

import pytest

from tests.bot.test_api import ALICE, error_of, served  # noqa: F401  (the fixture)


def _waiting(api) -> str:  # noqa: ANN001
    return api.wait_status(api.start()["id"], "waiting")["id"]


@pytest.mark.parametrize(("body", "field"), [
    ({"action": "rewind", "payload": {"to": True}}, "to"),
    ({"action": "rewind", "payload": {"to": False}}, "to"),
    ({"action": "rewind", "payload": {"to": 1.0}}, "to"),
    ({"action": "approve", "request_id": True}, "request_id"),
    ({"action": "approve", "request_id": 1.0}, "request_id"),
    ({"action": "approve", "request_id": "1"}, "request_id"),
    ({"action": "feedback", "payload": {"text": "x"}, "request_id": False}, "request_id"),
    ({"action": "rewind", "payload": {"to": 0}, "request_id": True}, "request_id"),
], ids=lambda v: str(v) if not isinstance(v, dict) else None)
def test_a_boolean_or_float_is_not_a_number(served, body: dict, field: str) -> None:  # noqa: ANN001, F811
    hazel, api = served
    run_id = _waiting(api)
    error = error_of(api.decide(run_id, body, token=ALICE), 422)
    assert error["type"] == "InvalidRequestError" and field in error["message"], error
    if field == "to" and not isinstance(body["payload"]["to"], float):
        assert error["message"] == "rewind.payload.to: Input should be a valid integer or a valid string", error
    assert hazel.decisions(run_id=run_id) == [] and hazel.get(run_id=run_id).status.value == "waiting"


def test_a_start_version_must_be_an_integer(served) -> None:  # noqa: ANN001, F811
    hazel, api = served
    answer = api.call("POST", "/api/runs", json={"workflow": "doc", "input": {"topic": "t"}, "version": True})
    assert "version" in error_of(answer, 422)["message"]
    assert hazel.runs() == []


def test_a_string_of_digits_is_still_a_checkpoint(served) -> None:  # noqa: ANN001, F811
    hazel, api = served
    run_id = _waiting(api)
    answer = api.decide(run_id, {"action": "rewind", "payload": {"to": "1"}}, token=ALICE)
    assert answer.status_code == 201, answer.text
    assert answer.json()["decision"]["payload"]["to"] in (1, "1")


def test_query_numbers_that_are_not_integers_answer_422(served) -> None:  # noqa: ANN001, F811
    hazel, api = served
    for query in ("offset=true", "limit=1.5", "offset=-1"):
        assert error_of(api.call("GET", f"/api/runs?{query}"), 422)["message"]
    # a whole number written as one that is not (s19 L4: `limit=1.0` listed one run, `/checkpoints/1.0` read #1)
    run_id = _waiting(api)
    for path in ("/api/runs?limit=1.0", "/api/runs?offset=0.0", "/api/runs?limit=1_0", "/api/runs?limit=%201",
                 f"/api/runs/{run_id}/checkpoints/1.0/state", f"/api/runs/{run_id}/checkpoints/1e0/state"):
        message = error_of(api.call("GET", path), 422)["message"]
        assert "must be a whole number written in digits" in message, (path, message)
    assert api.call("GET", f"/api/runs/{run_id}/checkpoints/1/state").status_code == 200
    assert api.call("GET", "/api/runs?limit=1").json()["limit"] == 1


def test_a_decisions_action_and_payload_are_answered_in_the_apis_words(served) -> None:  # noqa: ANN001, F811
    """Fresh-user s19 L3: a missing ``action`` answered pydantic's "Unable to extract tag using discriminator",
    a number ``5`` was shown as the text ``"5"``, and an approval with ``"payload": {}`` (a client that always
    sends one) was refused as extra input."""
    hazel, api = served
    run_id = _waiting(api)
    for body, says in (({"payload": {}}, "action: Field required (one of 'approve', 'edit', 'reject', 'feedback', "
                                         "'rewind')"),
                       ({"action": 5}, "action: 5 is not one of 'approve', 'edit', 'reject', 'feedback', 'rewind'"),
                       ({"action": "5"}, "action: \"5\" is not one of 'approve'"),
                       ({"action": "approve", "payload": {"x": 1}}, "approve.payload.x: Extra inputs are not "
                                                                    "permitted")):
        message = error_of(api.decide(run_id, body, token=ALICE), 422)["message"]
        assert message.startswith(says), (body, message)
    assert hazel.decisions(run_id=run_id) == []
    answer = api.decide(run_id, {"action": "approve", "payload": {}}, token=ALICE)
    assert answer.status_code == 201, answer.text
    assert [d.action.value for d in hazel.decisions(run_id=run_id)] == ["approve"]


def test_an_action_that_is_an_object_or_a_list_is_named_not_echoed(served) -> None:  # noqa: ANN001, F811
    hazel, api = served
    run_id = _waiting(api)
    for action, shown in (({"a": "x" * 5000}, "an object"), (["approve"], "a list"), (None, "null"),
                          (True, "true"), (1.5, "1.5")):
        message = error_of(api.decide(run_id, {"action": action}, token=ALICE), 422)["message"]
        assert message.startswith(f"action: {shown} is not one of 'approve'"), (action, message)
    assert hazel.decisions(run_id=run_id) == []
