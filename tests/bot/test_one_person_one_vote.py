"""One person, one vote, on every channel: end to end, through the real entry points.

One deployment as ``hazel serve`` wires it (settings -> ``channels_from_settings`` / ``http_routers`` ->
``create_app``, a worker pool and the outbox deliverer in threads), served over real HTTP: the Slack app
(signed requests, the fake Slack Web API), the Jira webhook (signed webhooks, the fake Jira), the REST API
(bearer tokens); and the ``hazel`` CLI in-process on the same database and environment. A people file
(``HAZEL_PEOPLE_FILE``) ties each person's identities together.

- the bug report's two reproductions: ``hazel approve --as alice`` then alice's REST vote at a quorum point
  (refused 409: her second vote), and the console acting for the person who started the run around a
  self-approval ban (refused);
- the same person voting twice through Slack + REST, Slack + Jira and Jira + CLI (both orders for some):
  refused with a message naming the rule and the earlier vote, audited, the request still waiting for its
  other approval; what the person sees on each channel;
- a Slack user matched to a person by the email ``users.info`` shows;
- one person clicking in Slack and calling the API at once (one vote); a second vote through a Slack button
  that opens a form; a rewind by a person who voted; the console acting for a person's REST API name; what
  Slack and Jira say about approver lists naming people.

The workflows are defined at the top level of this module, which the CLI loads by path (``HAZEL_WORKFLOWS``).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from bot.cli import app as cli_app
from bot.engine.workflow import Workflow
from store.models import Approvers, AuditEvent, Decision, RequestStatus, RunStatus, SteeringRequest
from tests.support import jira_payloads
from tests.support import deployment
from tests.support.deployment import wait_for
from tests.support.fake_slack import Message

pytestmark = pytest.mark.usefixtures("wide_cli")  # (the CLI's tables do not wrap)

DEPLOYS = "C0000000002"
PRIYA_SLACK, ALICE_SLACK, OUTSIDER_SLACK, EMAIL_SLACK = "U0000000001", "U0000000002", "U0000000005", "U0000000009"
PRIYA_JIRA, ALICE_JIRA = "557058:priya-p", "557058:alice-a"
TOKENS = {"priya": "tok-priya-0123456789", "alice": "tok-alice-0123456789",
          "priya-ci": "tok-priya-ci-0123456789"}
"""REST API tokens by name: priya's and alice's own names (as in the bug report) and priya's CI token."""

PEOPLE = f"""
[people.priya]
email = "priya@example.com"
slack = ["{PRIYA_SLACK}"]
jira = ["{PRIYA_JIRA}"]
api = ["priya-ci"]

[people.alice]
slack = ["{ALICE_SLACK}"]
jira = ["{ALICE_JIRA}"]
"""
SIGN_OFF = "Sign off the change"


# -- the workflows (loaded by the CLI from this file) --------------------------------------------------------------

class Change(BaseModel):
    text: str = "drop the legacy users table"
    shipped: bool = False


def vote_workflow(name: str, *, channel: str, approvers: Approvers, approvals_required: int = 2,
                  allow_self_approval: bool = True, actions: tuple[str, ...] = ("approve", "reject")) -> Workflow:
    """prepare -> sign_off (at ``channel``) -> ship."""
    wf = Workflow(name, state=Change)

    @wf.step
    def prepare(state: Change, ctx) -> Change:  # noqa: ANN001
        return state

    wf.steer("sign_off", title=SIGN_OFF, show="text", actions=list(actions), channel=channel,
             approvers=approvers, approvals_required=approvals_required, allow_self_approval=allow_self_approval)

    @wf.step
    def ship(state: Change, ctx) -> Change:  # noqa: ANN001
        return state.model_copy(update={"shipped": True})

    return wf


console_pair = vote_workflow("console-pair", channel="console", approvers=Approvers(users=("priya", "alice")))
"""The bug report's point: a quorum of 2, approvers named by their console / REST API names."""
console_people = vote_workflow("console-people", channel="console", approvers=Approvers(people=("priya", "alice")))
"""The same point naming people, not console names: ``--as alice`` may not cast alice's vote there."""
self_ban = vote_workflow("self-ban", channel="console", approvers=Approvers(users=("priya", "alice")),
                         approvals_required=1, allow_self_approval=False)
slack_pair = vote_workflow("slack-pair", channel="slack:#deploys", approvers=Approvers(people=("priya", "alice")))
jira_pair = vote_workflow("jira-pair", channel="jira:MIG", approvers=Approvers(users=("priya", "alice")))
"""On Jira, approvers by console names: a listed identity stands for its person (priya decides from Jira)."""
jira_people = vote_workflow("jira-people", channel="jira:MIG", approvers=Approvers(people=("priya", "alice")))
console_ci = vote_workflow("console-ci", channel="console", approvers=Approvers(users=("priya-ci", "alice")))
"""Approvers by REST API names (``users`` are console and REST API names): priya's CI token name is listed."""
rewind_pair = vote_workflow("rewind-pair", channel="console", approvers=Approvers(users=("priya", "alice")),
                            actions=("approve", "reject", "rewind"))


