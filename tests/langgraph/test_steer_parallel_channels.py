"""A LangGraph run with parallel nodes on the channels, on SQLite and PostgreSQL: REST (``GET /api/runs/{id}``
lists every pending request; a refused rewind answers 422 in the API's error shape), the run page (one card per
pending request, each decided on its own) and the CLI (``hazel show``, ``hazel runs``, a refused rewind)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import pytest

from bot.inbound.api import api_router
from bot.inbound.web import Signer, web_router
from bot.server.http import create_app
from bot.settings import Settings
from store.models import RequestStatus, RunStatus
from tests.bot.test_api import ALICE, TOKENS, Api
from tests.bot.web.conftest import Browserless
from tests.bot.web.scenario import web_settings
from tests.langgraph.graphs import fan_graph, pair_graph, workflow
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow

REFUSED = "is at a graph checkpoint facts, notes wrote at once"


def _waiting_pair(hz):
    run = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    return run.id


def test_the_engine_offers_every_pending_request_and_a_native_run_has_one(db_url):
    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair"), doc_workflow())
    run_id = _waiting_pair(hz)
    both = hz.pending_requests_of(run_id=run_id)
    assert [r.point for r in both] == ["legal", "security"] and [r.id for r in both] == sorted(r.id for r in both)
    assert hz.pending_request(run_id=run_id).id == both[-1].id  # what a decision naming no request settles
    assert {k: [r.point for r in v] for k, v in hz.pending_requests_by_run(run_ids=[run_id, "nope"]).items()} \
        == {run_id: ["legal", "security"]}
    hz.decide(run_id=run_id, action="approve", actor=person("ana"), request_id=both[0].id)
    assert [r.point for r in hz.pending_requests_of(run_id=run_id)] == ["security"]

    native = hz.start(workflow="doc", input={"topic": "backups"}, actor=person("olga"))
    hz.drive(run_id=native.id)
    [one] = hz.pending_requests_of(run_id=native.id)
    assert one.id == hz.pending_request(run_id=native.id).id
    hz.decide(run_id=native.id, action="approve", actor=hz.identify(channel="api", id="alice", name="alice"))
    assert hz.pending_requests_of(run_id=native.id) == []


def test_rest_lists_every_pending_request_and_refuses_an_ambiguous_rewind_in_its_error_shape(db_url):
    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair"), workflow(fan_graph(), name="lg-fan"))
    pair = _waiting_pair(hz)
    fan = hz.start(workflow="lg-fan", input={"topic": "tides"}, actor=person("olga"))
    hz.drive(run_id=fan.id)
    with LiveServer(create_app(hz, routers=[api_router(hz, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        run = api.run(pair)
        assert [r["point"] for r in run["pending_requests"]] == ["legal", "security"]
        assert run["pending_request"] == run["pending_requests"][-1]
        legal, security = (r["id"] for r in run["pending_requests"])
        key = {"Idempotency-Key": "k1"}
        response = api.decide(pair, {"action": "approve", "request_id": legal}, token=ALICE, headers=key)
        assert response.status_code == 201, response.text
        run = api.run(pair)
        assert [r["point"] for r in run["pending_requests"]] == ["security"]
        assert run["pending_request"]["point"] == "security"
        # the same key for the other request is not a repeat of the first approval: refused, nothing done
        reused = api.decide(pair, {"action": "approve", "request_id": security}, token=ALICE, headers=key)
        assert reused.status_code == 422, reused.text
        assert reused.json()["error"]["type"] == "IdempotencyKeyReusedError"
        assert [r["point"] for r in api.run(pair)["pending_requests"]] == ["security"]
        again = api.decide(pair, {"action": "approve", "request_id": legal}, token=ALICE, headers=key)
        assert again.status_code == 200 and again.json()["duplicate"] is True  # a true repeat

        before = api.run(fan.id)
        response = api.decide(fan.id, {"action": "rewind", "payload": {"to": "join", "feedback": "more"}})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["type"] == "InvalidDecisionError" and REFUSED in error["message"]
        assert "\n" not in error["message"]
        assert api.run(fan.id) == before
        assert [r["point"] for r in before["pending_requests"]] == ["review"]


def test_the_run_page_shows_every_pending_request_each_with_its_own_forms(db_url):
    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair"))
    run_id = _waiting_pair(hz)
    legal, security = hz.requests(run_id=run_id)
    settings = web_settings()
    with LiveServer(create_app(hz, routers=[web_router(hz, settings)])) as server:
        client = Browserless(server.url)
        assert client.get(f"/runs/{run_id}?t={Signer(settings).token(run_id, 'alice', minted_by='olga')}").status_code in (200, 303)
        page = client.get(f"/runs/{run_id}").text
        assert page.count('class="card pending"') == 2
        assert "<code>legal</code>" in page and "<code>security</code>" in page
        for request in (legal, security):
            assert f'name="request_id" value="{request.id}"><input type="hidden" name="action" value="approve"' in page
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        nonce = re.search(r'name="nonce" value="([^"]+)"', page).group(1)  # one page, one nonce for its forms
        answer = client.post(f"/runs/{run_id}/decide", data={"action": "approve", "csrf": csrf,
                                                              "request_id": security.id, "nonce": nonce})
        assert answer.status_code == 303, answer.text
        assert hz.requests(run_id=run_id)[1].status is RequestStatus.DECIDED
        twice = client.post(f"/runs/{run_id}/decide", data={"action": "approve", "csrf": csrf,
                                                             "request_id": security.id, "nonce": nonce})
        assert twice.status_code == 303 and len(hz.decisions(run_id=run_id)) == 1  # the same form again
        page = client.get(f"/runs/{run_id}").text
        assert page.count('class="card pending"') == 1 and "<code>legal</code>" in page
        assert "<code>security</code>" not in page.split("Checkpoint tree")[0]
        assert hz.get(run_id=run_id).status is RunStatus.WAITING
        # the other card's form of the page loaded before (same nonce) is a decision of its own
        answer = client.post(f"/runs/{run_id}/decide", data={"action": "approve", "csrf": csrf,
                                                              "request_id": legal.id, "nonce": nonce})
        assert answer.status_code == 303, answer.text
        assert [r.status for r in hz.requests(run_id=run_id)[:2]] == [RequestStatus.DECIDED] * 2
        assert len(hz.decisions(run_id=run_id)) == 2


def _cli(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """``hazel ARGS`` in-process on ``db_url`` with the parallel graphs loaded; returns stdout and stderr."""
    invoke = in_process_cli(monkeypatch, tmp_path, db_url=db_url,
                            workflows="tests.langgraph.workflows.parallel_graphs")

    def hazel(*args: str, code: int = 0) -> str:
        result = invoke(*args, code=code)
        return result.stdout + result.stderr

    return hazel


def test_the_cli_shows_every_pending_request_and_refuses_an_ambiguous_rewind_in_one_line(db_url, tmp_path,
                                                                                           monkeypatch):
    _hazel = _cli(db_url, tmp_path, monkeypatch)
    started = json.loads(_hazel("run", "lg-pair", "--input", '{"topic": "launch"}', "--json"))
    pair = started["run"]["id"]
    shown = _hazel("show", pair)
    assert "waiting at 'legal'" in shown and "waiting at 'security'" in shown
    assert "╭─ legal " in shown and "╭─ security " in shown  # each request's shown value, in a panel
    data = json.loads(_hazel("show", pair, "--json"))
    assert [r["point"] for r in data["pending_requests"]] == ["legal", "security"]
    assert data["pending_request"]["point"] == "security"
    legal_raw, security_raw = (_hazel("show", pair, "--raw", "--at", p) for p in ("legal", "security"))
    assert json.loads(legal_raw) == {"ask": "legal", "topic": "launch"}  # each point's own value
    assert json.loads(security_raw) == {"ask": "security"}
    assert "is not waiting at 'nope' (it waits at 'legal', 'security')" in _hazel("show", pair, "--at", "nope",
                                                                                   code=1)
    listed = _hazel("runs")
    assert "legal (console), security (console)" in listed
    [row] = [r for r in json.loads(_hazel("runs", "--json")) if r["id"] == pair]
    assert [r["point"] for r in row["pending_requests"]] == ["legal", "security"]

    fan = json.loads(_hazel("run", "lg-fan", "--input", '{"topic": "tides"}', "--json"))["run"]["id"]
    before = json.loads(_hazel("show", fan, "--json"))
    out = _hazel("rewind", fan, "--to", "join", "--feedback", "more", code=1)
    [line] = [x for x in out.splitlines() if x.strip()]  # one line, no traceback
    assert line.startswith("error: checkpoint #1 of run") and REFUSED in line and line.endswith("checkpoint #0")
    assert json.loads(_hazel("show", fan, "--json")) == before
