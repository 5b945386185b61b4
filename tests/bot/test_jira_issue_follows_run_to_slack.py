"""A run's Jira issue hears how the run ended, wherever it ended, and is told when its request is settled on
another channel (README, Jira: "After each decision Hazel comments the outcome, then the run's progress …").

A workflow asks first on Jira, then in Slack. Its Jira issue's last comment says the run now waits at the Slack
point; when the run then ends there (rejected or approved by a Slack button, cancelled by ``hazel cancel``), the
issue gets the outcome, once, and moves to the rejected (done) status, unless its own request was decided
otherwise (an approved issue is not moved to Rejected because a later sign-off was rejected). A tester's
finding: an issue answered with feedback stayed open, saying nothing, after the run ended in Slack.

The Jira request settled from another channel (the REST API, the CLI, ``/hazel cancel`` in Slack) was told
already (its ``request.closed`` goes to its own channel): the last test shows it end to end.

One deployment as ``hazel serve`` wires it (``tests.support.deployment``: settings -> ``channels_from_settings``
/ ``http_routers`` -> ``create_app``, a worker pool and the outbox deliverer in threads) over real HTTP, with
the fake Slack Web API and the fake Jira; the ``hazel`` CLI in-process on the same database. The workflow is
defined at the top level of this module, which the deployment loads by path (``HAZEL_WORKFLOWS``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from pydantic import BaseModel

from bot.engine.workflow import END, Workflow
from store.models import Approvers, RunStatus
from tests.support import deployment, jira_payloads
from tests.support.deployment import wait_for
from tests.support.fake_slack import Message

pytestmark = pytest.mark.usefixtures("wide_cli")  # (the CLI's tables do not wrap)

MIGRATIONS = "C0000000001"
PRIYA = "U0000000001"
SME = "557058:sme-sam"
TOKENS = {"olga": "tok-olga-0123456789"}
APPROVERS = Approvers(users=("olga",), slack_users=(PRIYA,), jira_users=(SME,))


class Change(BaseModel):
    text: str = "drop the legacy users table"
    notes: str = ""


jira_then_slack = Workflow("jira-then-slack", state=Change)


@jira_then_slack.step
def plan(state: Change, ctx) -> Change:  # noqa: ANN001
    return state


jira_then_slack.steer("jira_review", title="Jira review", show="text",
                      actions=["approve", "reject", "feedback"], channel="jira:MIG", approvers=APPROVERS,
                      on_feedback="rework", next="scripts")


@jira_then_slack.step
def scripts(state: Change, ctx) -> Change:  # noqa: ANN001
    return state


jira_then_slack.steer("sign_off", title="Sign off", show="text", actions=["approve", "reject"],
                      channel="slack:#migrations", approvers=APPROVERS)


@jira_then_slack.step(next=END)
def ship(state: Change, ctx) -> Change:  # noqa: ANN001
    return state


@jira_then_slack.step(next="sign_off")
def rework(state: Change, ctx) -> Change:  # noqa: ANN001
    """The Jira review's feedback, taken into account without asking Jira again: straight to the sign-off."""
    return state.model_copy(update={"notes": ctx.feedback or ""})


class Deployment(deployment.Deployment):
    """The deployment of ``jira-then-slack``: its REST calls as olga; approved Jira issues move to Done,
    rejected ones to Rejected."""

    def __init__(self, db_url: str, tmp_path: Path) -> None:
        super().__init__(db_url, tmp_path, workflows=__file__, slack_channels={"migrations": MIGRATIONS},
                         tokens=TOKENS, token="olga", env={"JIRA_REJECTED_STATUS": "Rejected"})

    def start(self) -> str:
        response = self.http.post("/api/runs", json={"workflow": "jira-then-slack", "input": {}})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def issue(self, run_id: str) -> dict[str, Any]:
        return self.jira.issue(self.waiting(run_id, "jira_review").message_ref["issue_id"])

    def at_slack(self, run_id: str, comment: str) -> tuple[dict[str, Any], Message]:
        """Answer the run's Jira issue with ``comment``; return the issue and the Slack request the run then
        waits on, once the issue says so."""
        issue = self.issue(run_id)
        answer = self.comment(issue, comment)
        assert answer.status_code == 200 and "decided" in answer.json(), answer.text
        ref = self.waiting(run_id, "sign_off").message_ref
        self.quiet(run_id)
        assert self.jira.bodies(issue["id"])[-1].endswith("Now waiting at *Sign off* (slack:\\#migrations).")
        return issue, self.slack.message(ref["channel"], ref["ts"])

    def reject_in_slack(self, message: Message, reason: str) -> None:
        """Priya clicks Reject on the Slack request and gives ``reason`` in its modal."""
        assert self.sender.click(PRIYA, "reject", message, name="priya").status_code == 200
        modal = wait_for(lambda: self.slack.views and self.slack.views[-1], "the reject modal")
        assert modal["callback_id"] == "hazel_reject"
        assert self.sender.submit(PRIYA, modal, {"reason": reason}, name="priya").status_code == 200

    def told(self, run_id: str, issue: dict[str, Any], before: int) -> list[str]:
        """The comments added to ``issue`` since it had ``before``, once the run's outbox is delivered."""
        self.quiet(run_id)
        return self.jira.bodies(issue["id"])[before:]

    def comment(self, issue: dict[str, Any], body: str) -> httpx.Response:
        return self.jira_send(jira_payloads.comment_event(issue, body, SME, cloud=True, base=self.jira.base,
                                                          display="sam"))


