"""A LangGraph super-step that runs several nodes is named after all of them in the run's history, and so is
what runs (or asks) next: ``#2 draft + legal → legal``, ``#1 legal + security → legal + security`` (the engine's
checkpoints, ``hazel history`` and the drive's summary, REST ``/checkpoints``, the run page); ``hazel rewind --to
draft`` still finds the checkpoint from which draft runs next, with legal. On SQLite and PostgreSQL."""

from __future__ import annotations

import json

from bot.inbound.api import api_router
from bot.inbound.web import Signer, web_router
from bot.server.http import create_app
from bot.settings import Settings
from store.models import RunStatus
from tests.bot.test_api import TOKENS, Api
from tests.bot.web.conftest import Browserless
from tests.bot.web.scenario import web_settings
from tests.langgraph.graphs import pair_graph, workflow
from tests.langgraph.workflows.parallel_history import intake_graph
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer

INTAKE = [("__start__", "intake"), ("intake", "draft + legal"), ("draft + legal", "legal")]
PAIR = [("__start__", "legal + security"), ("legal + security", "legal + security")]


def _steps(checkpoints):
    return [(c["step"], c["next_step"]) if isinstance(c, dict) else (c.step, c.next_step)
            for c in sorted(checkpoints, key=lambda c: c["seq"] if isinstance(c, dict) else c.seq)]


def test_the_engine_names_every_node_of_a_super_step_and_every_point_it_waits_at(db_url):
    hz = make_hazel(db_url, workflow(intake_graph(), name="lg-intake"), workflow(pair_graph(), name="lg-pair"))
    intake = hz.start(workflow="lg-intake", input={"topic": "tides"}, actor=person("olga"))
    assert hz.drive(run_id=intake.id).steps == ["intake", "draft + legal"]
    assert _steps(hz.checkpoints(run_id=intake.id)) == INTAKE
    hz.decide(run_id=intake.id, action="approve", actor=person("ana"), point="legal")
    hz.drive(run_id=intake.id)
    assert _steps(hz.checkpoints(run_id=intake.id))[3:] == [("legal", "legal"), ("legal", "publish"),
                                                            ("publish", None)]

    pair = hz.start(workflow="lg-pair", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=pair.id)
    assert _steps(hz.checkpoints(run_id=pair.id)) == PAIR
    assert [r.point for r in hz.pending_requests_of(run_id=pair.id)] == ["legal", "security"]
    hz.decide(run_id=pair.id, action="approve", actor=person("ana"), point="legal")
    hz.decide(run_id=pair.id, action="approve", actor=person("ana"), point="security")
    assert hz.drive(run_id=pair.id).steps == ["legal + security", "join"]  # both nodes resumed in one super-step
    assert _steps(hz.checkpoints(run_id=pair.id))[2:] == [("security", "legal + security"),
                                                          ("legal + security", "join"), ("join", None)]
    assert hz.get(run_id=pair.id).status is RunStatus.COMPLETED


def test_history_names_them_on_the_cli_rest_and_the_run_page(db_url, tmp_path, monkeypatch):
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url,
                           workflows="tests.langgraph.workflows.parallel_history")
    started = hazel("run", "lg-intake", "--input", '{"topic": "tides"}')
    assert "ran intake, draft + legal; now waiting" in started.stdout
    run_id = json.loads(hazel("runs", "--json").stdout)[0]["id"]
    tree = hazel("history", run_id).stdout
    assert "#1 intake → draft + legal" in tree and "#2 draft + legal → legal" in tree, tree
    rewound = hazel("rewind", run_id, "--to", "draft")  # the checkpoint from which draft (and legal) run next
    assert "ran draft + legal; now waiting" in rewound.stdout
    assert "rewind to #1" in hazel("history", run_id).stdout

    pair = json.loads(hazel("run", "lg-pair", "--input", '{"topic": "launch"}', "--json").stdout)["run"]["id"]
    assert "#1 legal + security → legal + security" in hazel("history", pair).stdout
    hazel("approve", pair, "--at", "legal", "--detach")  # one answer of two: no checkpoint, the run waits
    tree = " ".join(hazel("history", pair).stdout.split())
    assert "approve by olga at 'legal' (no checkpoint of its own)" in tree, tree  # listed all the same

    hz = make_hazel(db_url, workflow(intake_graph(), name="lg-intake"), workflow(pair_graph(), name="lg-pair"))
    settings = web_settings()
    with LiveServer(create_app(hz, routers=[api_router(hz, Settings(**TOKENS)), web_router(hz, settings)])) as server:
        listed = Api(server.url).call("GET", f"/api/runs/{pair}/checkpoints")
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert _steps(body if isinstance(body, list) else body["checkpoints"]) == PAIR
        client = Browserless(server.url)
        assert client.get(f"/runs/{run_id}?t={Signer(settings).token(run_id, 'alice', minted_by='olga')}").status_code in (200, 303)
        page = client.get(f"/runs/{run_id}").text
        assert "#2 draft + legal" in page and "→ draft + legal" in page, page


def test_the_jira_issue_lists_each_node_a_rewind_may_name(db_url):
    from hazel import Approvers
    from tests.langgraph.on_jira import graph_on_jira

    def intake_on_jira(who):
        return workflow(intake_graph(), name="lg-intake", channel="jira:DOC",
                        approvers=Approvers(jira_users=(who["sme"],)))

    with graph_on_jira(db_url, intake_on_jira) as (env, _wf):
        run = env.hazel.start(workflow="lg-intake", input={"topic": "tides"}, actor=person("olga"))
        env.drive(run.id)
        issue = json.dumps(env.issue(run.id)["fields"], ensure_ascii=False)
        assert "steps: draft, intake, legal; or a checkpoint's number" in issue, issue  # not 'draft + legal'
