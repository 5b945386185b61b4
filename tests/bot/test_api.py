"""The REST API over real HTTP (uvicorn on loopback), on SQLite and PostgreSQL: auth, starting and reading runs,
decisions with the same rules as the other channels, idempotency, errors, and the OpenAPI document."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from bot.inbound.api import api_router
from bot.engine.errors import ConfigurationError
from bot.ops.worker import WorkerPool
from bot.settings import Settings
from bot.server.http import create_app
from bot.server.wiring import http_routers
from store.models import RunStatus
from tests.support.deployment import wait_for
from tests.support.engine import make_hazel
from tests.support.live import LiveServer
from tests.workflows.doc import Plan, doc_workflow, flaky_workflow

ALICE, BOB, API = "tok-alice-0123456789", "tok-bob-9876543210", "tok-api-5555555555"
TOKENS = {"HAZEL_API_TOKENS": f"alice={ALICE}, bob={BOB}", "HAZEL_API_TOKEN": API}


class Api:
    """An HTTP client of the live server, one bearer token per caller."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30)

    def call(self, method: str, path: str, *, token: str | None = ALICE, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return self.http.request(method, path, headers=headers, **kwargs)

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.call("GET", f"/api/runs/{run_id}")
        assert response.status_code == 200, response.text
        return response.json()

    def wait_status(self, run_id: str, *statuses: str) -> dict[str, Any]:
        return wait_for(lambda: (r := self.run(run_id))["status"] in statuses and r,
                        what=f"run {run_id} to be {statuses}")

    def start(self, workflow: str = "doc", input: dict | None = None, **kwargs: Any) -> dict[str, Any]:
        response = self.call("POST", "/api/runs", json={"workflow": workflow, "input": input or {"topic": "backups"}},
                             **kwargs)
        assert response.status_code == 201, response.text
        return response.json()

    def decide(self, run_id: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return self.call("POST", f"/api/runs/{run_id}/decisions", json=body, **kwargs)


@pytest.fixture
def served(db_url: str) -> Iterator[tuple[Any, Api]]:
    """Hazel with the doc and flaky workflows, its app (health, metrics, the API) on a live server."""
    hazel = make_hazel(db_url, doc_workflow(), flaky_workflow())
    app = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])
    with LiveServer(app) as server:
        yield hazel, Api(server.url)
    hazel.close()


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] and error["message"]
    return error


# -- auth -----------------------------------------------------------------------------------------------------

def test_without_tokens_the_api_is_off(db_url: str) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    app = create_app(hazel, routers=http_routers(hazel, Settings(HAZEL_DATABASE_URL=db_url)))
    with LiveServer(app) as server:
        api = Api(server.url)
        for token in (None, "anything"):
            error = error_of(api.call("GET", "/api/runs", token=token), 503)
            assert error["type"] == "ApiDisabledError" and "HAZEL_API_TOKEN" in error["message"]
        error_of(api.call("POST", "/api/runs", token="x", json={"workflow": "doc", "input": {"topic": "abc"}}), 503)
    assert hazel.runs() == []
    hazel.close()


def test_missing_or_unknown_token_is_refused(served) -> None:  # noqa: ANN001
    hazel, api = served
    for token in (None, "tok-alice-012345678", ALICE + "x", f"{ALICE},{BOB}"):
        response = api.call("POST", "/api/runs", token=token, json={"workflow": "doc", "input": {"topic": "abc"}})
        assert error_of(response, 401)["type"] == "AuthenticationError"
        assert response.headers["WWW-Authenticate"] == "Bearer"
    assert api.call("GET", "/api/runs", headers={"Authorization": f"Basic {ALICE}"}, token=None).status_code == 401
    assert hazel.runs() == []