# -- the deployment ------------------------------------------------------------------------------------------------

class Deployment(deployment.Deployment):
    """The deployment of this module's workflows, with its people file."""

    def __init__(self, db_url: str, tmp_path: Path, *, people: str, emails: dict[str, str] | None) -> None:
        people_file = tmp_path / "people.toml"
        people_file.write_text(people, encoding="utf-8")
        super().__init__(db_url, tmp_path, workflows=__file__, slack_channels={"deploys": DEPLOYS}, tokens=TOKENS,
                         emails=emails, env={"HAZEL_PEOPLE_FILE": str(people_file)})
        self.runner = CliRunner()

    # -- the CLI -----------------------------------------------------------------------------------------------

    def cli(self, *args: str, code: int | None = 0, operator: str = "olga"):  # noqa: ANN201
        """``hazel ARGS`` with this deployment's environment, as ``operator`` at the terminal; checks the exit
        code (None: 0 or 1, a one-line error)."""
        result = self.runner.invoke(cli_app, list(args), env={**self.env, "HAZEL_OPERATOR": operator})
        expected = (0, 1) if code is None else (code,)
        assert result.exit_code in expected, (args, result.stdout, result.stderr, result.exception)
        return result

    # -- the REST API ------------------------------------------------------------------------------------------

    def api(self, method: str, path: str, *, token: str, **kwargs: Any) -> httpx.Response:
        return self.http.request(method, path, headers={"Authorization": f"Bearer {TOKENS[token]}"}, **kwargs)

    def api_start(self, workflow: str, *, token: str) -> str:
        response = self.api("POST", "/api/runs", token=token, json={"workflow": workflow, "input": {}})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def api_approve(self, run_id: str, *, token: str) -> httpx.Response:
        return self.api("POST", f"/api/runs/{run_id}/decisions", token=token, json={"action": "approve"})

    # -- reading -----------------------------------------------------------------------------------------------

    def waiting(self, run_id: str) -> SteeringRequest:
        """The run's pending request, once the run waits on it and it was delivered (posted to its channel)."""
        def posted() -> SteeringRequest | None:
            request = self.hazel.pending_request(run_id=run_id)
            if request is None or self.hazel.get(run_id=run_id).status is not RunStatus.WAITING:
                return None
            return request if request.channel == "console" or request.message_ref else None

        return wait_for(posted, f"run {run_id} to wait on a delivered request")

    def completed(self, run_id: str) -> None:
        wait_for(lambda: self.hazel.get(run_id=run_id).status is RunStatus.COMPLETED, f"run {run_id} to complete")
        assert self.hazel.state_at(run_id=run_id).shipped is True

    def refusals(self, run_id: str) -> list[AuditEvent]:
        return [e for e in self.hazel.audit(run_id=run_id) if e.action == "decision.refused"]

    def slack_message(self, run_id: str) -> Message:
        ref = self.waiting(run_id).message_ref
        return self.slack.message(ref["channel"], ref["ts"])

    def ephemeral(self, user: str, contains: str) -> dict[str, Any]:
        return wait_for(lambda: next((e for e in self.slack.ephemerals_for(user) if contains in e["text"]), None),
                        f"an ephemeral for {user} containing {contains!r}")

    def home(self, user: str, *contains: str) -> dict[str, Any]:
        """``user``'s Home tab once it shows every text of ``contains``."""
        def shown() -> dict[str, Any] | None:
            home = self.slack.homes.get(user)
            return home if home is not None and all(c in str(home) for c in contains) else None

        return wait_for(shown, f"{user}'s Home tab showing {contains!r}")

    # -- Jira --------------------------------------------------------------------------------------------------

    def issue(self, run_id: str) -> dict[str, Any]:
        return self.jira.issue(self.waiting(run_id).message_ref["issue_id"])

    def comment(self, run_id: str, body: str, who: str) -> httpx.Response:
        payload = jira_payloads.comment_event(self.issue(run_id), body, who, cloud=True, base=self.jira.base,
                                              display=who.split(":")[1])
        return self.jira_send(payload)

    def replies_to(self, run_id: str, who: str) -> list[str]:
        """Comments Hazel wrote on the run's issue mentioning ``who``."""
        issue = self.issue(run_id)
        return [b for b in self.jira.bodies(issue["id"]) if b.startswith(f"[~accountid:{who}]")]


