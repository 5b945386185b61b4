"""A decision that names no request (``hazel approve RUN`` without ``--at``, a REST decision without
``request_id``) on a run whose last request was already decided is refused as already decided, as the same
decision naming that request is: who decided it and how, ``AlreadyDecidedError`` (exit status 1, REST 409 with
``decided_by``), audited as ``decision.refused`` with the rule "already decided". It answered "not waiting on a
steering request" and audited nothing. A run that never asked anyone still answers "not waiting"."""

from __future__ import annotations

import json

import pytest

from bot.engine.errors import AlreadyDecidedError, NoPendingRequestError
from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from store.models import RunStatus
from tests.bot.test_api import ALICE, TOKENS, Api
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow
from tests.workflows.reviewed import reviewed


def _refused(events) -> list:  # noqa: ANN001
    return [e for e in events if e.action == "decision.refused"]


def test_the_engine_refuses_and_audits_a_decision_naming_no_request_on_a_decided_run(db_url: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    run = hazel.start(workflow="reviewed", input={}, actor=person("author"))
    hazel.drive(run_id=run.id)
    request_id = hazel.pending_request(run_id=run.id).id
    hazel.decide(run_id=run.id, action="approve", actor=person("ann"))
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    with pytest.raises(AlreadyDecidedError, match="^already approved by ann at ") as caught:
        hazel.decide(run_id=run.id, action="reject", actor=person("bob"), payload={"reason": "no"})
    assert (caught.value.decided_by, caught.value.action, caught.value.request_id) == ("ann", "approve", request_id)
    [event] = _refused(hazel.audit(run_id=run.id))
    assert (event.actor_id, event.request_id, event.detail["attempted"]) == ("bob", request_id, "reject")
    assert event.detail["rule"] == "already decided" and event.detail["decided_by"] == "ann"


def test_a_run_that_never_asked_anyone_is_still_not_waiting(db_url: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    run = hazel.start(workflow="reviewed", input={}, actor=person("author"))  # not driven: nothing asked yet
    with pytest.raises(NoPendingRequestError, match="not waiting on a steering request"):
        hazel.decide(run_id=run.id, action="approve", actor=person("bob"))
    assert _refused(hazel.audit(run_id=run.id)) == []


def test_the_cli_without_at_answers_as_with_at(cli) -> None:  # noqa: ANN001
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    cli("approve", run_id, "--at", "review")
    with_at = cli("approve", run_id, "--at", "review", code=1)
    without = cli("approve", run_id, code=1)  # (the same exit status)
    assert with_at.stderr.startswith("error: already approved by olga at ")
    assert without.stderr.startswith(with_at.stderr.strip()), (with_at.stderr, without.stderr)
    assert "'Review the draft'" in without.stderr  # the request it was, as none was named
    answer = json.loads(cli("reject", run_id, "--reason", "late", "--json", code=1).stdout)
    assert answer["error"]["type"] == "AlreadyDecidedError"
    refused = [e for e in cli.json("audit", run_id) if e["action"] == "decision.refused"]
    assert [(e["detail"]["attempted"], e["detail"]["rule"]) for e in refused] == \
        [("approve", "already decided")] * 2 + [("reject", "already decided")]


def test_rest_without_request_id_answers_as_with_it(db_url: str) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    with LiveServer(create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        run_id = api.wait_status(api.start()["id"], "waiting")["id"]
        request_id = hazel.pending_request(run_id=run_id).id
        assert api.decide(run_id, {"action": "approve"}, token=ALICE).status_code == 201
        named = api.decide(run_id, {"action": "approve", "request_id": request_id}, token=ALICE)
        unnamed = api.decide(run_id, {"action": "approve"}, token=ALICE)
    assert named.status_code == unnamed.status_code == 409, (named.text, unnamed.text)
    for answer in (named, unnamed):
        error = answer.json()["error"]
        assert (error["type"], error["decided_by"], error["action"]) == ("AlreadyDecidedError", "alice", "approve")
    refused = [e for e in hazel.audit(run_id=run_id) if e.action == "decision.refused"]
    assert [e.detail["rule"] for e in refused] == ["already decided"] * 2
