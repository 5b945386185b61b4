"""A refusal's ``only … may`` names the console operator where they may act: an approver list (a point's, a
workflow's ``starters``) that names no console or REST API names and no people admits the console operator
(README, "Who is who"), and the refusal said ``only Slack user U…, Slack group S… may`` as if nobody at the
console could. Checked over real HTTP (the REST API's 403s) and through the CLI, which then does what the
refusal says it may."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from bot.engine.registry import Registry
from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel
from tests.support.live import LiveServer

SIGNOFF = '''
from pydantic import BaseModel
from hazel import Approvers, StepContext, Workflow

class S(BaseModel):
    text: str = "ship it"

signoff = Workflow("signoff", version=1, state=S, starters=Approvers(slack_users=["U0000000123"]))

@signoff.step
def draft(state: S, ctx: StepContext) -> S:
    return state

signoff.steer("sign_off", title="Sign-off", show="text", actions=["approve", "reject"],
              approvers=Approvers(slack_users=["U0000000123"], slack_usergroups=["S0000000456"]))
'''

BOB = "tok-bob-0123456789"
WHO = "Slack user U0000000123, Slack group S0000000456, the console operator"


def test_refusals_name_the_console_operator_who_may_then_act(db_url: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "signoff.py").write_text(SIGNOFF)
    hazel = make_hazel(db_url, *Registry().load([str(tmp_path / "signoff.py")]))
    cli = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=str(tmp_path / "signoff.py"))
    # the operator may start it (the starters name no console or REST API name and no people)
    run_id = json.loads(cli("run", "signoff", "--json").stdout)["run"]["id"]
    assert hazel.get(run_id=run_id).status.value == "waiting"
    app = create_app(hazel, routers=[api_router(hazel, Settings(HAZEL_API_TOKENS=f"bob={BOB}"))])
    with LiveServer(app) as server:
        bob = httpx.Client(base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {BOB}"})
        for path, body, message in (
                (f"/api/runs/{run_id}/decisions", {"action": "approve"},
                 f"bob may not approve at 'Sign-off': only {WHO} may"),
                (f"/api/runs/{run_id}/cancel", {}, f"bob may not cancel run {run_id}: only {WHO} may, or who "
                                                   "started the run"),
                ("/api/runs", {"workflow": "signoff", "input": {}},
                 "bob may not start signoff v1: only Slack user U0000000123, the console operator may")):
            refused = bob.post(path, json=body)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == {"type": "NotAllowedError", "message": message}
    assert len(hazel.runs()) == 1 and hazel.decisions(run_id=run_id) == []
    cli("approve", run_id)  # and the console operator may, as the refusals say
    assert hazel.get(run_id=run_id).status.value == "completed"
    assert hazel.decisions(run_id=run_id)[0].actor_id == "olga"


JIRA_ONLY = '''
from pydantic import BaseModel
from hazel import Approvers, StepContext, Workflow

class S(BaseModel):
    text: str = "ship it"

signoff = Workflow("signoff", version=1, state=S)

@signoff.step
def draft(state: S, ctx: StepContext) -> S:
    return state

signoff.steer("sign_off", title="Sign-off", show="text", actions=["approve", "reject"],
              approvers=Approvers(users=["priya"], jira_users=["5b10ac8d82e05b22cc7d4ef5"]))
'''


def test_a_refusal_off_jira_names_a_jira_account_as_the_identity_as_takes(db_url: str, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """s31 F12(a): ``only priya, 5b10ac8d… may`` named a Jira account bare at the console, where nothing said
    it was one nor how to act for it; it is ``jira:5b10ac8d…`` there (as ``--as`` takes it), bare on Jira."""
    (tmp_path / "signoff.py").write_text(JIRA_ONLY)
    hazel = make_hazel(db_url, *Registry().load([str(tmp_path / "signoff.py")]))
    cli = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=str(tmp_path / "signoff.py"))
    run_id = json.loads(cli("run", "signoff", "--json").stdout)["run"]["id"]
    refused = cli("approve", run_id, "--as", "mallory", code=1).stderr
    assert "only priya, jira:5b10ac8d82e05b22cc7d4ef5 may" in refused, refused
    cli("approve", run_id, "--as", "jira:5b10ac8d82e05b22cc7d4ef5")  # as the refusal names them
    assert hazel.get(run_id=run_id).status.value == "completed"