@pytest.fixture
def deploy(db_url: str, tmp_path: Path) -> Iterator[Deployment]:
    deployment = Deployment(db_url, tmp_path)
    try:
        yield deployment
    finally:
        deployment.close()


# -- the run ends at its Slack point ---------------------------------------------------------------------------

def test_rejected_by_a_slack_button_after_feedback_on_jira(deploy: Deployment) -> None:
    """The tester's case: the issue answered with feedback stays open; the run is rejected in Slack."""
    d = deploy
    run_id = d.start()
    issue, message = d.at_slack(run_id, "Keep a backup of the table for a week.")
    assert d.jira.status(issue["id"]) == "To Do"
    before = len(d.jira.bodies(issue["id"]))
    d.reject_in_slack(message, "the reports still read it")
    d.ended(run_id, RunStatus.REJECTED)
    assert d.told(run_id, issue, before) == [f"Run {run_id} ended rejected by priya: the reports still read it."]
    assert d.jira.status(issue["id"]) == "Rejected", "the project maps a rejected status: the issue moves there"


def test_rejected_by_a_slack_button_after_approval_on_jira(deploy: Deployment) -> None:
    """The issue approved (moved to Done) hears that the run was then rejected, and stays Done: its own request
    was approved, and that is what its status says."""
    d = deploy
    run_id = d.start()
    issue, message = d.at_slack(run_id, "/approve")
    assert d.jira.status(issue["id"]) == "Done"
    before = len(d.jira.bodies(issue["id"]))
    d.reject_in_slack(message, "not this quarter")
    d.ended(run_id, RunStatus.REJECTED)
    assert d.told(run_id, issue, before) == [f"Run {run_id} ended rejected by priya: not this quarter."]
    assert d.jira.status(issue["id"]) == "Done"
    assert d.jira.transitions_made(issue["id"]) == ["Go Done"]


def test_completed_after_a_slack_approval(deploy: Deployment) -> None:
    d = deploy
    run_id = d.start()
    issue, message = d.at_slack(run_id, "Keep a backup of the table for a week.")
    before = len(d.jira.bodies(issue["id"]))
    assert d.sender.click(PRIYA, "approve", message, name="priya").status_code == 200
    d.ended(run_id, RunStatus.COMPLETED)
    assert d.told(run_id, issue, before) == [f"(/) Run {run_id} completed after ship."]
    assert d.jira.status(issue["id"]) == "Done", "the project maps a done status: the issue moves there"


def test_cancelled_from_the_cli_while_it_waits_in_slack(deploy: Deployment) -> None:
    d = deploy
    run_id = d.start()
    issue, _ = d.at_slack(run_id, "/approve")
    before = len(d.jira.bodies(issue["id"]))
    d.cli("cancel", run_id, "--reason", "superseded")
    d.ended(run_id, RunStatus.CANCELLED)
    assert d.told(run_id, issue, before) == [f"Run {run_id} ended cancelled by olga: superseded."]
    assert d.jira.status(issue["id"]) == "Done"


# -- the Jira request settled on another channel: told already -----------------------------------------------

def test_a_jira_request_settled_elsewhere_is_told_on_its_issue(deploy: Deployment) -> None:
    """Approved over REST, rejected from the CLI, cancelled by ``/hazel cancel`` in Slack: the issue says who
    did what and moves as a Jira-side decision moves it (approved: Done; rejected: Rejected)."""
    d = deploy
    run_id = d.start()
    issue = d.issue(run_id)
    response = d.http.post(f"/api/runs/{run_id}/decisions", json={"action": "approve"})
    assert response.status_code == 201, response.text
    d.waiting(run_id, "sign_off")
    assert d.told(run_id, issue, 0) == ["(/) Approved by olga.",
                                        f"Run {run_id}: Done: scripts. Now waiting at *Sign off* "
                                        "(slack:\\#migrations)."]
    assert d.jira.status(issue["id"]) == "Done"

    run_id = d.start()
    issue = d.issue(run_id)
    d.cli("reject", run_id, "--reason", "wrong database")
    d.ended(run_id, RunStatus.REJECTED)
    assert d.told(run_id, issue, 0) == ["(x) Rejected by olga: wrong database",
                                        f"Run {run_id} ended rejected by olga: wrong database."]
    assert d.jira.status(issue["id"]) == "Rejected"

    run_id = d.start()
    issue = d.issue(run_id)
    answer = d.sender.command(PRIYA, f"cancel {run_id} not now", name="priya")
    assert answer.json()["text"] == f"🚫 Run `{run_id}` is cancelled.", answer.text
    assert d.told(run_id, issue, 0) == ["Cancelled by priya: nothing more to decide here.",
                                        f"Run {run_id} ended cancelled by priya: not now."]
    assert d.jira.status(issue["id"]) == "To Do", "no status is mapped for a cancellation"
