"""The same decision sent several times at once with one ``Idempotency-Key`` (a client's retries racing its
first try), over real concurrent HTTP on SQLite and PostgreSQL: one decision is recorded and every request
gets it back, the first as 201 and the others as 200 ``duplicate: true``, never a 409 "not waiting" or
"already decided" for the requests that lost the race (they failed while the first one committed, and the
same key sent later got the duplicate)."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from tests.bot.test_api import ALICE, Api, served  # noqa: F401  (served: the fixture)

COPIES = 4


def at_once(url: str, path: str, body: dict[str, Any], key: str) -> list[httpx.Response]:
    """``COPIES`` identical POSTs, each on its own connection, released together."""
    barrier = threading.Barrier(COPIES)
    answers: list[Any] = [None] * COPIES

    def send(i: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            barrier.wait()
            answers[i] = http.post(path, json=body, headers={"Authorization": f"Bearer {ALICE}",
                                                             "Idempotency-Key": key})

    threads = [threading.Thread(target=send, args=(i,)) for i in range(COPIES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


@pytest.mark.parametrize("body", [
    {"action": "approve"},
    {"action": "reject", "payload": {"reason": "not now"}},
    {"action": "feedback", "payload": {"text": "shorter"}},
    {"action": "edit", "payload": {"value": {"steps": ["one"], "minutes": 5}}},
    {"action": "rewind", "payload": {"to": 0}},
], ids=lambda b: b["action"])
def test_concurrent_retries_with_one_key_all_get_the_first_decision(served, body) -> None:  # noqa: ANN001,F811
    hazel, api = served
    for attempt in range(3):
        run_id = api.wait_status(api.start()["id"], "waiting")["id"]
        key = f"race-{body['action']}-{attempt}"
        answers = at_once(api.url, f"/api/runs/{run_id}/decisions", body, key)
        codes = sorted(a.status_code for a in answers)
        assert codes == [200] * (COPIES - 1) + [201], [a.text for a in answers]
        ids = {a.json()["decision"]["id"] for a in answers}
        assert len(ids) == 1, [a.text for a in answers]
        assert sorted(a.json()["duplicate"] for a in answers) == [False] + [True] * (COPIES - 1)
        assert len(hazel.decisions(run_id=run_id)) == 1
        later = api.decide(run_id, body, headers={"Idempotency-Key": key})
        assert later.status_code == 200 and later.json()["duplicate"] is True, later.text
        assert later.json()["decision"]["id"] in ids