def test_each_token_acts_as_its_identity(served) -> None:  # noqa: ANN001
    hazel, api = served
    for token, who in ((ALICE, "alice"), (BOB, "bob"), (API, "api")):
        run = api.start(token=token)
        assert (run["started_by"], run["started_via"]) == (who, "api")
    run_id = api.wait_status(run["id"], "waiting")["id"]
    assert api.decide(run_id, {"action": "approve"}, token=API).status_code == 201
    [decision] = hazel.decisions(run_id=run_id)
    assert (decision.actor_id, decision.channel) == ("api", "api")


def test_a_name_with_two_tokens_is_one_caller_while_its_token_is_rotated(db_url: str) -> None:
    """s24 F1: ``alice=old,alice=new`` was refused ("each name and each token must appear once"): a token could
    not be rotated without a moment where one side was refused. Both act as alice; an Idempotency-Key sent with
    the old token and again with the new one is the same caller's, one run."""
    new = "tok-alice-new-000000000"
    hazel = make_hazel(db_url, doc_workflow())
    app = create_app(hazel, routers=[api_router(hazel, Settings(HAZEL_API_TOKENS=f"alice={ALICE},alice={new}"))])
    with LiveServer(app) as server:
        api = Api(server.url)
        body = {"workflow": "doc", "input": {"topic": "rotation"}}
        first = api.call("POST", "/api/runs", token=ALICE, json=body, headers={"Idempotency-Key": "k-1"})
        again = api.call("POST", "/api/runs", token=new, json=body, headers={"Idempotency-Key": "k-1"})
        assert first.status_code == 201 and again.status_code in (200, 201), again.text
        assert again.json()["id"] == first.json()["id"] and first.json()["started_by"] == "alice"
    assert len(hazel.runs()) == 1
    hazel.close()


def test_malformed_tokens_setting_is_refused_without_showing_tokens() -> None:
    with pytest.raises(ValidationError, match="entry 2 is not name=token") as err:
        Settings(HAZEL_API_TOKENS="alice=secret-one-0123456789,secret-two-0123456789")
    assert "secret" not in str(err.value)
    with pytest.raises(ValidationError, match="must appear once") as err:
        Settings(HAZEL_API_TOKENS="a=same-token-0123456789,b=same-token-0123456789")
    assert "same-token" not in str(err.value)
    unchecked = Settings.model_construct(api_token=None, api_tokens=SecretStr("alice=secret-one-0123456789,secret-two-0123456789"))
    with pytest.raises(ConfigurationError, match="HAZEL_API_TOKENS: entry 2 is not name=token") as err:
        api_router(None, unchecked)  # type: ignore[arg-type]
    assert "secret" not in str(err.value)


# -- runs ------------------------------------------------------------------------------------------------------

def test_start_read_and_approve_to_completion(served) -> None:  # noqa: ANN001
    hazel, api = served
    started = api.start(input={"topic": "backups"})
    assert started["status"] == "ready" and started["workflow"] == "doc" and started["workflow_version"] == 1
    # the person too, as the CLI's --json gives it (s26 F5: a Slack-started run showed only its Slack user id)
    assert (started["started_by"], started["started_via"], started["started_by_person"]) == ("alice", "api", "alice")
    run = api.wait_status(started["id"], "waiting")
    assert run["started_by_person"] == "alice"
    request = run["pending_request"]
    assert request["point"] == "review" and request["status"] == "pending" and request["title"] == "Review the plan"

    listing = api.call("GET", "/api/runs/" + run["id"] + "/checkpoints").json()
    assert listing["head_seq"] == 1
    assert [(c["seq"], c["step"], c["next_step"]) for c in listing["checkpoints"]] == [
        (0, "__start__", "draft"), (1, "draft", "review")]
    state = api.call("GET", f"/api/runs/{run['id']}/checkpoints/1/state").json()
    assert state == {"run_id": run["id"], "seq": 1, "state": hazel.state_tree_at(run_id=run["id"], seq=1)}
    assert state["state"]["plan"] == {"steps": ["write backups"], "minutes": 30}
    assert api.call("GET", f"/api/runs/{run['id']}/checkpoints/0/state").json()["state"]["plan"] is None

    response = api.decide(run["id"], {"action": "approve"})
    assert response.status_code == 201, response.text
    outcome = response.json()
    assert outcome["settled"] and outcome["run_status"] == "ready" and outcome["next_node"] == "publish"
    assert outcome["decision"]["actor_id"] == "alice" and outcome["decision"]["channel"] == "api"
    assert outcome["duplicate"] is False and outcome["request"]["status"] == "decided"

    done = api.wait_status(run["id"], "completed")  # resumed in the background: the answer did not wait
    assert done["pending_request"] is None and hazel.state_at(run_id=run["id"]).published is True


