"""A steering point whose quorum is more than the people who may ever approve it is refused when its workflow is
loaded (a run would wait there forever); approvers that are open (anyone, groups, the console operator) are
never refused (``bot.engine.permissions.possible_approvers``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hazel import Approvers, StepContext, Workflow
from bot.engine import People, WorkflowDefinitionError
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel

PEOPLE = {"people": {"priya": {"slack": ["U0PRIYA"], "api": ["priya-ci"]}, "alice": {"console": ["al"]}}}


class Doc(BaseModel):
    text: str = ""


def signed(starters: Approvers | None = None, **steer: Any) -> Workflow:
    wf = Workflow("signed", version=1, state=Doc, starters=starters)

    @wf.step
    def write(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer("sign_off", show="text", **steer)
    return wf


@pytest.mark.parametrize("steer, why", [
    (dict(approvers=Approvers(users=["alice", "bob"]), approvals_required=3),
     "needs approvals_required=3 approvals, but only 2 people may ever approve it: alice, bob"),
    # two identities of one person of the people file are one approver
    (dict(approvers=Approvers(users=["alice", "al"]), approvals_required=2),
     "needs approvals_required=2 approvals, but only 1 person may ever approve it: alice"),
    (dict(approvers=Approvers(people=["priya"], slack_users=["U0PRIYA"], users=["priya-ci"]), approvals_required=2),
     "needs approvals_required=2 approvals, but only 1 person may ever approve it: priya"),
    (dict(approvers=Approvers(users=["alice"]), escalate_to=Approvers(users=["dana"]), escalate_after_sec=60,
          approvals_required=3),
     "needs approvals_required=3 approvals, but only 2 people may ever approve it (with its escalate_to): "
     "alice, dana"),
])
def test_an_impossible_quorum_is_refused_at_load(db_url: str, steer: dict, why: str) -> None:
    with pytest.raises(WorkflowDefinitionError) as refused:
        make_hazel(db_url, signed(**steer), people=People.from_dict(PEOPLE))
    assert str(refused.value) == (f"workflow signed v1 is invalid: steering point 'sign_off' {why}; a run would "
                                  "wait there forever (list more approvers, or lower approvals_required)")


PK = "steering point 'sign_off' lists 'pk' in people=, but 'pk' is not a person of the people file: it is priya's "


@pytest.mark.parametrize("steer, why", [
    # priya and her console name pk: one person, so a quorum of 2 could never be met (it used to load)
    (dict(approvers=Approvers(people=["priya", "pk"]), approvals_required=2),
     PK + "console or REST API name (list the person, people=['priya'], or the identity, users=['pk']); "
     "steering point 'sign_off' needs approvals_required=2 approvals, but only 1 person may ever approve it: "
     "priya; a run would wait there forever (list more approvers, or lower approvals_required)"),
    # pk alone: a decision is compared with people= as a person's name, so it would admit nobody
    (dict(approvers=Approvers(people=["pk"])),
     PK + "console or REST API name (list the person, people=['priya'], or the identity, users=['pk'])"),
    (dict(approvers=Approvers(users=["alice"]), escalate_to=Approvers(people=["U0PRIYA"]), escalate_after_sec=60),
     "steering point 'sign_off' (its escalate_to) lists 'U0PRIYA' in people=, but 'U0PRIYA' is not a person of "
     "the people file: it is priya's Slack user id (list the person, people=['priya'], or the identity, "
     "slack_users=['U0PRIYA'])"),
])
def test_people_naming_an_identity_of_a_person_are_refused_at_load(db_url: str, steer: dict, why: str) -> None:
    with pytest.raises(WorkflowDefinitionError) as refused:
        make_hazel(db_url, signed(**steer), people=People.from_dict(PEOPLE | {"people": {
            **PEOPLE["people"], "priya": {"slack": ["U0PRIYA"], "api": ["priya-ci"], "console": ["pk"]}}}))
    assert str(refused.value) == f"workflow signed v1 is invalid: {why}"


def test_starters_naming_an_identity_of_a_person_are_refused_at_load(db_url: str) -> None:
    with pytest.raises(WorkflowDefinitionError) as refused:
        make_hazel(db_url, signed(starters=Approvers(people=["priya-ci"])), people=People.from_dict(PEOPLE))
    assert str(refused.value) == (
        "workflow signed v1 is invalid: starters lists 'priya-ci' in people=, but 'priya-ci' is not a person of "
        "the people file: it is priya's console or REST API name (list the person, people=['priya'], or the "
        "identity, users=['priya-ci'])")


@pytest.mark.parametrize("steer", [
    dict(approvals_required=5),  # no approvers: anyone
    dict(approvers=Approvers(slack_usergroups=["S0ONCALL"]), approvals_required=5),  # a group's members change
    dict(approvers=Approvers(users=["alice"], jira_groups=["dba"]), approvals_required=3),
    dict(approvers=Approvers(slack_users=["U0PRIYA"]), approvals_required=2),  # and the console operator
    dict(approvers=Approvers(users=["alice"]), permissions={"approve": "anyone"}, approvals_required=3),
    dict(approvers=Approvers(users=["alice"]), escalate_to=Approvers(), escalate_after_sec=60,
         approvals_required=3),  # escalated, anyone may
    dict(approvers=Approvers(users=["alice", "bob"]), approvals_required=2),  # exactly enough
    dict(approvers=Approvers(people=["priya", "bob"]), approvals_required=2),  # bob: no one's identity, a person
    dict(approvers=Approvers(users=["alice"]), escalate_to=Approvers(users=["dana"]), escalate_after_sec=60,
         approvals_required=2),
])
def test_open_or_sufficient_approvers_load(db_url: str, steer: dict) -> None:
    hazel = make_hazel(db_url, signed(**steer), people=People.from_dict(PEOPLE))
    assert [wf.name for wf in hazel.workflows()] == ["signed"]


IMPOSSIBLE = '''
from pydantic import BaseModel
from hazel import Approvers, StepContext, Workflow


class Doc(BaseModel):
    text: str = ""


wf = Workflow("signed", version=1, state=Doc)


@wf.step
def write(state: Doc, ctx: StepContext) -> Doc:
    return state


wf.steer("sign_off", show="text", approvers=Approvers(users=["alice", "bob"]), approvals_required=3)
'''


def test_every_command_refuses_the_workflow_in_one_line(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    (tmp_path / "quorum_impossible.py").write_text(IMPOSSIBLE)
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=str(tmp_path / "quorum_impossible.py"))
    for argv in (["workflows"], ["runs"], ["run", "signed"]):
        line = hazel(*argv, code=1).stderr.strip()
        assert line == ("error: workflow signed v1 is invalid: steering point 'sign_off' needs approvals_required=3 "
                        "approvals, but only 2 people may ever approve it: alice, bob; a run would wait there "
                        "forever (list more approvers, or lower approvals_required)"), (argv, line)


EVERYONE = IMPOSSIBLE.replace("approvals_required=3)", "approvals_required=2, allow_self_approval=False)")


def test_a_quorum_of_every_approver_without_self_approval_is_a_warning(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    """alice and bob must both approve, and neither may approve a run they started: such a run waits forever,
    but runs others start do not, so it loads, and ``hazel workflows`` warns."""
    (tmp_path / "quorum_everyone.py").write_text(EVERYONE)
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=str(tmp_path / "quorum_everyone.py"))
    warning = ("steering point 'sign_off' needs approvals_required=2 of the 2 who may ever approve it (alice, bob) "
               "and self-approval is off: a run one of them starts would wait there forever")
    assert json.loads(hazel("workflows", "--json").stdout)[0]["warnings"] == [warning]
    assert f"warning: {warning}" in " ".join(hazel("workflows").stdout.split())
    assert hazel("run", "signed", "--json").exit_code == 0

    (tmp_path / "quorum_others.py").write_text(EVERYONE.replace('"bob"]', '"bob", "carol"]'))
    others = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=str(tmp_path / "quorum_others.py"))
    assert json.loads(others("workflows", "--json").stdout)[0]["warnings"] == []
