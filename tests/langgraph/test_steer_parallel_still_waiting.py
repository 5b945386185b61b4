"""A decision on one of two requests a LangGraph run waits on at once says that the run still waits on the
other: the engine's outcome (``still_pending``), ``hazel approve`` (text and ``--json``), the REST answer, the
Slack reply and updated message, the Jira comment. The decision on the last one says nothing of the kind. On
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re
from typing import Any

from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from hazel import Approvers
from tests.bot.slack.conftest import PRIYA, STARTER, SlackEnv, make_env  # noqa: F401
from tests.bot.test_api import ALICE, TOKENS, Api
from tests.langgraph.graphs import pair_graph, workflow
from tests.langgraph.on_jira import graph_on_jira
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer


def _still(request) -> str:
    return f"still waiting on: security (steering request {request.id})"


def test_the_engine_the_cli_and_rest_say_what_the_run_still_waits_on(db_url, tmp_path, monkeypatch):
    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair"))
    run = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    legal, security = hz.pending_requests_of(run_id=run.id)
    first = hz.decide(run_id=run.id, action="approve", actor=person("ana"), request_id=legal.id)
    assert [r.id for r in first.still_pending] == [security.id]
    last = hz.decide(run_id=run.id, action="approve", actor=person("ana"), request_id=security.id)
    assert last.still_pending == ()

    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url,
                           workflows="tests.langgraph.workflows.parallel_graphs")
    for as_json in (False, True):
        started = json.loads(hazel("run", "lg-pair", "--input", '{"topic": "launch"}', "--json").stdout)
        run_id = started["run"]["id"]
        legal, security = hz.pending_requests_of(run_id=run_id)
        if as_json:
            answer = json.loads(hazel("approve", run_id, "--at", "legal", "--json").stdout)
            assert [(r["id"], r["point"]) for r in answer["still_pending"]] == [(security.id, "security")]
            answer = json.loads(hazel("approve", run_id, "--at", "security", "--json").stdout)
            assert answer["still_pending"] == [] and answer["run"]["status"] == "completed"
        else:
            out = hazel("approve", run_id, "--at", "legal").stdout
            assert f"run {run_id} is {_still(security)}" in out, out
            out = hazel("approve", run_id, "--at", "security").stdout
            assert "still waiting" not in out and "now completed" in out, out

    run = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    legal, security = hz.pending_requests_of(run_id=run.id)
    with LiveServer(create_app(hz, routers=[api_router(hz, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        answer = api.decide(run.id, {"action": "approve", "request_id": legal.id}, token=ALICE)
        assert answer.status_code == 201, answer.text
        assert [(r["id"], r["point"]) for r in answer.json()["still_pending"]] == [(security.id, "security")]
        answer = api.decide(run.id, {"action": "approve", "request_id": security.id}, token=ALICE)
        assert answer.status_code == 201 and answer.json()["still_pending"] == [], answer.text


def _message_of(env: SlackEnv, request_id: int):
    def posted():
        r = next(r for r in env.hazel.requests(run_id=env.hazel.request_view(request_id=request_id).run.id)
                 if r.id == request_id)
        return r if r.message_ref else None

    request = env.wait(posted, f"request {request_id} to be posted")
    return env.fake.message(request.message_ref["channel"], request.message_ref["ts"])


def _text(message) -> str:
    return json.dumps(message.blocks, ensure_ascii=False)


def test_slack_replies_and_updates_the_message_with_what_the_run_still_waits_on(make_env) -> None:  # noqa: ANN001, F811
    env: SlackEnv = make_env(workflow(pair_graph(), name="lg-pair", channel="slack:#migrations"))
    env.run_in_background()
    run_id = env.start("lg-pair", {"topic": "launch"}, by=STARTER)
    env.wait(lambda: len(env.hazel.pending_requests_of(run_id=run_id)) == 2, "both requests to be asked")
    legal, security = env.hazel.pending_requests_of(run_id=run_id)
    legal_message, security_message = _message_of(env, legal.id), _message_of(env, security.id)
    reply = env.sender.click(PRIYA, "approve", legal_message, name="priya")
    assert reply.status_code == 200, reply.text
    told = env.ephemeral(PRIYA, "still waiting on")
    assert _still(security) in told["text"], told
    updated = env.wait(lambda: (m := env.fake.message(legal_message.channel, legal_message.ts)).versions and m,
                       "the legal message to be updated")
    assert _still(security) in _text(updated), _text(updated)

    env.sender.click(PRIYA, "approve", security_message, name="priya")
    done = env.wait(lambda: (m := env.fake.message(security_message.channel, security_message.ts)).versions and m,
                    "the security message to be updated")
    assert "still waiting" not in _text(done)


def test_the_jira_comment_says_what_the_run_still_waits_on(db_url: str) -> None:
    def pair_on_jira(who: dict[str, str]) -> Any:
        return workflow(pair_graph(), name="lg-pair", channel="jira:DOC", approvers=Approvers(jira_users=(who["sme"],)))

    with graph_on_jira(db_url, pair_on_jira) as (env, _wf):
        hazel = env.hazel
        run = hazel.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
        env.drive(run.id)
        legal, security = hazel.pending_requests_of(run_id=run.id)
        legal_issue = env.fake.issue(legal.message_ref["issue_id"])
        answer = env.send(env.comment(legal_issue, "/approve"))
        assert answer.json()["decided"] == "approve", answer.text
        hazel.deliverer.deliver_due()
        said = env.fake.bodies(legal_issue["key"])
        assert any("still waiting on" in b and f"steering request {security.id}" in b and "security" in b
                   for b in said), said
        security_issue = env.fake.issue(security.message_ref["issue_id"])
        assert env.send(env.comment(security_issue, "/approve")).json()["decided"] == "approve"
        env.drive(run.id)
        assert not any("still waiting" in b for b in env.fake.bodies(security_issue["key"]))


def test_the_run_page_says_what_the_run_still_waits_on(db_url):
    from bot.inbound.web import Signer, web_router
    from tests.bot.web.conftest import Browserless
    from tests.bot.web.scenario import web_settings

    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair"))
    run = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    legal, security = hz.pending_requests_of(run_id=run.id)
    settings = web_settings()
    with LiveServer(create_app(hz, routers=[web_router(hz, settings)])) as server:
        client = Browserless(server.url)
        assert client.get(f"/runs/{run.id}?t={Signer(settings).token(run.id, 'alice', minted_by='olga')}").status_code in (200, 303)
        page = client.get(f"/runs/{run.id}").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        nonce = re.search(r'name="nonce" value="([^"]+)"', page).group(1)
        answer = client.post(f"/runs/{run.id}/decide", data={"action": "approve", "csrf": csrf,
                                                              "request_id": legal.id, "nonce": nonce})
        assert answer.status_code == 303, answer.text
        flash = re.search(r'<p class="flash"[^>]*>([^<]*)</p>', client.get(f"/runs/{run.id}").text).group(1)
        assert "Approved as operator olga for alice" in flash and _still(security) in flash, flash


def test_a_quorum_vote_that_does_not_settle_says_what_else_the_run_waits_on(db_url):
    """A fresh-user finding (s32 F4): a vote that leaves its request waiting for more answered ``still_pending:
    []`` while the run waited on its other interrupts too."""
    hz = make_hazel(db_url, workflow(pair_graph(), name="lg-pair-quorum", approvals_required=2,
                                     approvers=Approvers(users=["ana", "bob"])))
    run = hz.start(workflow="lg-pair-quorum", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    legal, security = hz.pending_requests_of(run_id=run.id)
    vote = hz.decide(run_id=run.id, action="approve", actor=person("ana"), request_id=legal.id, delivery_id="d-1")
    assert not vote.settled and [r.id for r in vote.still_pending] == [security.id], vote
    again = hz.decide(run_id=run.id, action="approve", actor=person("ana"), request_id=legal.id, delivery_id="d-1")
    assert again.duplicate and [r.id for r in again.still_pending] == [security.id], again  # (the same delivery)