def test_list_filters_and_pages(served) -> None:  # noqa: ANN001
    hazel, api = served
    ids = [api.start()["id"] for _ in range(3)]
    flaky = api.start("flaky")["id"]
    for run_id in ids:
        api.wait_status(run_id, "waiting")
    api.wait_status(flaky, "failed")

    def listed(**params: Any) -> list[str]:
        response = api.call("GET", "/api/runs", params=params)
        assert response.status_code == 200, response.text
        return [r["id"] for r in response.json()["runs"]]

    assert set(listed(status="waiting")) == set(ids)
    assert listed(status="failed") == [flaky]
    assert set(listed(status=["failed", "waiting"])) == {*ids, flaky}
    assert set(listed(workflow="doc")) == set(ids) and listed(workflow="nope") == []
    page1 = api.call("GET", "/api/runs", params={"limit": 2}).json()
    page2 = api.call("GET", "/api/runs", params={"limit": 2, "offset": page1["next_offset"]}).json()
    # the last page says so when it is exactly full too (s26 F2: it gave a next_offset to an empty page)
    assert page1["next_offset"] == 2 and page2["next_offset"] is None, (page1, page2)
    assert {r["id"] for r in page1["runs"] + page2["runs"]} == {*ids, flaky}
    assert api.call("GET", "/api/runs", params={"limit": 3}).json()["next_offset"] == 3
    assert api.call("GET", "/api/runs", params={"limit": 4}).json()["next_offset"] is None
    assert error_of(api.call("GET", "/api/runs", params={"status": "sleeping"}), 422)["type"] == \
        "InvalidRequestError"
    assert error_of(api.call("GET", "/api/runs", params={"limit": 0}), 422)["message"].startswith("query.limit")


# -- decisions --------------------------------------------------------------------------------------------------

def test_feedback_edit_and_rewind_take_the_same_payloads(served) -> None:  # noqa: ANN001
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]

    outcome = api.decide(run_id, {"action": "feedback", "payload": {"text": "add a restore drill"}}, token=BOB)
    assert outcome.status_code == 201 and outcome.json()["next_node"] == "draft"  # feedback: anyone may
    run = wait_for(lambda: (r := api.run(run_id))["status"] == "waiting" and r["head_seq"] == 3 and r)
    assert api.call("GET", f"/api/runs/{run_id}/checkpoints/3/state").json()["state"]["plan"]["steps"] == [
        "write backups", "add a restore drill"]

    edited = {"steps": ["restore first", "then back up"], "minutes": 45}
    response = api.decide(run_id, {"action": "edit", "payload": {"value": edited}})
    assert response.status_code == 201, response.text
    api.wait_status(run_id, "completed")
    assert hazel.state_at(run_id=run_id).plan == Plan(**edited)

    response = api.decide(run_id, {"action": "rewind", "payload": {"to": "review", "feedback": None}})
    assert response.status_code == 201, response.text
    assert response.json()["request"] is None  # the run waited on nothing: it had completed
    run = api.wait_status(run_id, "waiting")
    assert run["branch"] == 1 and run["pending_request"]["point"] == "review"
    checkpoints = api.call("GET", f"/api/runs/{run_id}/checkpoints").json()["checkpoints"]
    assert any(c["step"] == "__rewind__" and c["parent_seq"] == 3 for c in checkpoints)

    response = api.decide(run_id, {"action": "reject", "payload": {"reason": "not needed after all"}})
    assert response.status_code == 201 and response.json()["run_status"] == "rejected"
    assert api.run(run_id)["status"] == "rejected"


