"""A LangGraph run from start to completion through Jira comments (signed webhooks into the live app, the fake
Jira site behind the jira library): feedback, /rewind with feedback, /edit, /approve; Cloud; SQLite and
PostgreSQL."""

from __future__ import annotations

import io
from contextlib import contextmanager
from typing import Any, Iterator

import responses
from rich.console import Console

from bot.engine.registry import Registry
from bot.server.app import HazelApp as Hazel
from bot.server.http import create_app
from bot.server.wiring import channels_from_settings, http_routers
from bot.settings import Settings
from hazel import Approvers
from integrations.console import ConsoleChannel
from store.models import RunStatus
from tests.langgraph.graphs import review_graph, workflow
from tests.support.engine import person
from tests.support.fake_jira import FakeJira
from tests.support.jira_env import SECRET, Clock, JiraEnv, people
from tests.support.live import LiveServer


@contextmanager
def graph_on_jira(db_url: str) -> Iterator[tuple[JiraEnv, Any]]:
    """Hazel wired for Jira as ``hazel serve`` wires it, with the review graph asking on ``jira:DOC``."""
    who = people(True)
    wf = workflow(review_graph(channel="jira:DOC", approvers=Approvers(jira_users=(who["sme"],))))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake = FakeJira(rsps, cloud=True, projects=("DOC",))
        auth = fake.client_kwargs()
        config = Settings(HAZEL_DATABASE_URL=db_url, JIRA_URL=fake.base, JIRA_WEBHOOK_SECRET=SECRET,
                          JIRA_USER=auth.get("user"), JIRA_API_TOKEN=auth.get("api_token"), JIRA_PAT=auth.get("pat"))
        registry = Registry()
        registry.add(wf)
        hazel = Hazel(config, registry=registry, load_workflows=False, clock=Clock(),
                      console=ConsoleChannel(console=Console(file=io.StringIO(), width=120)),
                      channels=channels_from_settings(config))
        hazel.prepare()
        try:
            with LiveServer(create_app(hazel, routers=http_routers(hazel, config))) as server:
                yield JiraEnv(hazel=hazel, fake=fake, url=server.url, cloud=True, who=who, clock=hazel.clock), wf
        finally:
            hazel.close()


def test_a_langgraph_run_from_start_to_completion_through_jira_comments(db_url: str) -> None:
    with graph_on_jira(db_url) as (env, wf):
        run = env.hazel.start(workflow="lg-review", input={"topic": "tides"}, actor=person("olga"))
        assert env.drive(run.id).status is RunStatus.WAITING
        issue = env.issue(run.id)
        assert issue["key"].startswith("DOC-") and "Draft about tides" in issue["fields"]["description"]

        # a stranger's comment decides nothing; the SME's plain comment is feedback: the graph revises
        assert env.send(env.comment(issue, "/approve", person="stranger")).json().get("decided") is None
        answer = env.send(env.comment(issue, "shorter, please"))
        assert answer.status_code == 200 and answer.json()["decided"] == "feedback"
        assert env.drive(run.id).status is RunStatus.WAITING
        assert "[revised: shorter, please]" in env.issue(run.id)["fields"]["description"]

        # /rewind to the first draft with feedback: the graph forks there
        answer = env.send(env.comment(env.issue(run.id), "/rewind draft about reefs"))
        assert answer.json()["decided"] == "rewind", answer.text
        assert env.drive(run.id).status is RunStatus.WAITING
        assert "(after: about reefs)" in env.issue(run.id)["fields"]["description"]

        # /edit then /approve: published with the SME's text
        answer = env.send(env.comment(env.issue(run.id), "/edit Reefs, by the SME"))
        assert answer.json()["decided"] == "edit", answer.text
        assert env.drive(run.id).status is RunStatus.COMPLETED
        values = wf.graph.get_state({"configurable": {"thread_id": run.id}}).values
        assert values["draft"] == "Reefs, by the SME" and values["published"] is True
        assert values["log"] == ["draft", f"edited by {env.who['sme']}", "publish"]

        other = env.hazel.start(workflow="lg-review", input={"topic": "kelp"}, actor=person("olga"))
        env.drive(other.id)
        assert env.send(env.comment(env.issue(other.id), "/approve")).json()["decided"] == "approve"
        assert env.drive(other.id).status is RunStatus.COMPLETED
        decisions = [(d.action.value, d.channel) for d in env.hazel.decisions(run_id=run.id)]
        assert decisions == [("feedback", "jira"), ("rewind", "jira"), ("edit", "jira")]
