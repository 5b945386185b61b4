"""Size limits and the one error shape, over real HTTP on SQLite and PostgreSQL: request bodies over
``HAZEL_MAX_BODY_BYTES`` (with a Content-Length and chunked) answer 413 and write nothing; states over
``HAZEL_MAX_STATE_BYTES`` are refused by the engine on the REST API and on Jira; every error of the REST API,
the framework's own included, is ``{"error": {"type", "message"}}``; a run id prefix works as on the CLI; no
message names a console command."""

from __future__ import annotations

import json
from typing import Any, Iterator

import httpx
import pytest
from pydantic import BaseModel

import bot.engine.hazel as engine_hazel
from bot.engine import RunStateError
from bot.inbound.api import api_router
from bot.inbound.api_errors import hazel_error_response
from bot.server.http import create_app
from bot.server.wiring import http_routers
from bot.settings import Settings
from hazel import Approvers, StepContext, Workflow
from store.models import RequestStatus, RunStatus
from tests.bot.test_api import ALICE, TOKENS, Api
from tests.support.engine import make_hazel
from tests.support.jira_env import jira_env
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow

BODY_LIMIT, STATE_LIMIT = 16 * 1024, 4 * 1024


class Loose(BaseModel):
    data: Any = None


def loose_workflow() -> Workflow:
    """One steering point showing a field of any JSON shape (deep nesting reaches the engine)."""
    wf = Workflow("loose", version=1, state=Loose)

    @wf.step
    def first(state: Loose, ctx: StepContext) -> Loose:
        return state

    wf.steer("look", show="data", approvers=Approvers(users=["alice"]))
    return wf


@pytest.fixture
def served(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Api]]:
    """The doc and loose workflows behind the API, both limits from the environment."""
    monkeypatch.setenv("HAZEL_MAX_STATE_BYTES", str(STATE_LIMIT))
    monkeypatch.setenv("HAZEL_MAX_BODY_BYTES", str(BODY_LIMIT))
    hazel = make_hazel(db_url, doc_workflow(), loose_workflow())
    app = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])
    with LiveServer(app) as server:
        yield hazel, Api(server.url)
    hazel.close()