def test_refusals_map_to_http_errors_and_leave_the_run_intact(served) -> None:  # noqa: ANN001
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]

    def snapshot() -> tuple:
        run, request = hazel.get(run_id=run_id), hazel.pending_request(run_id=run_id)
        return ((run.status, run.head_seq, run.last_seq, run.updated_at), hazel.checkpoints(run_id=run_id),
                (request.id, request.status, request.approvals), hazel.decisions(run_id=run_id))

    before = snapshot()

    error = error_of(api.decide(run_id, {"action": "approve"}, token=BOB), 403)
    assert error["type"] == "NotAllowedError" and "only alice, api may" in error["message"]
    refused = [e for e in hazel.audit(run_id=run_id) if e.action == "decision.refused"]
    assert refused and refused[-1].actor_id == "bob" and refused[-1].channel == "api"

    bad_edit = {"action": "edit", "payload": {"value": {"steps": ["x"], "minutes": 0}}}
    error = error_of(api.decide(run_id, bad_edit), 422)
    assert error["type"] == "InvalidDecisionError" and "minutes" in error["message"]
    for body in ({"action": "approve", "payload": {"text": "x"}}, {"action": "maybe"},
                 {"action": "edit", "payload": {"value": 1, "text": "1"}},
                 {"action": "edit", "payload": {"text": "", "allow_empty": "yes"}},
                 {"action": "rewind", "payload": {"to": 0, "allow_empty": 1}}):
        assert error_of(api.decide(run_id, body), 422)["type"] == "InvalidRequestError", body
    # what is left out or empty is refused by the engine, once it checked that the caller may: bob may not
    # reject or edit here (403, whatever the payload holds), and may give feedback (anyone may: 422)
    for body in ({"action": "reject"}, {"action": "reject", "payload": {"reason": ""}},
                 {"action": "feedback", "payload": {}}, {"action": "feedback"}, {"action": "edit"},
                 {"action": "edit", "payload": {}}, {"action": "rewind"}, {"action": "rewind", "payload": {}}):
        assert error_of(api.decide(run_id, body), 422)["type"] == "InvalidDecisionError", body
        anyone = body["action"] == "feedback"
        bobs = error_of(api.decide(run_id, body, token=BOB), 422 if anyone else 403)["type"]
        assert bobs == ("InvalidDecisionError" if anyone else "NotAllowedError"), body
    response = api.call("POST", f"/api/runs/{run_id}/decisions", content=b"{not json",
                        headers={"Content-Type": "application/json"})
    assert error_of(response, 422)["type"] == "InvalidRequestError"
    error = error_of(api.decide(run_id, {"action": "rewind", "payload": {"to": 42}}), 404)
    assert error["type"] == "CheckpointNotFoundError"
    assert snapshot() == before

    error = error_of(api.decide("0123456789ab", {"action": "approve"}), 404)
    assert error["type"] == "RunNotFoundError"
    assert error_of(api.call("GET", "/api/runs/0123456789ab"), 404)["type"] == "RunNotFoundError"
    assert error_of(api.call("GET", f"/api/runs/{run_id}/checkpoints/9/state"), 404)["type"] == \
        "CheckpointNotFoundError"
    assert error_of(api.call("POST", "/api/runs", json={"workflow": "nope"}), 422)["type"] == "UnknownWorkflowError"
    error = error_of(api.call("POST", "/api/runs", json={"workflow": "doc", "input": {"topic": "x"}}), 422)
    assert error["type"] == "InvalidInputError" and "topic" in error["message"]

    first = api.decide(run_id, {"action": "reject", "payload": {"reason": "wrong scope"}})
    assert first.status_code == 201
    error = error_of(api.decide(run_id, {"action": "approve", "request_id": before[2][0]}, token=API), 409)
    assert error["type"] == "AlreadyDecidedError" and error["decided_by"] == "alice"
    assert error["action"] == "reject" and error["channel"] == "api" and error["decided_at"]
    error = error_of(api.decide(run_id, {"action": "approve"}), 409)  # naming no request: as naming it
    assert error["type"] == "AlreadyDecidedError" and error["decided_by"] == "alice" and error["action"] == "reject"
    assert hazel.get(run_id=run_id).status is RunStatus.REJECTED and len(hazel.decisions(run_id=run_id)) == 1


