"""The same decision sent several times at once with one ``Idempotency-Key`` (a client's retries racing its
first try), over real concurrent HTTP on SQLite and PostgreSQL: one decision is recorded and every request
gets it back, the first as 201 and the others as 200 ``duplicate: true``, never a 409 "not waiting" or
"already decided" for the requests that lost the race (they failed while the first one committed, and the
same key sent later got the duplicate)."""

from __future__ import annotations

import threading
from typing import Any, Iterator

import httpx
import pytest
from pydantic import BaseModel

from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from hazel import Approvers, StepContext, Workflow
from tests.bot.test_api import ALICE, TOKENS, Api, served  # noqa: F401  (served: the fixture)
from tests.support.engine import make_hazel
from tests.support.live import LiveServer

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
        # the step the decision continued at, as the first answer named it (a duplicate's was null)
        first = next(a.json() for a in answers if a.status_code == 201)
        assert {a.json()["next_node"] for a in answers} | {later.json()["next_node"]} == {first["next_node"]}


class Doc2(BaseModel):
    topic: str = "x"


def quorum_workflow() -> Workflow:
    """One steering point that needs two approvals (alice and bob)."""
    wf = Workflow("quorum", version=1, state=Doc2)

    @wf.step
    def draft(state: Doc2, ctx: StepContext) -> Doc2:
        return state

    wf.steer("review", approvers=Approvers(users=["alice", "bob"]), approvals_required=2)
    return wf


@pytest.fixture
def quorum(db_url: str) -> Iterator[tuple[Any, Api]]:
    hazel = make_hazel(db_url, quorum_workflow())
    app = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])
    with LiveServer(app) as server:
        yield hazel, Api(server.url)
    hazel.close()


def test_concurrent_retries_of_one_vote_count_it_once(quorum) -> None:  # noqa: ANN001
    """A quorum vote sent at once with one key: one vote counted, every request gets it back (the losers met
    the person's first vote, not only the key)."""
    hazel, api = quorum
    for attempt in range(3):
        run_id = api.wait_status(api.start("quorum", {})["id"], "waiting")["id"]
        answers = at_once(api.url, f"/api/runs/{run_id}/decisions", {"action": "approve"}, f"vote-{attempt}")
        assert sorted(a.status_code for a in answers) == [200] * (COPIES - 1) + [201], [a.text for a in answers]
        assert len({a.json()["decision"]["id"] for a in answers}) == 1
        assert all(a.json()["settled"] is False for a in answers)
        assert hazel.pending_request(run_id=run_id).approvals == 1
