"""A run's Slack thread hears how the run ended, wherever it ended (README, Slack: "The run's progress follows in
the thread: … its completion, a failure …, a rejection or cancellation").

A workflow asks first in Slack, then on Jira. Its Slack request's thread says the run now waits at the Jira
point; when the run then ends there (rejected by a Jira comment or transition, cancelled by ``/hazel cancel``,
``hazel cancel`` or the REST API, completed or failed after an approval on Jira), the thread gets the outcome,
once, as the Jira issue does. A run that ends at its Slack point gets it once too (no second copy).

One deployment as ``hazel serve`` wires it (settings -> ``channels_from_settings`` / ``http_routers`` ->
``create_app``, a worker pool and the outbox deliverer in threads) served over real HTTP, with the fake Slack
Web API and the fake Jira; the ``hazel`` CLI in-process on the same database. The workflow is defined at the
top level of this module, which the CLI loads by path (``HAZEL_WORKFLOWS``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from pydantic import BaseModel

from bot.engine.workflow import Workflow
from store.models import Approvers, RunStatus
from tests.support import jira_payloads
from tests.support import deployment
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
    fail: bool = False
    shipped: bool = False


slack_then_jira = Workflow("slack-then-jira", state=Change)


@slack_then_jira.step
def plan(state: Change, ctx) -> Change:  # noqa: ANN001
    return state


slack_then_jira.steer("plan_review", title="Plan review", show="text", actions=["approve", "reject"],
                      channel="slack:#migrations", approvers=APPROVERS)


@slack_then_jira.step
def scripts(state: Change, ctx) -> Change:  # noqa: ANN001
    return state


slack_then_jira.steer("jira_review", title="Jira review", show="text", actions=["approve", "reject"],
                      channel="jira:MIG", approvers=APPROVERS)


@slack_then_jira.step(max_attempts=1)
def ship(state: Change, ctx) -> Change:  # noqa: ANN001
    if state.fail:
        raise RuntimeError("the deploy target is gone")
    return state.model_copy(update={"shipped": True})


class Deployment(deployment.Deployment):
    """The deployment of ``slack-then-jira``: its REST calls as olga."""

    def __init__(self, db_url: str, tmp_path: Path) -> None:
        super().__init__(db_url, tmp_path, workflows=__file__, slack_channels={"migrations": MIGRATIONS},
                         tokens=TOKENS, token="olga")

    def start(self, **state: Any) -> str:
        response = self.http.post("/api/runs", json={"workflow": "slack-then-jira", "input": state})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def slack_request(self, run_id: str) -> Message:
        ref = self.waiting(run_id, "plan_review").message_ref
        return self.slack.message(ref["channel"], ref["ts"])

    def at_jira(self, run_id: str) -> tuple[Message, dict[str, Any]]:
        """Approve the run's Slack request by a click; return its Slack message and the Jira issue it then
        waits on, once its thread says so."""
        message = self.slack_request(run_id)
        assert self.sender.click(PRIYA, "approve", message, name="priya").status_code == 200
        issue = self.jira.issue(self.waiting(run_id, "jira_review").message_ref["issue_id"])
        self.thread(message, 1)
        assert self.thread(message)[0] == (f"Ran `scripts`. Run `{run_id}` now waits at *Jira review* in "
                                           "jira:MIG.")
        return message, issue

    def thread(self, message: Message, at_least: int = 0) -> list[str]:
        """The texts of the replies in ``message``'s thread (waits for ``at_least`` of them)."""
        def replies() -> list[str] | None:
            found = [m.text or "" for m in self.slack.channel_messages(message.channel, thread_ts=message.ts)]
            return found if len(found) >= at_least else None

        return wait_for(replies, f"{at_least} replies in the request's thread") if at_least else replies() or []

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


def outcome(d: Deployment, run_id: str, message: Message, expected: str) -> None:
    """The request's thread ends with ``expected``, once: the progress line, then the outcome, nothing more."""
    assert told(d, run_id, message)[1:] == [expected]


def told(d: Deployment, run_id: str, message: Message, replies: int = 2) -> list[str]:
    """The replies in the request's thread once the run's outbox is delivered (``replies``: at least)."""
    d.thread(message, replies)
    d.quiet(run_id)
    found = d.thread(message)
    assert len(found) == replies, found
    return found


# -- the run ends while it waits at the Jira point -------------------------------------------------------------