def test_a_request_of_another_run_is_not_found(served) -> None:  # noqa: ANN001
    """A decision naming a ``request_id`` that is not one of the run's answered 409 ``NoPendingRequestError``
    (and a rewind naming another run's pending request, or one no run has, rewound the run anyway; naming
    another run's settled request, it said who settled it): every action answers 404 ``RequestNotFoundError``
    "run A has no steering request N", and no run changes."""
    hazel, api = served
    run_a, run_b, run_c = (api.wait_status(api.start()["id"], "waiting")["id"] for _ in range(3))
    rejected = {"action": "reject", "payload": {"reason": "not this one"}}
    assert api.decide(run_c, rejected).status_code == 201  # run C's request: settled

    def snapshot(run_id: str) -> tuple:
        run = hazel.get(run_id=run_id)
        return ((run.status, run.head_seq, run.last_seq, run.updated_at), hazel.checkpoints(run_id=run_id),
                [(r.id, r.status, r.approvals) for r in hazel.requests(run_id=run_id)],
                hazel.decisions(run_id=run_id))

    before = {run_id: snapshot(run_id) for run_id in (run_a, run_b, run_c)}
    others = [hazel.pending_request(run_id=run_b).id, hazel.requests(run_id=run_c)[-1].id, 999_999]
    for request_id in others:
        for body in ({"action": "approve"}, rejected, {"action": "feedback", "payload": {"text": "more"}},
                     {"action": "edit", "payload": {"text": "steps: [a]"}},
                     {"action": "rewind", "payload": {"to": 0}}):
            error = error_of(api.decide(run_a, {**body, "request_id": request_id}), 404)
            assert error["type"] == "RequestNotFoundError", (request_id, body, error)
            assert error["message"] == f"run {run_a} has no steering request {request_id}", error
            assert "decided_by" not in error  # nothing said of another run's request
    assert {run_id: snapshot(run_id) for run_id in before} == before


def test_concurrent_decisions_settle_once(served) -> None:  # noqa: ANN001
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    statuses: list[int] = []
    barrier = threading.Barrier(2)

    def approve(token: str) -> None:
        barrier.wait()
        statuses.append(api.decide(run_id, {"action": "approve"}, token=token).status_code)

    threads = [threading.Thread(target=approve, args=(t,)) for t in (ALICE, API)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201, 409]
    assert len(hazel.decisions(run_id=run_id)) == 1
    api.wait_status(run_id, "completed")


