"""The REST API and the run pages name a Slack user group no person claims as ``Slack group S…``, as the
console and the CLI do, never as Slack's markup ``<!subteam^S…>`` (a fresh-user round: the API's 403 and the
page's "Who may decide" and refusals showed the markup); a run page whose workflow version is not deployed says
who may decide is not known, not "anyone"."""

from __future__ import annotations

import re

import httpx

from bot.inbound.api import api_router
from bot.inbound.web import web_router
from bot.server.http import create_app
from hazel import StepContext, Workflow
from store.models import Approvers
from tests.bot.web.conftest import Browserless
from tests.bot.web.scenario import ALICE, as_api, web_settings
from tests.bot.web.test_pages import sign_in
from tests.support.engine import make_hazel
from tests.support.live import LiveServer
from tests.workflows.doc import Doc

GROUP = "S0000000001"


def group_workflow() -> Workflow:
    wf = Workflow("grouped", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer("check", title="Group check", approvers=Approvers(slack_usergroups=(GROUP,)))
    return wf


def test_a_slack_group_is_named_plainly_by_the_api_and_the_pages(db_url: str) -> None:
    hazel, settings = make_hazel(db_url, group_workflow()), web_settings()
    run = hazel.start(workflow="grouped", input={"topic": "groups"}, actor=as_api(hazel, "olga"))
    hazel.drive(run_id=run.id)
    app = create_app(hazel, routers=[api_router(hazel, settings), web_router(hazel, settings)])
    with LiveServer(app) as server:
        refused = httpx.post(f"{server.url}/api/runs/{run.id}/decisions", json={"action": "approve"},
                             headers={"Authorization": f"Bearer {ALICE}"}, timeout=10)
        assert refused.status_code == 403, refused.text
        message = refused.json()["error"]["message"]
        assert f"only Slack group {GROUP}, the console operator may" in message and "subteam" not in message, message
        client = Browserless(server.url)
        sign_in(client, ALICE)
        page = client.get(f"/runs/{run.id}").text
        assert f"Who may decide: Slack group {GROUP}" in page, page
        assert f"only Slack group {GROUP}, the console operator may" in page and "subteam" not in page


def test_a_run_page_of_a_version_not_deployed_does_not_say_anyone(db_url: str) -> None:
    deployed = make_hazel(db_url, group_workflow())
    run = deployed.start(workflow="grouped", input={"topic": "gone"}, actor=as_api(deployed, "olga"))
    deployed.drive(run_id=run.id)
    hazel, settings = make_hazel(db_url), web_settings()  # (this process does not have the workflow)
    with LiveServer(create_app(hazel, routers=[web_router(hazel, settings)])) as server:
        client = Browserless(server.url)
        sign_in(client, ALICE)
        page = client.get(f"/runs/{run.id}").text
        assert "Who may decide: not known here (the run's workflow version is not deployed)" in page, page
        assert "Who may decide: anyone" not in page


def test_a_run_page_names_the_backup_approvers_once_the_request_is_escalated(db_url: str) -> None:
    """s23 F1: the page said ``Who may decide: alice`` after the request was escalated to bob, while it offered
    bob its buttons and every other channel named him."""
    from datetime import timedelta

    wf = Workflow("backed", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer("check", title="Backed check", approvers=Approvers(users=["alice"]),
             escalate_to=Approvers(users=["bob"]), escalate_after_sec=60)
    hazel, settings = make_hazel(db_url, wf), web_settings()
    run = hazel.start(workflow="backed", input={"topic": "backup"}, actor=as_api(hazel, "olga"))
    hazel.drive(run_id=run.id)
    with LiveServer(create_app(hazel, routers=[web_router(hazel, settings)])) as server:
        client = Browserless(server.url)
        sign_in(client, ALICE)
        page = client.get(f"/runs/{run.id}").text
        assert "Who may decide: alice</p>" in page, page
        request = hazel.request_for(run_id=run.id)
        hazel.fire_request(request_id=request.id, now=request.created_at + timedelta(seconds=61))
        page = client.get(f"/runs/{run.id}").text
        assert re.search(r"Who may decide: alice · escalated [^<]*, so also bob</p>", page), page


def test_the_page_names_a_jira_approver_by_person(db_url: str) -> None:
    """s25 F17: the run page said ``Who may decide: priya, sam.lee`` for a Jira account the people file gives to
    sam, where every refusal says ``only priya, sam may``."""
    from bot.engine.people import People

    wf = Workflow("jiraed", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer("check", title="Jira check", approvers=Approvers(people=("priya",), jira_users=("sam.lee",)))
    people = People.from_dict({"people": {"priya": {}, "sam": {"jira": ["sam.lee"]}}})
    hazel, settings = make_hazel(db_url, wf, people=people), web_settings()
    run = hazel.start(workflow="jiraed", input={"topic": "who"}, actor=as_api(hazel, "olga"))
    hazel.drive(run_id=run.id)
    app = create_app(hazel, routers=[web_router(hazel, settings)])
    with LiveServer(app) as server:
        client = Browserless(server.url)
        sign_in(client, ALICE)
        page = client.get(f"/runs/{run.id}").text
        assert "Who may decide: priya, sam</p>" in page, page