def test_rejected_by_a_jira_comment_or_transition(deploy: Deployment) -> None:
    d = deploy
    run_id = d.start()
    message, issue = d.at_jira(run_id)
    answer = d.comment(issue, "/reject the table is still read by reports")
    assert answer.status_code == 200 and answer.json()["decided"] == "reject", answer.text
    d.ended(run_id, RunStatus.REJECTED)
    outcome(d, run_id, message, f"⛔ Run `{run_id}` rejected by sam: the table is still read by reports")
    assert any("rejected" in b for b in d.jira.bodies(issue["id"])), d.jira.bodies(issue["id"])

    run_id = d.start()
    message, issue = d.at_jira(run_id)
    before = d.jira.set_status(issue["id"], "Rejected")
    moved = jira_payloads.transition_event(issue, "Rejected", before, SME, cloud=True, base=d.jira.base)
    answer = d.jira_send(moved)
    assert answer.status_code == 200 and answer.json()["decided"] == "reject", answer.text
    d.ended(run_id, RunStatus.REJECTED)
    [_, ended] = told(d, run_id, message)
    assert ended.startswith(f"⛔ Run `{run_id}` rejected by "), ended


def test_cancelled_by_slash_command_cli_and_rest(deploy: Deployment) -> None:
    d = deploy
    run_id = d.start()
    message, _ = d.at_jira(run_id)
    answer = d.sender.command(PRIYA, f"cancel {run_id} not this quarter", name="priya")
    assert answer.json()["text"] == f"🚫 Run `{run_id}` is cancelled.", answer.text
    outcome(d, run_id, message, f"🚫 Run `{run_id}` cancelled by <@{PRIYA}>: not this quarter")  # (a mention,
    # as a decider in Slack is named: s28 F10; the CLI's and REST's operator by name, below)

    run_id = d.start()
    message, _ = d.at_jira(run_id)
    d.cli("cancel", run_id, "--reason", "superseded")
    outcome(d, run_id, message, f"🚫 Run `{run_id}` cancelled by olga: superseded")

    run_id = d.start()
    message, issue = d.at_jira(run_id)
    response = d.http.post(f"/api/runs/{run_id}/cancel", json={"reason": "wrong database"})
    assert response.status_code == 200 and response.json()["status"] == "cancelled", response.text
    outcome(d, run_id, message, f"🚫 Run `{run_id}` cancelled by olga: wrong database")
    assert any("cancelled" in b for b in d.jira.bodies(issue["id"])), d.jira.bodies(issue["id"])


def test_completed_or_failed_after_the_jira_approval(deploy: Deployment) -> None:
    d = deploy
    run_id = d.start()
    message, issue = d.at_jira(run_id)
    assert d.comment(issue, "/approve").json()["decided"] == "approve"
    d.ended(run_id, RunStatus.COMPLETED)
    outcome(d, run_id, message, f"Ran `ship`. ✅ Run `{run_id}` of slack-then-jira completed.")
    assert d.jira.bodies(issue["id"])[-1] == f"(/) Run {run_id} completed after ship."

    run_id = d.start(fail=True)
    message, issue = d.at_jira(run_id)
    assert d.comment(issue, "/approve").json()["decided"] == "approve"
    d.ended(run_id, RunStatus.FAILED)
    [_, failed] = told(d, run_id, message)
    assert failed.startswith(f"❌ Run `{run_id}` failed at `ship`: RuntimeError: the deploy target is gone"), failed
    assert failed.endswith(f"An approver can `/hazel retry {run_id}`."), failed


# -- the run ends at its Slack point: told once ---------------------------------------------------------------

def test_ended_at_the_slack_point_is_told_once(deploy: Deployment) -> None:
    d = deploy
    run_id = d.start()
    message = d.slack_request(run_id)
    answer = d.sender.command(PRIYA, f"cancel {run_id} not now", name="priya")
    assert answer.json()["text"] == f"🚫 Run `{run_id}` is cancelled.", answer.text
    assert told(d, run_id, message, 1) == [f"🚫 Run `{run_id}` cancelled by <@{PRIYA}>: not now"]

    run_id = d.start()
    message = d.slack_request(run_id)
    response = d.http.post(f"/api/runs/{run_id}/decisions",
                           json={"action": "reject", "payload": {"reason": "too early"}})
    assert response.status_code == 201, response.text
    d.ended(run_id, RunStatus.REJECTED)
    assert told(d, run_id, message, 1) == [f"⛔ Run `{run_id}` rejected by olga: too early"]
    assert d.jira.issues == {}, "the run never asked on Jira"