def test_idempotency_key_records_a_decision_once(served) -> None:  # noqa: ANN001
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    key = {"Idempotency-Key": "decide-7f3a"}
    first = api.decide(run_id, {"action": "reject", "payload": {"reason": "too risky"}}, headers=key)
    again = api.decide(run_id, {"action": "reject", "payload": {"reason": "too risky"}}, headers=key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["duplicate"] is True and again.json()["decision"] == first.json()["decision"]
    assert len(hazel.decisions(run_id=run_id)) == 1

    error = error_of(api.decide(run_id, {"action": "approve"}, headers=key), 422)
    assert error["type"] == "IdempotencyKeyReusedError"
    other = api.wait_status(api.start()["id"], "waiting")["id"]
    assert error_of(api.decide(other, {"action": "reject", "payload": {"reason": "x"}}, headers=key), 422)
    # Keys are per caller: the same key from another caller is a new decision.
    assert api.decide(other, {"action": "approve"}, headers=key, token=API).status_code == 201
    long_key = {"Idempotency-Key": "k" * 151}
    assert error_of(api.decide(other, {"action": "approve"}, headers=long_key), 422)["type"] == \
        "InvalidRequestError"
    third = api.wait_status(api.start()["id"], "waiting")["id"]
    for odd in ("ключ".encode(), b"a\tb", b""):  # (the bytes sent; the server reads header values as
        # Latin-1; an empty key, a shell's unset variable, would make the retry it was meant for a second vote)
        error = error_of(api.decide(third, {"action": "approve"}, headers={"Idempotency-Key": odd}), 422)
        assert error["type"] == "InvalidRequestError" and "printable ASCII" in error["message"], error
    assert hazel.decisions(run_id=third) == []


XY, X = "tok-xy-0123456789", "tok-x-0123456789"
"""The tokens of ``overlapping_callers``: ``x:y`` and ``x``."""


@contextmanager
def overlapping_callers(db_url: str) -> Iterator[tuple[Any, Api]]:
    """The API (``doc`` workflow) served for two callers whose names overlap, ``x:y`` (token ``XY``) and ``x``
    (``X``): ``x`` with key ``y:k`` and ``x:y`` with key ``k`` are both ``x:y:k`` when joined naively."""
    hazel = make_hazel(db_url, doc_workflow())
    app = create_app(hazel, routers=[api_router(hazel, Settings(HAZEL_API_TOKENS=f"x:y={XY},x={X}"))])
    try:
        with LiveServer(app) as server:
            yield hazel, Api(server.url)
    finally:
        hazel.close()


def test_idempotency_keys_of_two_callers_never_meet_whatever_their_names(db_url: str) -> None:
    """A fresh-user finding: the key was stored as ``caller:key``, so caller ``x`` with key ``y:k`` and caller
    ``x:y`` with key ``k`` shared one: the second was told the first's decision (its actor, its reason) was its
    own duplicate, nothing of its own recorded."""
    with overlapping_callers(db_url) as (hazel, api):
        run_id = api.start(token=X)["id"]
        waiting = lambda: hazel.get(run_id=run_id).status is RunStatus.WAITING  # noqa: E731
        wait_for(waiting, "the run to wait")
        first = api.decide(run_id, {"action": "feedback", "payload": {"text": "by x"}}, token=X,
                           headers={"Idempotency-Key": "y:k"})
        assert first.status_code == 201, first.text
        wait_for(waiting, "the run to wait again")
        second = api.decide(run_id, {"action": "feedback", "payload": {"text": "by x:y"}}, token=XY,
                            headers={"Idempotency-Key": "k"})
        assert second.status_code == 201 and second.json()["duplicate"] is False, second.text
        assert second.json()["decision"]["actor_id"] == "x:y"
        assert [(d.actor_id, d.payload["text"]) for d in hazel.decisions(run_id=run_id)] == [
            ("x", "by x"), ("x:y", "by x:y")]


# -- retry and cancel --------------------------------------------------------------------------------------------

def test_retry_a_failed_run_and_cancel_a_waiting_one(served) -> None:  # noqa: ANN001
    hazel, api = served
    run_id = api.start("flaky")["id"]
    failed = api.wait_status(run_id, "failed")
    assert "first attempt fails" in failed["error"]
    assert error_of(api.call("POST", f"/api/runs/{run_id}/retry", token=BOB), 403)["type"] == "NotAllowedError"
    response = api.call("POST", f"/api/runs/{run_id}/retry")
    assert response.status_code == 200 and response.json()["status"] == "ready"
    assert response.json()["error"] is None  # the failure stays in the audit log, not on the queued run
    assert any(e.action == "step.failed" for e in hazel.audit(run_id=run_id))
    api.wait_status(run_id, "completed")
    assert error_of(api.call("POST", f"/api/runs/{run_id}/retry"), 409)["type"] == "RunStateError"

    waiting = api.wait_status(api.start(token=BOB)["id"], "waiting")["id"]
    response = api.call("POST", f"/api/runs/{waiting}/cancel", token=BOB, json={"reason": "duplicate ticket"})
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert hazel.requests(run_id=waiting)[-1].status.value == "cancelled"
    assert error_of(api.call("POST", f"/api/runs/{waiting}/cancel"), 409)["type"] == "RunStateError"
    assert error_of(api.decide(waiting, {"action": "approve"}), 409)["type"] == "AlreadyDecidedError"  # cancelled


def test_decisions_wake_the_worker_pool_when_one_runs(db_url: str) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    pool = WorkerPool(hazel, threads=2, sweep_sec=30)  # a long sweep: only the wake-up can be this quick
    pool.start()
    app = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])
    try:
        with LiveServer(app) as server:
            api = Api(server.url)
            run_id = api.wait_status(api.start()["id"], "waiting", )["id"]
            assert api.decide(run_id, {"action": "approve"}).status_code == 201
            api.wait_status(run_id, "completed")
            assert not [t for t in threading.enumerate() if t.name.startswith("hazel-api-run-")]
    finally:
        pool.stop()
        hazel.close()


