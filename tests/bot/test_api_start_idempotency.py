"""``POST /api/runs`` with an ``Idempotency-Key``, over real HTTP on SQLite and PostgreSQL: the same caller
sending the same key again gets the run the first request started (200, the run as it is now), never a second
run, also when the copies arrive at once (the database's unique key on ``hazel_runs`` decides); keys are the
caller's; a key that started a run of another workflow answers 422; a malformed key answers 422 and starts
nothing; a start without a key starts a run each time."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.bot.test_api import (  # noqa: F401  (served: the fixture)
    ALICE, BOB, XY, Api, X, error_of, overlapping_callers, served)
from tests.bot.test_idempotent_race import COPIES, at_once

BODY = {"workflow": "doc", "input": {"topic": "backups"}}


def start(api: Api, key: str | bytes | None, *, token: str = ALICE, body: dict[str, Any] = BODY) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return api.call("POST", "/api/runs", token=token, json=body, headers=headers)


def test_a_repeated_key_answers_200_with_the_first_run_as_it_is_now(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    first = start(api, "start-7f3a")
    assert first.status_code == 201, first.text
    run_id = first.json()["id"]
    api.wait_status(run_id, "waiting")
    again = start(api, "start-7f3a")
    assert again.status_code == 200, again.text
    assert again.json()["id"] == run_id
    assert again.json()["status"] == "waiting"  # as it is now, not as it was started
    assert again.json()["created_at"] == first.json()["created_at"]
    assert [r.id for r in hazel.runs()] == [run_id]
    # the payload is not compared, as for decisions: the same key and workflow, another input, is the same start
    other_input = start(api, "start-7f3a", body={"workflow": "doc", "input": {"topic": "other"}})
    assert (other_input.status_code, other_input.json()["id"]) == (200, run_id)
    assert len(hazel.runs()) == 1


def test_concurrent_starts_with_one_key_make_one_run(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    ids: set[str] = set()
    for attempt in range(3):
        answers = at_once(api.url, "/api/runs", BODY, f"race-{attempt}")
        assert sorted(a.status_code for a in answers) == [200] * (COPIES - 1) + [201], [a.text for a in answers]
        started = {a.json()["id"] for a in answers}
        assert len(started) == 1, [a.text for a in answers]
        ids |= started
        assert len(hazel.runs()) == attempt + 1
    assert {r.id for r in hazel.runs()} == ids


def test_another_callers_same_key_starts_its_own_run(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    alices = start(api, "shared-key", token=ALICE)
    bobs = start(api, "shared-key", token=BOB)
    assert (alices.status_code, bobs.status_code) == (201, 201), (alices.text, bobs.text)
    assert alices.json()["id"] != bobs.json()["id"]
    assert (alices.json()["started_by"], bobs.json()["started_by"]) == ("alice", "bob")
    for token, first in ((ALICE, alices), (BOB, bobs)):
        again = start(api, "shared-key", token=token)
        assert (again.status_code, again.json()["id"]) == (200, first.json()["id"]), again.text
    assert len(hazel.runs()) == 2


def test_keys_of_callers_whose_names_overlap_never_meet(db_url: str) -> None:
    """Caller ``x`` with key ``y:k`` and caller ``x:y`` with key ``k`` (both ``x:y:k`` if joined naively)."""
    with overlapping_callers(db_url) as (hazel, api):
        first = start(api, "y:k", token=X)
        second = start(api, "k", token=XY)
        assert (first.status_code, second.status_code) == (201, 201), (first.text, second.text)
        assert first.json()["id"] != second.json()["id"]
        assert second.json()["started_by"] == "x:y"
        assert (start(api, "y:k", token=X).status_code, start(api, "k", token=XY).status_code) == (200, 200)
        assert len(hazel.runs()) == 2


def test_a_key_reused_for_another_workflow_answers_422_naming_the_run(served) -> None:  # noqa: ANN001,F811
    hazel, api = served
    first = start(api, "one-key")
    assert first.status_code == 201, first.text
    run_id = first.json()["id"]
    error = error_of(start(api, "one-key", body={"workflow": "flaky", "input": {"topic": "x"}}), 422)
    assert error["type"] == "IdempotencyKeyReusedError", error
    assert run_id in error["message"] and "doc" in error["message"], error
    assert [r.id for r in hazel.runs()] == [run_id]


@pytest.mark.parametrize("key", ["ключ".encode(), "clé".encode("latin-1"), b"a\tb", b"", b"k" * 151],
                         ids=["utf8", "latin1", "tab", "empty", "too-long"])
def test_a_malformed_key_answers_422_and_starts_nothing(served, key: bytes) -> None:  # noqa: ANN001,F811
    hazel, api = served
    error = error_of(start(api, key), 422)
    assert error["type"] == "InvalidRequestError", error
    assert "Idempotency-Key" in error["message"] or "idempotency-key" in error["message"].lower(), error
    if len(key) <= 150:
        assert "printable ASCII" in error["message"] and "nothing was started" in error["message"], error
    assert hazel.runs() == []


def test_without_a_key_each_start_starts_a_run(served) -> None:  # noqa: ANN001,F811
    """Starts without the header are never taken for one another, nor for a keyed start (a null key is no key),
    while the keyed start beside them is recognised when repeated."""
    hazel, api = served
    keyed = start(api, "with-key")
    plain = [start(api, None) for _ in range(3)]
    assert [a.status_code for a in [keyed, *plain]] == [201] * 4, [a.text for a in plain]
    again = start(api, "with-key")
    assert (again.status_code, again.json()["id"]) == (200, keyed.json()["id"]), again.text
    ids = {a.json()["id"] for a in [keyed, *plain]}
    assert len(ids) == 4 and {r.id for r in hazel.runs()} == ids
