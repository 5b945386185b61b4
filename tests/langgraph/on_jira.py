"""A LangGraph workflow on Jira, wired as ``hazel serve`` wires it (the live app, signed webhooks, the fake Jira
site behind the jira library), for the LangGraph tests that talk to Jira."""

from __future__ import annotations

import io
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import responses
from rich.console import Console

from bot.engine.registry import Registry
from bot.server.app import HazelApp as Hazel
from bot.server.http import create_app
from bot.server.wiring import channels_from_settings, http_routers
from bot.settings import Settings
from hazel import Approvers
from integrations.console import ConsoleChannel
from tests.langgraph.graphs import review_graph, workflow
from tests.support.fake_jira import FakeJira
from tests.support.jira_env import SECRET, Clock, JiraEnv, people
from tests.support.live import LiveServer


def _review_on_jira(who: dict[str, str]) -> Any:
    return workflow(review_graph(channel="jira:DOC", approvers=Approvers(jira_users=(who["sme"],))))


@contextmanager
def graph_on_jira(db_url: str, make_workflow: Callable[[dict[str, str]], Any] = _review_on_jira
                  ) -> Iterator[tuple[JiraEnv, Any]]:
    """Hazel wired for Jira as ``hazel serve`` wires it, with ``make_workflow(people)`` registered (default:
    the review graph asking on ``jira:DOC``); yields the Jira test environment and the workflow."""
    who = people(True)
    wf = make_workflow(who)
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