# -- the OpenAPI document ---------------------------------------------------------------------------------------

def test_openapi_document_and_docs_are_served(served) -> None:  # noqa: ANN001
    _hazel, api = served
    doc = api.call("GET", "/openapi.json", token=None).json()
    paths = doc["paths"]
    assert {"/api/runs", "/api/runs/{run_id}", "/api/runs/{run_id}/checkpoints",
            "/api/runs/{run_id}/checkpoints/{seq}/state", "/api/runs/{run_id}/decisions",
            "/api/runs/{run_id}/retry", "/api/runs/{run_id}/cancel", "/api/workflows"} <= set(paths)
    decide = paths["/api/runs/{run_id}/decisions"]["post"]
    assert decide["security"] == [{"HTTPBearer": []}]
    assert decide["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/DecisionOut")
    assert decide["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    body = decide["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["discriminator"]["mapping"]) == {"approve", "edit", "reject", "feedback", "rewind"}
    schemas = doc["components"]["schemas"]
    assert {"RunOut", "RunDetail", "SteeringRequest", "CheckpointInfo", "DecisionOut", "ErrorBody"} <= set(schemas)
    assert api.call("GET", "/docs", token=None).status_code == 200
    workflows = api.call("GET", "/api/workflows").json()["workflows"]
    doc_wf = next(w for w in workflows if w["name"] == "doc")
    assert doc_wf["input_schema"]["properties"]["topic"]["minLength"] == 3


def test_malformed_bodies_and_unknown_paths_get_the_error_body(served) -> None:  # noqa: ANN001
    _, api = served
    bad_json = api.call("POST", "/api/runs", content=b'{"workflow": "doc",', headers={"Content-Type": "application/json"})
    assert error_of(bad_json, 422)["message"].startswith("the body is not valid JSON")
    no_type = api.call("POST", "/api/runs", content=b'{"workflow": "doc", "input": {"topic": "x"}}')
    assert "send a JSON object with Content-Type: application/json" in error_of(no_type, 422)["message"]
    missing = api.call("GET", "/api/nothing/here")
    assert error_of(missing, 404)["message"] == "no such endpoint: /api/nothing/here (see /openapi.json)"


def test_a_decisions_log_line_names_its_request(served, caplog) -> None:  # noqa: ANN001
    """README: ``request_id`` is attached to what is logged while a decision is recorded (a fresh-user finding:
    ``api: alice decided approve on run R`` carried only ``run_id`` when the body named no request)."""
    from bot.ops.logs import ContextFilter

    hazel, api = served
    caplog.handler.addFilter(ContextFilter())  # as a served process's handlers have it
    caplog.set_level("INFO", logger="hazel")
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    request_id = hazel.requests(run_id=run_id)[-1].id
    assert api.decide(run_id, {"action": "approve"}).status_code == 201
    [line] = [r for r in caplog.records if r.getMessage().startswith("api: ") and " decided " in r.getMessage()]
    assert (getattr(line, "run_id", None), getattr(line, "request_id", None)) == (run_id, request_id)