def error_of(response: httpx.Response, status: int, type_: str) -> str:
    """The message of an error answer, after checking its status and that its body is exactly the shape."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and {"type", "message"} <= set(body["error"]), body
    assert body["error"]["type"] == type_, body
    message = body["error"]["message"]
    assert message and "\n" not in message and len(message) < 400, message
    return message


def snapshot(hazel: Any, run_id: str) -> tuple:
    run, request = hazel.get(run_id=run_id), hazel.pending_request(run_id=run_id)
    return ((run.status, run.head_seq, run.last_seq, run.updated_at), len(hazel.checkpoints(run_id=run_id)),
            (request.id, request.status), len(hazel.decisions(run_id=run_id)))


# -- request bodies ---------------------------------------------------------------------------------------------

def test_a_body_over_the_limit_with_content_length_is_413_and_starts_nothing(served) -> None:  # noqa: ANN001
    hazel, api = served
    big = {"workflow": "doc", "input": {"topic": "x" * (BODY_LIMIT * 3)}}
    response = api.call("POST", "/api/runs", json=big)
    message = error_of(response, 413, "PayloadTooLargeError")
    assert f"{BODY_LIMIT:,}" in message and "HAZEL_MAX_BODY_BYTES" in message and "xxxx" not in message
    assert response.headers["connection"] == "close"
    assert response.content.startswith(b'{"error":{"type":"PayloadTooLargeError","message":')  # compact, as all
    assert hazel.runs() == []
    # the same limit for every endpoint: a hostile POST anywhere is refused before routing or auth
    for path in ("/api/runs/0123456789ab/decisions", "/healthz", "/nowhere"):
        error_of(api.call("POST", path, token=None, content=b"{" * (BODY_LIMIT + 1)), 413, "PayloadTooLargeError")
    assert hazel.runs() == []


def test_a_chunked_body_is_counted_as_it_arrives(served) -> None:  # noqa: ANN001
    hazel, api = served

    def chunks(body: bytes, size: int = 1000) -> Iterator[bytes]:
        for i in range(0, len(body), size):
            yield body[i:i + size]

    big = json.dumps({"workflow": "doc", "input": {"topic": "y" * (BODY_LIMIT * 2)}}).encode()
    request = api.http.build_request("POST", "/api/runs", content=chunks(big),
                                     headers={"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"})
    assert "content-length" not in request.headers and request.headers["transfer-encoding"] == "chunked"
    message = error_of(api.http.send(request), 413, "PayloadTooLargeError")
    assert f"over the limit of {BODY_LIMIT:,} bytes" in message
    assert hazel.runs() == []
    # within the limit, a chunked body reaches the route whole
    small = json.dumps({"workflow": "doc", "input": {"topic": "backups"}}).encode()
    response = api.http.post("/api/runs", content=chunks(small, 7), headers={
        "Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"})
    assert response.status_code == 201, response.text
    assert [r.id for r in hazel.runs()] == [response.json()["id"]]


# -- states -----------------------------------------------------------------------------------------------------

def test_states_over_the_limit_are_refused_and_nothing_is_written(served) -> None:  # noqa: ANN001
    hazel, api = served
    big_topic = "z" * (STATE_LIMIT + 100)  # under the body limit, over the state limit
    message = error_of(api.call("POST", "/api/runs", json={"workflow": "doc", "input": {"topic": big_topic}}),
                       422, "InvalidInputError")
    assert f"the limit is {STATE_LIMIT:,} (HAZEL_MAX_STATE_BYTES)" in message and "zzzz" not in message
    assert hazel.runs() == []

    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    before = snapshot(hazel, run_id)
    edit = {"action": "edit", "payload": {"value": {"steps": ["w" * (STATE_LIMIT + 100)], "minutes": 5}}}
    message = error_of(api.decide(run_id, edit), 422, "InvalidDecisionError")
    assert message.startswith("the edited state is ") and "HAZEL_MAX_STATE_BYTES" in message and "www" not in message
    feedback = {"action": "feedback", "payload": {"text": "f" * (STATE_LIMIT + 1)}}
    assert "HAZEL_MAX_STATE_BYTES" in error_of(api.decide(run_id, feedback), 422, "InvalidDecisionError")
    rewind = {"action": "rewind", "payload": {"to": 1, "edits": {"topic": "e" * (STATE_LIMIT + 1)}}}
    assert "HAZEL_MAX_STATE_BYTES" in error_of(api.decide(run_id, rewind), 422, "InvalidDecisionError")
    assert snapshot(hazel, run_id) == before

    # just under the limit is fine
    response = api.decide(run_id, {"action": "edit", "payload": {"value": {"steps": ["w" * 3000], "minutes": 5}}})
    assert response.status_code == 201, response.text


def test_states_nested_deeper_than_json_can_be_stored_are_refused(served) -> None:  # noqa: ANN001
    hazel, api = served
    deep: Any = "leaf"
    for _ in range(400):
        deep = [deep]
    message = error_of(api.call("POST", "/api/runs", json={"workflow": "loose", "input": {"data": deep}}), 422,
                       "InvalidInputError")
    assert "nested too deeply" in message
    assert hazel.runs() == []
    run_id = api.wait_status(api.start("loose", {"data": {"a": 1}})["id"], "waiting")["id"]
    before = snapshot(hazel, run_id)
    message = error_of(api.decide(run_id, {"action": "edit", "payload": {"value": deep}}), 422,
                       "InvalidDecisionError")
    assert "nested too deeply" in message
    assert snapshot(hazel, run_id) == before


# -- the error shape --------------------------------------------------------------------------------------------

def test_the_frameworks_own_errors_have_the_error_shape(served) -> None:  # noqa: ANN001
    hazel, api = served
    json_type = {"Content-Type": "application/json"}
    assert error_of(api.call("GET", "/nothing/here"), 404, "NotFound") == \
        "no such endpoint: /nothing/here (see /openapi.json)"
    error_of(api.call("GET", "/api/nothing"), 404, "NotFound")
    response = api.call("DELETE", "/api/runs")
    assert "DELETE is not allowed on /api/runs (allowed: GET, POST)" == error_of(response, 405, "MethodNotAllowed")
    assert response.headers["allow"] == "GET, POST"
    error_of(api.call("GET", "/api/runs/0123456789ab/decisions"), 405, "MethodNotAllowed")
    message = error_of(api.call("POST", "/api/runs", content=b'{"workflow": ', headers=json_type), 422,
                       "InvalidRequestError")
    assert message.startswith("the body is not valid JSON")
    message = error_of(api.call("POST", "/api/runs", content='{"workflow": "dé"}'.encode("latin-1"),
                                headers=json_type), 422, "InvalidRequestError")
    assert "not valid UTF-8" in message
    nested = b'{"workflow": "doc", "input": {"data": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}"
    assert len(nested) < BODY_LIMIT * 30
    served_limit = create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))], max_body_bytes=len(nested))
    with LiveServer(served_limit) as server:
        message = error_of(Api(server.url).call("POST", "/api/runs", content=nested, headers=json_type), 422,
                           "InvalidRequestError")
    assert message == "the body is nested too deeply to be read as JSON"
    message = error_of(api.call("POST", "/api/runs", json={"workflow": "doc", "extra" + "k" * 500: 1}), 422,
                       "InvalidRequestError")
    assert "Extra inputs are not permitted" in message and "k" * 100 not in message
    error_of(api.call("GET", "/api/runs", params={"limit": "many"}), 422, "InvalidRequestError")
    assert hazel.runs() == []


def test_a_body_that_is_not_utf8_is_answered_so_not_as_not_json(served) -> None:  # noqa: ANN001
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    json_type = {"Content-Type": "application/json"}
    for path in ("/api/runs", f"/api/runs/{run_id}/decisions"):
        message = error_of(api.call("POST", path, content=b"\xff\xfe", headers=json_type), 422,
                           "InvalidRequestError")
        assert message == "the body is not valid UTF-8 (byte 0): send JSON in UTF-8", path
    # JSON in UTF-16 or UTF-32 (which json.loads of bytes would read): refused too, and starts nothing
    start = json.dumps({"workflow": "doc", "input": {"topic": "backups"}})
    for encoding in ("utf-16", "utf-16-be", "utf-32", "utf-32-le"):
        message = error_of(api.call("POST", "/api/runs", content=start.encode(encoding), headers=json_type), 422,
                           "InvalidRequestError")
        assert message.startswith(("the body is not valid UTF-8 (byte ", "the body is not JSON in UTF-8 (byte ")), \
            (encoding, message)
        assert message.endswith("send JSON in UTF-8"), message
    message = error_of(api.call("POST", "/api/runs", content=b'\xff\xfe{"workflow":"slow"}', headers=json_type),
                       422, "InvalidRequestError")
    assert message == "the body is not valid UTF-8 (byte 0): send JSON in UTF-8"
    assert [r.id for r in hazel.runs()] == [run_id]


def test_the_api_answers_its_own_unknown_paths_whatever_else_is_mounted(db_url: str) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    app = create_app(hazel, routers=http_routers(hazel, Settings(HAZEL_DATABASE_URL=db_url, **TOKENS)))
    with LiveServer(app) as server:
        api = Api(server.url)
        for method in ("GET", "POST"):
            error_of(api.call(method, "/api/nothing/here"), 404, "NotFound")
        error_of(api.call("DELETE", "/api/runs"), 405, "MethodNotAllowed")
        error_of(api.call("PUT", "/api/runs/0123456789ab/decisions"), 405, "MethodNotAllowed")


# -- run id prefixes --------------------------------------------------------------------------------------------

def test_a_run_id_prefix_works_as_on_the_cli(served, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    hazel, api = served
    ids = iter(["abcd12340001", "abcd56780002"])
    monkeypatch.setattr(engine_hazel, "new_run_id", lambda: next(ids))
    first = api.wait_status(api.start()["id"], "waiting")["id"]
    assert first == "abcd12340001"
    run = api.run("abcd1234")
    assert run["id"] == first and run["pending_request"]["point"] == "review"
    assert api.call("GET", "/api/runs/abcd12/checkpoints").json()["run_id"] == first
    assert api.call("GET", "/api/runs/abcd1/checkpoints/1/state").json()["run_id"] == first

    second = api.wait_status(api.start()["id"], "waiting")["id"]
    message = error_of(api.call("GET", "/api/runs/abcd"), 409, "AmbiguousRunIdError")
    assert "ambiguous" in message and first in message and second in message
    error_of(api.decide("abcd", {"action": "approve"}), 409, "AmbiguousRunIdError")
    assert "at least 4 characters" in error_of(api.call("GET", "/api/runs/abc"), 404, "RunNotFoundError")
    error_of(api.call("GET", "/api/runs/ffff"), 404, "RunNotFoundError")
    for odd in ("abcd%00", "abcd1234%00", "abcd12340001%00", "%00%00%00%00"):  # NUL: no run, not a 500
        error_of(api.call("GET", f"/api/runs/{odd}"), 404, "RunNotFoundError")
        error_of(api.decide(odd, {"action": "approve"}), 404, "RunNotFoundError")
    for odd in ("%00", "a%00b", "%ED%A0%80"):  # no workflow has such a name (PostgreSQL refused NUL: a 500)
        listed = api.call("GET", f"/api/runs?workflow={odd}")
        assert listed.status_code == 200 and listed.json()["runs"] == [], listed.text
    # an empty name is refused as an empty status is (it listed every run); a repeat is refused (the last one won)
    assert "empty" in error_of(api.call("GET", "/api/runs?workflow="), 422, "InvalidRequestError")
    assert "once" in error_of(api.call("GET", "/api/runs?workflow=x&workflow=doc"), 422, "InvalidRequestError")
    assert "once" in error_of(api.call("GET", "/api/runs?workflow=doc&workflow="), 422, "InvalidRequestError")
    assert [r["id"] for r in api.call("GET", "/api/runs?workflow=" + hazel.get(run_id=first).workflow)
            .json()["runs"]] == [second, first]

    response = api.decide("abcd5678", {"action": "approve"})
    assert response.status_code == 201, response.text
    assert response.json()["decision"]["run_id"] == second
    api.wait_status(second, "completed")
    assert hazel.get(run_id=first).status is RunStatus.WAITING
    assert api.call("POST", "/api/runs/abcd1234/cancel").json()["id"] == first


def test_no_api_message_names_a_console_command(served) -> None:  # noqa: ANN001
    hazel, api = served
    run_id = api.wait_status(api.start()["id"], "waiting")["id"]
    unknown = "0123456789ab"
    answers = [
        api.call("GET", f"/api/runs/{unknown}"), api.call("GET", f"/api/runs/{unknown}/checkpoints"),
        api.call("GET", f"/api/runs/{unknown}/checkpoints/0/state"), api.decide(unknown, {"action": "approve"}),
        api.decide(unknown, {"action": "rewind", "payload": {"to": 0}}),
        api.call("POST", f"/api/runs/{unknown}/retry"), api.call("POST", f"/api/runs/{unknown}/cancel"),
        api.call("GET", "/api/runs/0000"), api.call("POST", f"/api/runs/{run_id}/retry"),
        api.call("POST", "/api/runs", json={"workflow": "nope"}),
    ]
    messages = [a.json()["error"]["message"] for a in answers]
    assert [a.status_code for a in answers] == [404] * 8 + [409, 422], messages
    for message in messages:
        assert "hazel " not in message.lower() and "`" not in message, message
    # the console keeps its hint; the API's rendering of the same error leaves it out
    exc = RunStateError("run r changed meanwhile; look at it again", hint="hazel show r")
    assert str(exc).endswith("(see `hazel show r`)")
    assert json.loads(hazel_error_response(exc).body)["error"]["message"] == "run r changed meanwhile; look at it again"


# -- Jira: the same limits ---------------------------------------------------------------------------------------

@pytest.fixture
def offline_example(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    for name in ("HAZEL_LLM_BASE_URL", "HAZEL_LLM_API_KEY", "HAZEL_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HAZEL_OUTPUT_DIR", str(tmp_path / "out"))


def test_jira_webhooks_over_the_limits_change_nothing(db_url: str, offline_example: None) -> None:
    with jira_env(db_url, HAZEL_MAX_BODY_BYTES=BODY_LIMIT, HAZEL_MAX_STATE_BYTES=STATE_LIMIT) as env:
        run_id = env.start()
        issue = env.issue(run_id)
        request = env.pending(run_id)
        comments = len(env.fake.bodies(issue["id"]))
        decisions = len(env.hazel.decisions(run_id=run_id))
        scripts = env.hazel.state_at(run_id=run_id).scripts

        big = env.comment(issue, "/edit " + json.dumps({"001.up.sql": "S" * BODY_LIMIT}))
        answer = env.send(big)
        assert error_of(answer, 413, "PayloadTooLargeError")
        assert len(env.fake.bodies(issue["id"])) == comments  # not even answered on the issue: never parsed

        over_state = env.comment(issue, "/edit " + json.dumps({"001.up.sql": "S" * STATE_LIMIT}))
        refused = env.send(over_state).json()["refused"]
        assert "HAZEL_MAX_STATE_BYTES" in refused and "SSSS" not in refused
        assert "SSSS" not in env.fake.bodies(issue["id"])[-1]

        after = env.pending(run_id)
        assert after is not None and after.id == request.id and after.status is RequestStatus.PENDING
        assert len(env.hazel.decisions(run_id=run_id)) == decisions
        assert env.hazel.state_at(run_id=run_id).scripts == scripts