@pytest.fixture
def deploy(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    made: list[Deployment] = []

    def make(*, people: str = PEOPLE, emails: dict[str, str] | None = None) -> Deployment:
        deployment = Deployment(db_url, tmp_path, people=people, emails=emails)
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.close()


def when(d: Decision) -> str:
    return f"{d.created_at:%Y-%m-%d %H:%M} UTC"


def second_vote(person: str, through: str, earlier: Decision) -> str:
    """The engine's refusal of ``person``'s second vote, ``earlier`` being their first."""
    return (f"{person} already approved this request through {through} at {when(earlier)}: one person has one "
            "vote, whichever channel they use; 1 of 2 approvals so far")


def already_voted(earlier: Decision) -> str:
    """What Slack tells a person whose earlier vote (``earlier``) counted, the request needing more approvals (the
    time in the reader's time zone)."""
    through = {"api": "the API", "jira": "Jira", "console": "the CLI"}.get(earlier.channel, earlier.channel)
    return (f"You already approved this request through {through} ({earlier.actor_id}) at "
            f"<!date^{int(earlier.created_at.timestamp())}^{{time}}|{earlier.created_at:%Y-%m-%d %H:%M} UTC>: one "
            "person has one vote, whichever channel they use; it still needs more approvals.")


def still_one_of_two(d: Deployment, run_id: str, request: SteeringRequest) -> None:
    """The request still waits for its other approval: one vote counted, the run waiting, one decision."""
    now = d.hazel.pending_request(run_id=run_id)
    assert now is not None and now.id == request.id and now.status is RequestStatus.PENDING
    assert (now.approvals, now.approvals_required) == (1, 2)
    assert d.hazel.get(run_id=run_id).status is RunStatus.WAITING
    assert len(d.hazel.decisions(run_id=run_id)) == 1


def audited_second_vote(d: Deployment, run_id: str, message: str, *, by: tuple[str, str], person: str) -> None:
    """The last refusal recorded is this second vote, naming the rule and the earlier decision."""
    [first] = d.hazel.decisions(run_id=run_id)
    refused = d.refusals(run_id)[-1]
    assert (refused.channel, refused.actor_id, refused.person) == (*by, person)
    assert refused.detail["attempted"] == "approve" and refused.detail["reason"] == message
    assert refused.detail["rule"] == "one vote per person" and refused.detail["earlier_decision"] == first.id


# -- the bug report's two reproductions ----------------------------------------------------------------------------

def test_bug_report_console_vote_for_alice_then_her_api_vote_is_refused(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = json.loads(d.cli("run", "console-pair", "--json").stdout)["run"]["id"]
    request = d.waiting(run_id)
    assert request.point == "sign_off" and request.approvals_required == 2

    voted = d.cli("approve", run_id, "--at", "sign_off", "--as", "alice")
    assert "approval recorded: 1 of 2; waiting for more approvers" in voted.stdout
    [first] = d.hazel.decisions(run_id=run_id)
    assert (first.channel, first.actor_id, first.person, first.acting_for) == ("console", "olga", "alice", "alice")

    response = d.api_approve(run_id, token="alice")
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    message = second_vote("alice", "the console (operator olga for alice)", first)
    assert error["type"] == "AlreadyDecidedError" and error["message"] == message
    assert error["decided_by"] == "operator olga for alice" and error["channel"] == "console"
    assert error["action"] == "approve"
    audited_second_vote(d, run_id, message, by=("api", "alice"), person="alice")
    still_one_of_two(d, run_id, request)
    # s23 F3: whatever she sends now (a rejection without its reason, or a blank one), she is told she voted,
    # not sent to fix a payload for a decision she can no longer take
    for body in ({"action": "reject"}, {"action": "reject", "payload": {"reason": " "}}):
        again = d.api("POST", f"/api/runs/{run_id}/decisions", token="alice", json=body)
        assert again.status_code == 409 and again.json()["error"]["message"] == message, again.text
    still_one_of_two(d, run_id, request)

    settled = d.api_approve(run_id, token="priya")
    assert settled.status_code == 201, settled.text
    assert settled.json()["settled"] is True
    d.completed(run_id)
    assert [(x.channel, x.actor_id, x.person) for x in d.hazel.decisions(run_id=run_id)] == [
        ("console", "olga", "alice"), ("api", "priya", "priya")]


def test_bug_report_console_may_not_vote_for_alice_where_users_do_not_list_her(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = json.loads(d.cli("run", "console-people", "--json").stdout)["run"]["id"]
    request = d.waiting(run_id)

    refused = d.cli("approve", run_id, "--at", "sign_off", "--as", "alice", code=1)
    message = (f"the console may not approve for alice at '{SIGN_OFF}': the point has a quorum, so alice decides "
               "through their own identity (or the point lists 'alice' in its console users)")
    assert refused.stderr == f"error: {message}\n" and refused.stdout == ""
    assert d.hazel.decisions(run_id=run_id) == []
    [audit] = d.refusals(run_id)
    assert (audit.channel, audit.actor_id, audit.person) == ("console", "olga", "alice")
    assert audit.detail["acting_for"] == "alice" and audit.detail["reason"] == message
    assert d.hazel.pending_request(run_id=run_id).approvals == 0

    own = d.api_approve(run_id, token="alice")  # her own identity: her vote
    assert own.status_code == 201 and own.json()["settled"] is False
    assert own.json()["request"]["approvals"] == 1 and own.json()["request"]["id"] == request.id
    assert d.api_approve(run_id, token="priya").status_code == 201
    d.completed(run_id)


def test_bug_report_self_approval_ban_holds_through_the_api_and_the_console(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("self-ban", token="priya")
    request = d.waiting(run_id)
    run = d.hazel.get(run_id=run_id)
    assert (run.started_by, run.started_via, run.started_by_person) == ("priya", "api", "priya")

    response = d.api_approve(run_id, token="priya")
    assert response.status_code == 403, response.text
    ban = f"may not approve at '{SIGN_OFF}': priya started this run (self-approval is off: someone else must)"
    assert response.json()["error"] == {"type": "NotAllowedError", "message": f"priya {ban}"}

    for_her = d.cli("approve", run_id, "--at", "sign_off", "--as", "priya", code=1)
    assert for_her.stderr == f"error: operator olga for priya {ban}\n"
    herself = d.cli("approve", run_id, "--at", "sign_off", operator="priya", code=1)  # at the terminal herself
    assert herself.stderr == f"error: priya {ban}\n"
    ci = d.api_approve(run_id, token="priya-ci")  # another identity of hers
    assert ci.status_code == 403 and ci.json()["error"]["message"] == f"priya {ban}"  # (her, by name)
    # her token's name at the console is her too (console and REST API names are one namespace)
    as_ci = d.cli("approve", run_id, "--at", "sign_off", operator="priya-ci", code=1)
    assert as_ci.stderr == f"error: priya {ban}\n"

    assert d.hazel.decisions(run_id=run_id) == []
    assert [(e.channel, e.actor_id, e.person) for e in d.refusals(run_id)] == [
        ("api", "priya", "priya"), ("console", "olga", "priya"), ("console", "priya", "priya"),
        ("api", "priya-ci", "priya"), ("console", "priya-ci", "priya")]
    assert not [e for e in d.hazel.audit(run_id=run_id)
                if e.action.startswith("decision.") and e.action != "decision.refused"]
    assert d.hazel.pending_request(run_id=run_id).id == request.id

    assert d.api_approve(run_id, token="alice").status_code == 201  # someone else may
    d.completed(run_id)


# -- the same person through two channels --------------------------------------------------------------------------

def test_slack_then_rest_and_rest_then_slack(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()

    # Slack first: the REST vote is refused with 409
    run_id = d.api_start("slack-pair", token="alice")
    request = d.waiting(run_id)
    message = d.slack_message(run_id)
    assert message.channel == DEPLOYS
    d.sender.click(PRIYA_SLACK, "approve", message, name="priya.s")
    d.ephemeral(PRIYA_SLACK, "Your approval is counted: 1 of 2.")
    [first] = d.hazel.decisions(run_id=run_id)
    assert (first.channel, first.actor_id, first.person) == ("slack", PRIYA_SLACK, "priya")

    response = d.api_approve(run_id, token="priya-ci")
    assert response.status_code == 409, response.text
    text = second_vote("priya", f"slack ({PRIYA_SLACK})", first)
    assert response.json()["error"]["message"] == text and response.json()["error"]["channel"] == "slack"
    audited_second_vote(d, run_id, text, by=("api", "priya-ci"), person="priya")
    still_one_of_two(d, run_id, request)
    d.sender.click(ALICE_SLACK, "approve", message, name="alice.s")
    d.completed(run_id)

    # REST first: the Slack click is refused and she is told so, only her
    run_id = d.api_start("slack-pair", token="alice")
    request = d.waiting(run_id)
    message = d.slack_message(run_id)
    counted = d.api_approve(run_id, token="priya")
    assert counted.status_code == 201 and counted.json()["settled"] is False
    [first] = d.hazel.decisions(run_id=run_id)
    before = len(d.slack.ephemerals_for(PRIYA_SLACK))
    d.sender.click(PRIYA_SLACK, "approve", message, name="priya.s")
    told = wait_for(lambda: d.slack.ephemerals_for(PRIYA_SLACK)[before:], "the answer to priya's second click")
    assert [e["text"] for e in told] == [already_voted(first)]
    assert told[0]["channel"] == DEPLOYS
    audited_second_vote(d, run_id, second_vote("priya", "api (priya)", first), by=("slack", PRIYA_SLACK),
                        person="priya")
    still_one_of_two(d, run_id, request)
    d.sender.click(ALICE_SLACK, "approve", message, name="alice.s")
    d.completed(run_id)
    assert [(x.channel, x.person) for x in d.hazel.decisions(run_id=run_id)] == [("api", "priya"),
                                                                                ("slack", "alice")]


def test_slack_then_jira_and_jira_then_slack(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()

    # Slack first (the Home tab lists the Jira request as waiting on her), then a Jira comment
    run_id = d.api_start("jira-pair", token="alice")
    request = d.waiting(run_id)
    assert d.sender.home_opened(PRIYA_SLACK).status_code == 200
    home = d.home(PRIYA_SLACK, "Waiting on you (1)")
    d.sender.send_payload(d.sender.home_click_payload(PRIYA_SLACK, "approve", home, request.id, name="priya.s"))
    d.home(PRIYA_SLACK, "Your approval is counted: 1 of 2.")
    [first] = d.hazel.decisions(run_id=run_id)
    assert (first.channel, first.actor_id, first.person) == ("slack", PRIYA_SLACK, "priya")

    answer = d.comment(run_id, "/approve", PRIYA_JIRA)
    assert answer.status_code == 200, answer.text
    text = second_vote("priya", f"slack ({PRIYA_SLACK})", first)
    reply = f"{text}. Nothing changed. The request is still open."
    assert answer.json() == {"refused": reply}
    assert d.replies_to(run_id, PRIYA_JIRA) == [f"[~accountid:{PRIYA_JIRA}] {reply}"]
    audited_second_vote(d, run_id, text, by=("jira", PRIYA_JIRA), person="priya")
    still_one_of_two(d, run_id, request)
    # moving the issue to the approve status is a vote too: refused, and the issue goes back
    issue = d.issue(run_id)
    before = d.jira.set_status(issue["id"], "Approved")
    moved = jira_payloads.transition_event(issue, "Approved", before, PRIYA_JIRA, cloud=True, base=d.jira.base)
    answer = d.jira_send(moved)
    reply = f"{text}. Nothing changed. The request is still open. Hazel moved the issue back to {before}."
    assert answer.status_code == 200 and answer.json() == {"refused": reply}
    assert d.replies_to(run_id, PRIYA_JIRA)[-1] == f"[~accountid:{PRIYA_JIRA}] {reply}"
    assert d.jira.status(issue["id"]) == before
    audited_second_vote(d, run_id, text, by=("jira", PRIYA_JIRA), person="priya")
    still_one_of_two(d, run_id, request)
    assert d.comment(run_id, "/approve", ALICE_JIRA).json()["decided"] == "approve"
    d.completed(run_id)

    # Jira first, then a button of her Slack Home tab opened before: the refusal is shown atop her Home tab
    run_id = d.api_start("jira-pair", token="alice")
    request = d.waiting(run_id)
    assert d.sender.home_opened(PRIYA_SLACK).status_code == 200
    stale = d.home(PRIYA_SLACK, f"run `{run_id}`", "Waiting on you (1)")
    assert d.comment(run_id, "/approve", PRIYA_JIRA).json()["decided"] == "approve"
    [first] = d.hazel.decisions(run_id=run_id)
    assert (first.channel, first.actor_id, first.person) == ("jira", PRIYA_JIRA, "priya")
    assert d.sender.home_opened(PRIYA_SLACK).status_code == 200
    d.home(PRIYA_SLACK, "Waiting on you (0)")  # her Jira vote was hers in Slack too: nothing waits on her
    d.sender.send_payload(d.sender.home_click_payload(PRIYA_SLACK, "approve", stale, request.id, name="priya.s"))
    d.home(PRIYA_SLACK, f"You already approved this request through Jira ({PRIYA_JIRA}) at")
    assert "it still needs more approvals." in str(d.slack.homes[PRIYA_SLACK])
    audited_second_vote(d, run_id, second_vote("priya", f"jira ({PRIYA_JIRA})", first), by=("slack", PRIYA_SLACK),
                        person="priya")
    still_one_of_two(d, run_id, request)
    assert d.comment(run_id, "/approve", ALICE_JIRA).json()["decided"] == "approve"
    d.completed(run_id)


def test_jira_then_the_cli(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("jira-pair", token="alice")
    request = d.waiting(run_id)
    assert d.comment(run_id, "/approve", PRIYA_JIRA).json()["decided"] == "approve"
    [first] = d.hazel.decisions(run_id=run_id)
    text = second_vote("priya", f"jira ({PRIYA_JIRA})", first)

    herself = d.cli("approve", run_id, "--at", "sign_off", operator="priya", code=1)  # priya at the terminal
    assert herself.stderr == f"error: {text}\n" and herself.stdout == ""
    audited_second_vote(d, run_id, text, by=("console", "priya"), person="priya")
    for_her = d.cli("approve", run_id, "--at", "sign_off", "--as", "priya", code=1)  # the point lists her
    assert for_her.stderr == f"error: {text}\n"
    audited_second_vote(d, run_id, text, by=("console", "olga"), person="priya")
    assert d.refusals(run_id)[-1].detail["acting_for"] == "priya"
    json_error = json.loads(
        d.cli("approve", run_id, "--at", "sign_off", "--json", operator="priya", code=1).stdout)
    assert json_error == {"error": {"type": "AlreadyDecidedError", "message": text}}
    still_one_of_two(d, run_id, request)

    assert d.comment(run_id, "/approve", ALICE_JIRA).json()["decided"] == "approve"
    d.completed(run_id)
    assert len(d.refusals(run_id)) == 3


# -- a Slack user matched by email ---------------------------------------------------------------------------------

EMAIL_PEOPLE = f"""
[people.priya]
email = "priya@example.com"

[people.alice]
slack = ["{ALICE_SLACK}"]
"""


def test_a_token_name_at_the_console_and_a_console_name_as_a_token_are_one_person(deploy) -> None:  # noqa: ANN001
    """Console and REST API names are one namespace: priya's token name typed as the operator's name is priya,
    so her API vote and a console vote under that name are one vote (as a fresh user found, they were two)."""
    d: Deployment = deploy()
    run_id = json.loads(d.cli("run", "console-ci", "--json").stdout)["run"]["id"]
    request = d.waiting(run_id)
    assert d.api_approve(run_id, token="priya-ci").status_code == 201
    [first] = d.hazel.decisions(run_id=run_id)
    assert (first.channel, first.actor_id, first.person) == ("api", "priya-ci", "priya")
    text = second_vote("priya", "api (priya-ci)", first)
    as_token_name = d.cli("approve", run_id, "--at", "sign_off", operator="priya-ci", code=1)
    assert as_token_name.stderr == f"error: {text}\n"
    audited_second_vote(d, run_id, text, by=("console", "priya-ci"), person="priya")
    still_one_of_two(d, run_id, request)


def test_a_slack_user_with_a_persons_email_is_that_person(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy(people=EMAIL_PEOPLE, emails={EMAIL_SLACK: "Priya@Example.COM",
                                                        OUTSIDER_SLACK: "someone@example.com",
                                                        ALICE_SLACK: "alice@example.com"})
    run_id = d.api_start("slack-pair", token="alice")
    request = d.waiting(run_id)
    message = d.slack_message(run_id)

    d.sender.click(OUTSIDER_SLACK, "approve", message, name="outsider")  # another email: not priya
    refusal = d.ephemeral(OUTSIDER_SLACK, "🚫")["text"]
    assert refusal == f"🚫 outsider may not approve at '{SIGN_OFF}': only priya, alice may"
    assert d.refusals(run_id)[-1].person == f"slack:{OUTSIDER_SLACK}"
    # s23 F8: a stranger whose Slack user name is a person's is shown with their id, never as that person
    d.sender.click(OUTSIDER_SLACK, "approve", message, name="priya")
    refusal = d.ephemeral(OUTSIDER_SLACK, "not the person")["text"]
    assert refusal == (f"🚫 priya (Slack {OUTSIDER_SLACK}, not the person priya) may not approve at '{SIGN_OFF}': "
                       "only priya, alice may"), refusal
    assert d.refusals(run_id)[-1].person == f"slack:{OUTSIDER_SLACK}"
    for name in ("Priya", "PRIYA ", "pri\u200bya", "p r i y a", "\uff50\uff52\uff49\uff59\uff41"):
        before = len(d.slack.ephemerals_for(OUTSIDER_SLACK))  # (s30 F8, s31 F10: only the exact name was shown
        d.sender.click(OUTSIDER_SLACK, "approve", message, name=name)  # with the id; the mark named the lookalike)
        refusal = wait_for(lambda: d.slack.ephemerals_for(OUTSIDER_SLACK)[before:], "the refusal")[0]["text"]
        assert f"(Slack {OUTSIDER_SLACK}, not the person priya) may not approve" in refusal, refusal
    # (s30 F3, F9: a NUL in a name failed every action of that person on PostgreSQL; a line break forged rows)
    d.sender.click(OUTSIDER_SLACK + "\n", "approve", message, name="bad\x00na\nme")
    refusal = d.ephemeral(OUTSIDER_SLACK + "\n", "may not approve")["text"]
    assert refusal.startswith("🚫 bad\ufffdna\ufffdme may not approve"), refusal
    assert d.refusals(run_id)[-1].person == f"slack:{OUTSIDER_SLACK}\ufffd"

    d.sender.click(EMAIL_SLACK, "approve", message, name="pkumar")
    d.ephemeral(EMAIL_SLACK, "Your approval is counted: 1 of 2.")
    [first] = d.hazel.decisions(run_id=run_id)
    assert (first.channel, first.actor_id, first.person) == ("slack", EMAIL_SLACK, "priya")
    [approved] = [e for e in d.hazel.audit(run_id=run_id) if e.action == "decision.approve"]
    assert (approved.person, approved.channel, approved.actor_id) == ("priya", "slack", EMAIL_SLACK)
    audit = d.cli("audit", run_id).stdout
    row = next(line for line in audit.splitlines() if "decision.approve" in line)
    assert "priya" in row and f"slack {EMAIL_SLACK}" in row, audit
    asked = [c.params.get("user") for c in d.slack.calls_to("users.info")]
    assert EMAIL_SLACK in asked and OUTSIDER_SLACK in asked

    response = d.api_approve(run_id, token="priya")
    assert response.status_code == 409, response.text
    text = second_vote("priya", f"slack ({EMAIL_SLACK})", first)
    assert response.json()["error"]["message"] == text
    audited_second_vote(d, run_id, text, by=("api", "priya"), person="priya")
    still_one_of_two(d, run_id, request)

    d.sender.click(ALICE_SLACK, "approve", message, name="alice.s")
    d.completed(run_id)
    assert ALICE_SLACK not in [c.params.get("user") for c in d.slack.calls_to("users.info")]  # claimed: not asked


# -- more ways to vote twice ---------------------------------------------------------------------------------------

def test_while_slack_cannot_say_a_users_email_their_click_decides_nothing(deploy) -> None:  # noqa: ANN001
    """s23 F7 (HIGH): while ``users.info`` failed (nothing cached: a fresh process), a person matched by email
    was taken for a stranger on Slack: her Slack click counted as a second person's vote after her API vote (a
    quorum of two completed by one human), and approved her own run where self-approval is off. The click is
    refused now, saying why; once Slack answers, she is herself again."""
    d: Deployment = deploy(people=EMAIL_PEOPLE, emails={EMAIL_SLACK: "priya@example.com"})
    run_id = d.api_start("slack-pair", token="alice")
    request = d.waiting(run_id)
    message = d.slack_message(run_id)
    assert d.api_approve(run_id, token="priya").status_code == 201  # priya's vote: 1 of 2
    d.slack.fail("users.info", error="internal_error", times=None)
    d.sender.click(EMAIL_SLACK, "approve", message, name="pkumar")
    said = d.ephemeral(EMAIL_SLACK, "nothing was done")["text"]
    assert said == (f"I could not check who you are in Slack, so nothing was done: Slack could not tell who user "
                    f"{EMAIL_SLACK} is (users.info: internal_error), which Hazel needs to match them with a "
                    "person of the people file. Please try again."), said
    still_one_of_two(d, run_id, request)
    d.slack.clear_failures()
    d.sender.click(EMAIL_SLACK, "approve", message, name="pkumar")
    d.ephemeral(EMAIL_SLACK, "one person has one vote")  # herself: her API vote counted already
    still_one_of_two(d, run_id, request)


def test_the_console_acting_for_an_api_name_of_a_person_is_that_person(deploy) -> None:  # noqa: ANN001
    """``--as priya-ci`` names priya by her REST API identity, which the point lists in its users: whether the
    console casts her vote or is refused, her token may not then add a second one."""
    d: Deployment = deploy()
    run_id = json.loads(d.cli("run", "console-ci", "--json").stdout)["run"]["id"]
    request = d.waiting(run_id)
    d.cli("approve", run_id, "--at", "sign_off", "--as", "priya-ci", code=None)  # recorded, or refused (exit 1)
    d.api_approve(run_id, token="priya-ci")
    votes = [(x.channel, x.actor_id, x.person) for x in d.hazel.decisions(run_id=run_id)]
    assert len(votes) <= 1, f"one person, two votes: {votes}"
    still = d.hazel.pending_request(run_id=run_id)
    assert still is not None and still.id == request.id and still.approvals <= 1


def test_one_person_clicking_in_slack_and_calling_the_api_at_once_has_one_vote(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("slack-pair", token="alice")
    request = d.waiting(run_id)
    click = d.sender.click_payload(PRIYA_SLACK, "approve", d.slack_message(run_id), name="priya.s")
    barrier = threading.Barrier(3)
    statuses: list[int] = []

    def api(token: str) -> None:
        barrier.wait()
        statuses.append(d.api_approve(run_id, token=token).status_code)

    def slack() -> None:
        barrier.wait()
        statuses.append(d.sender.send_payload(click).status_code)

    threads = [threading.Thread(target=api, args=(t,)) for t in ("priya", "priya-ci")]
    threads.append(threading.Thread(target=slack))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_for(lambda: len(d.refusals(run_id)) == 2, "two refused votes")
    [vote] = d.hazel.decisions(run_id=run_id)
    assert vote.person == "priya"
    assert sorted(statuses) == ([200, 201, 409] if vote.channel == "api" else [200, 409, 409])  # Slack: 200
    assert all(e.detail["rule"] == "one vote per person" and e.detail["earlier_decision"] == vote.id
               for e in d.refusals(run_id))
    still_one_of_two(d, run_id, request)


def test_a_second_vote_through_a_slack_modal_button_names_the_earlier_vote(deploy) -> None:  # noqa: ANN001
    """Reject (a button that opens a form) after her REST approval: refused like any second vote."""
    d: Deployment = deploy()
    run_id = d.api_start("slack-pair", token="alice")
    request = d.waiting(run_id)
    message = d.slack_message(run_id)
    assert d.api_approve(run_id, token="priya").status_code == 201
    [first] = d.hazel.decisions(run_id=run_id)

    d.sender.click(PRIYA_SLACK, "reject", message, name="priya.s")
    told = d.ephemeral(PRIYA_SLACK, "already")["text"]
    assert d.slack.views == []  # no form opened
    still_one_of_two(d, run_id, request)
    refused = d.refusals(run_id)[-1]
    assert (refused.channel, refused.actor_id, refused.person) == ("slack", PRIYA_SLACK, "priya")
    assert refused.detail["attempted"] == "reject"
    assert refused.detail["reason"] == second_vote("priya", "api (priya)", first), refused.detail
    assert refused.detail.get("rule") == "one vote per person", refused.detail
    assert refused.detail.get("earlier_decision") == first.id, refused.detail
    assert told == already_voted(first), told


def test_a_person_who_voted_may_still_rewind_as_the_engine_offers(deploy) -> None:  # noqa: ANN001
    """``Hazel.access`` keeps rewind open to a person who already voted (one vote is about votes)."""
    d: Deployment = deploy()
    run_id = d.api_start("rewind-pair", token="alice")
    request = d.waiting(run_id)
    assert d.api_approve(run_id, token="priya").status_code == 201
    priya = d.hazel.identify(channel="api", id="priya", name="priya")
    assert d.hazel.access(request_id=request.id, actor=priya).allowed == ("rewind",)

    response = d.api("POST", f"/api/runs/{run_id}/decisions", token="priya",
                     json={"action": "rewind", "payload": {"to": "prepare"}})
    assert response.status_code == 201, response.text
    again = d.waiting(run_id)
    assert again.id != request.id and d.hazel.get(run_id=run_id).branch == 1


# -- what the channels say about people-level approver lists -------------------------------------------------------

def test_a_slack_request_names_the_people_who_may_decide(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("slack-pair", token="alice")
    message = d.slack_message(run_id)
    approvers = next(e["text"] for b in message.blocks if b["type"] == "context" for e in b["elements"]
                     if e.get("text", "").startswith("Approvers:"))
    # (a person with a Slack identity is their mention, which Slack shows as their name)
    assert "anyone" not in approvers and f"<@{PRIYA_SLACK}>" in approvers and f"<@{ALICE_SLACK}>" in approvers, \
        approvers


def test_a_jira_request_names_the_people_who_may_decide(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("jira-people", token="alice")
    issue = d.issue(run_id)
    line = next(x for x in issue["fields"]["description"].splitlines() if x.startswith("*Who may decide:*"))
    assert "priya" in line and "alice" in line, line


def test_a_jira_refusal_names_the_people_who_may_decide(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("jira-people", token="alice")
    answer = d.comment(run_id, "/approve", "557058:stranger-stu")
    assert answer.status_code == 200
    refused = answer.json()["refused"]
    assert refused.startswith(f"stranger-stu may not approve at '{SIGN_OFF}': only priya, alice may. Nothing "
                              "changed. Who may steer this request: "), refused
    who = refused.split("Who may steer this request: ")[1]
    assert "priya" in who and "alice" in who, refused


def test_a_comment_on_an_issue_left_approved_by_a_partial_vote_is_no_vote(deploy) -> None:  # noqa: ANN001
    """Fresh-user s20 HIGH 2: after priya's move to Approved counted 1 of 2 (the issue stays there), alice's plain
    comment, whose payload shows the issue in Approved, was read as her move to Approved: her objection completed
    the quorum and the run went on. It is a comment (this point takes no feedback: ignored); her /approve votes."""
    d: Deployment = deploy()
    run_id = d.api_start("jira-pair", token="alice")
    request = d.waiting(run_id)
    issue = d.issue(run_id)
    before = d.jira.set_status(issue["id"], "Approved")
    moved = jira_payloads.transition_event(issue, "Approved", before, PRIYA_JIRA, cloud=True, base=d.jira.base)
    assert d.jira_send(moved).json()["decided"] == "approve"
    still_one_of_two(d, run_id, request)
    assert d.jira.status(issue["id"]) == "Approved"  # (left there: the quorum's first vote)
    objection = d.comment(run_id, "I have concerns: add a rollback check first", ALICE_JIRA)
    assert objection.status_code == 200 and objection.json() == {"ignored": "a comment, not a decision"}, \
        objection.text
    still_one_of_two(d, run_id, request)
    assert [x.person for x in d.hazel.decisions(run_id=run_id)] == ["priya"]
    assert d.comment(run_id, "/approve", ALICE_JIRA).json()["decided"] == "approve"
    d.completed(run_id)
