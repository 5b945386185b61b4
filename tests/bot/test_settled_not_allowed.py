"""May they, before was it settled: a person who may not take an action at a steering point is refused as not
allowed whether its request waits or was settled (decided or cancelled), on every channel, and the refusal is
audited as the other not-allowed refusals are; only a person who may is told who settled it and when.

End to end, through the real entry points of one deployment as ``hazel serve`` wires it (``tests.support.
deployment``): the REST API over real HTTP, the ``hazel`` CLI in-process on the same database, Slack clicks
and a modal submission (signed requests, the fake Slack Web API) and Jira comments (signed webhooks, the fake
Jira); then the engine itself for what only the request's row says (an escalation) and a run whose version is
not deployed (who may act there is not known: nobody is told who settled it).

The workflows are defined at the top level of this module, which the CLI loads by path (``HAZEL_WORKFLOWS``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from bot.cli import app as cli_app
from bot.engine.errors import AlreadyDecidedError, NotAllowedError, VersionUnavailableError
from bot.engine.workflow import Workflow
from store.models import Approvers, AuditEvent, RequestStatus, RunStatus, SteeringRequest
from tests.support import deployment, jira_payloads
from tests.support.clock import FakeClock
from tests.support.deployment import wait_for
from tests.support.engine import make_hazel, person

pytestmark = pytest.mark.usefixtures("wide_cli")  # (the CLI's tables do not wrap)

DEPLOYS = "C0000000002"
PRIYA_SLACK, ALICE_SLACK, OUTSIDER_SLACK = "U0000000001", "U0000000002", "U0000000005"
PRIYA_JIRA, ALICE_JIRA, STRANGER_JIRA = "557058:priya-p", "557058:alice-a", "557058:stranger-stu"
TOKENS = {"priya": "tok-priya-0123456789", "alice": "tok-alice-0123456789",
          "mallory": "tok-mallory-0123456789"}
"""REST API tokens by name: two approvers and mallory, who is none."""

PEOPLE = f"""
[people.priya]
slack = ["{PRIYA_SLACK}"]
jira = ["{PRIYA_JIRA}"]

[people.alice]
slack = ["{ALICE_SLACK}"]
jira = ["{ALICE_JIRA}"]
"""
SIGN_OFF = "Sign off the change"


# -- the workflows (loaded by the CLI from this file) --------------------------------------------------------------

class Change(BaseModel):
    text: str = "drop the legacy users table"
    shipped: bool = False


def sign_off_workflow(name: str, *, channel: str, approvers: Approvers, allow_self_approval: bool = True,
                      **options: Any) -> Workflow:
    """prepare -> sign_off (at ``channel``: approve, reject, rewind; one approval) -> ship."""
    wf = Workflow(name, state=Change)

    @wf.step
    def prepare(state: Change, ctx) -> Change:  # noqa: ANN001
        return state

    wf.steer("sign_off", title=SIGN_OFF, show="text", actions=["approve", "reject", "rewind"], channel=channel,
             approvers=approvers, allow_self_approval=allow_self_approval, **options)

    @wf.step
    def ship(state: Change, ctx) -> Change:  # noqa: ANN001
        return state.model_copy(update={"shipped": True})

    return wf


PAIR = Approvers(users=("priya", "alice"))
console_signoff = sign_off_workflow("console-signoff", channel="console", approvers=PAIR)
self_ban = sign_off_workflow("self-ban", channel="console", approvers=PAIR, allow_self_approval=False)
slack_signoff = sign_off_workflow("slack-signoff", channel="slack:#deploys",
                                  approvers=Approvers(people=("priya", "alice")))
jira_signoff = sign_off_workflow("jira-signoff", channel="jira:MIG", approvers=PAIR)

NOT_PRIYA_OR_ALICE = "only priya, alice may"


def may_not(who: str, verb: str) -> str:
    """The engine's refusal of ``who`` at the sign-off point, pending or settled alike."""
    rule = NOT_PRIYA_OR_ALICE + (", or who started the run" if verb == "rewind" else "")
    return f"{who} may not {verb} at '{SIGN_OFF}': {rule}"


# -- the deployment ------------------------------------------------------------------------------------------------

class Deployment(deployment.Deployment):
    """The deployment of this module's workflows, with its people file."""

    def __init__(self, db_url: str, tmp_path: Path) -> None:
        people_file = tmp_path / "people.toml"
        people_file.write_text(PEOPLE, encoding="utf-8")
        super().__init__(db_url, tmp_path, workflows=__file__, slack_channels={"deploys": DEPLOYS}, tokens=TOKENS,
                         env={"HAZEL_PEOPLE_FILE": str(people_file)})
        self.runner = CliRunner()

    def cli(self, *args: str, operator: str, code: int = 0):  # noqa: ANN201
        """``hazel ARGS`` as ``operator`` at the terminal; checks the exit code."""
        result = self.runner.invoke(cli_app, list(args), env={**self.env, "HAZEL_OPERATOR": operator})
        assert result.exit_code == code, (args, result.stdout, result.stderr, result.exception)
        return result

    def api(self, method: str, path: str, *, token: str, **kwargs: Any) -> httpx.Response:
        return self.http.request(method, path, headers={"Authorization": f"Bearer {TOKENS[token]}"}, **kwargs)

    def api_start(self, workflow: str, *, token: str) -> str:
        response = self.api("POST", "/api/runs", token=token, json={"workflow": workflow, "input": {}})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def api_decide(self, run_id: str, body: dict[str, Any], *, token: str, key: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {TOKENS[token]}", **({"Idempotency-Key": key} if key else {})}
        return self.http.post(f"/api/runs/{run_id}/decisions", json=body, headers=headers)

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

    def refusals(self, run_id: str) -> list[AuditEvent]:
        return [e for e in self.hazel.audit(run_id=run_id) if e.action == "decision.refused"]

    def ephemeral(self, user: str, contains: str, after: int = 0) -> dict[str, Any]:
        return wait_for(lambda: next((e for e in self.slack.ephemerals_for(user)[after:] if contains in e["text"]),
                                     None), f"an ephemeral for {user} containing {contains!r}")


@pytest.fixture
def deploy(db_url: str, tmp_path: Path) -> Iterator[Callable[[], Deployment]]:
    made: list[Deployment] = []

    def make() -> Deployment:
        made.append(Deployment(db_url, tmp_path))
        return made[-1]

    yield make
    for d in made:
        d.close()


def not_allowed_audit(event: AuditEvent, *, by: tuple[str, str], attempted: str, reason: str,
                      request_id: int) -> None:
    """``event`` is a not-allowed refusal as a pending request's is: the person, the action, the reason naming
    who may; no "already decided" rule, nobody named as having decided."""
    assert (event.channel, event.actor_id, event.request_id) == (*by, request_id)
    assert event.detail["attempted"] == attempted and event.detail["reason"] == reason, event.detail
    assert "rule" not in event.detail and "decided_by" not in event.detail, event.detail


# -- REST ----------------------------------------------------------------------------------------------------------

def test_rest_refuses_who_may_not_with_403_pending_or_settled_and_tells_who_may_409(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("console-signoff", token="alice")
    request = d.waiting(run_id)
    while_pending = d.api_decide(run_id, {"action": "approve", "request_id": request.id}, token="mallory")
    assert while_pending.status_code == 403, while_pending.text
    assert while_pending.json()["error"] == {"type": "NotAllowedError", "message": may_not("mallory", "approve")}

    first = d.api_decide(run_id, {"action": "approve", "request_id": request.id}, token="priya", key="k-1")
    assert first.status_code == 201, first.text
    d.completed(run_id)

    # settled: mallory gets the answer she got while it waited, naming the request or not, whatever she sends
    tries = [({"action": "approve", "request_id": request.id}, "approve"), ({"action": "approve"}, "approve"),
             ({"action": "reject", "payload": {"reason": "no"}, "request_id": request.id}, "reject"),
             ({"action": "reject", "payload": {"reason": "no"}}, "reject"),
             ({"action": "rewind", "payload": {"to": 0}, "request_id": request.id}, "rewind")]
    for body, verb in tries:
        response = d.api_decide(run_id, body, token="mallory")
        assert response.status_code == 403, (body, response.text)
        assert response.json()["error"] == {"type": "NotAllowedError", "message": may_not("mallory", verb)}, body
        assert "priya" not in response.text.replace(NOT_PRIYA_OR_ALICE, "")  # (who settled it: not said)
    refused = d.refusals(run_id)
    assert len(refused) == 1 + len(tries)
    for event, (_, verb) in zip(refused, [({}, "approve"), *tries]):
        not_allowed_audit(event, by=("api", "mallory"), attempted=verb, reason=may_not("mallory", verb),
                          request_id=request.id)

    # alice may approve there: she is told who settled it, when, how (409), audited as "already decided"
    late = d.api_decide(run_id, {"action": "approve", "request_id": request.id}, token="alice")
    assert late.status_code == 409, late.text
    error = late.json()["error"]
    assert error["type"] == "AlreadyDecidedError" and error["message"].startswith("already approved by priya at ")
    assert (error["decided_by"], error["action"], error["channel"]) == ("priya", "approve", "api")
    assert d.refusals(run_id)[-1].detail["rule"] == "already decided"

    # priya's retry of her own decision (the same Idempotency-Key) still gets her decision back
    again = d.api_decide(run_id, {"action": "approve", "request_id": request.id}, token="priya", key="k-1")
    assert again.status_code == 200 and again.json()["duplicate"] is True, again.text
    assert again.json()["decision"]["id"] == first.json()["decision"]["id"]
    assert len(d.hazel.decisions(run_id=run_id)) == 1 and len(d.refusals(run_id)) == len(refused) + 1


def test_rest_a_cancelled_request_is_refused_as_not_allowed_to_who_may_not(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("console-signoff", token="alice")
    request = d.waiting(run_id)
    assert d.api("POST", f"/api/runs/{run_id}/cancel", token="alice", json={}).status_code == 200

    response = d.api_decide(run_id, {"action": "approve", "request_id": request.id}, token="mallory")
    assert response.status_code == 403, response.text
    assert response.json()["error"] == {"type": "NotAllowedError", "message": may_not("mallory", "approve")}
    [event] = d.refusals(run_id)
    not_allowed_audit(event, by=("api", "mallory"), attempted="approve", reason=may_not("mallory", "approve"),
                      request_id=request.id)

    late = d.api_decide(run_id, {"action": "approve", "request_id": request.id}, token="priya")
    assert late.status_code == 409 and late.json()["error"]["message"].startswith("this request was cancelled ")
    assert "by alice" in late.json()["error"]["message"]


def test_rest_the_self_approval_ban_holds_once_someone_else_decided(deploy) -> None:  # noqa: ANN001
    """priya started the run under a self-approval ban and alice approved it: priya's approve is refused by
    the ban, as while it waited (403); her reject, which the ban allows, is told who decided (409)."""
    d: Deployment = deploy()
    run_id = d.api_start("self-ban", token="priya")
    request = d.waiting(run_id)
    assert d.api_decide(run_id, {"action": "approve"}, token="alice").status_code == 201
    d.completed(run_id)

    response = d.api_decide(run_id, {"action": "approve", "request_id": request.id}, token="priya")
    ban = (f"priya may not approve at '{SIGN_OFF}': priya started this run (self-approval is off: someone else "
           "must)")
    assert response.status_code == 403 and response.json()["error"]["message"] == ban, response.text
    reject = d.api_decide(run_id, {"action": "reject", "payload": {"reason": "no"}, "request_id": request.id},
                          token="priya")
    assert reject.status_code == 409, reject.text
    assert reject.json()["error"]["message"].startswith("already approved by alice at ")


# -- the CLI -------------------------------------------------------------------------------------------------------

def test_cli_refuses_who_may_not_once_the_request_is_settled(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("console-signoff", token="alice")  # (olga, the operator, did not start it)
    request = d.waiting(run_id)
    d.cli("approve", run_id, "--at", "sign_off", operator="priya")
    d.completed(run_id)

    for args, verb in [(("approve", run_id), "approve"), (("approve", run_id, "--at", "sign_off"), "approve"),
                       (("approve", run_id, "--request", str(request.id)), "approve"),
                       (("reject", run_id, "--reason", "no", "--request", str(request.id)), "reject"),
                       (("rewind", run_id, "--to", "0", "--request", str(request.id)), "rewind")]:
        refused = d.cli(*args, operator="olga", code=1)
        assert refused.stderr == f"error: {may_not('olga', verb)}\n" and refused.stdout == "", args
    as_json = json.loads(d.cli("approve", run_id, "--json", operator="olga", code=1).stdout)
    assert as_json == {"error": {"type": "NotAllowedError", "message": may_not("olga", "approve")}}
    events = d.refusals(run_id)
    assert len(events) == 6
    for event in events:
        not_allowed_audit(event, by=("console", "olga"), attempted=event.detail["attempted"],
                          reason=may_not("olga", event.detail["attempted"]), request_id=request.id)

    late = d.cli("approve", run_id, "--request", str(request.id), operator="alice", code=1)
    assert late.stderr.startswith("error: already approved by priya at "), late.stderr
    assert d.refusals(run_id)[-1].detail["rule"] == "already decided"
    assert len(d.hazel.decisions(run_id=run_id)) == 1


# -- Slack ---------------------------------------------------------------------------------------------------------

def test_slack_clicks_and_a_form_on_a_settled_request_refuse_who_may_not(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("slack-signoff", token="alice")
    request = d.waiting(run_id)
    message = d.slack.message(request.message_ref["channel"], request.message_ref["ts"])
    # clicks on the message as everyone saw it while it waited (the buttons were there)
    outsider_approve = d.sender.click_payload(OUTSIDER_SLACK, "approve", message, name="outsider")
    outsider_reject = d.sender.click_payload(OUTSIDER_SLACK, "reject", message, name="outsider")
    alice_reject = d.sender.click_payload(ALICE_SLACK, "reject", message, name="alice.s")
    priya_approve = d.sender.click_payload(PRIYA_SLACK, "approve", message, name="priya.s")
    d.sender.click(ALICE_SLACK, "reject", message, name="alice.s")  # a form opened while it waited
    form = wait_for(lambda: d.slack.views and d.slack.views[-1], "alice's reject form")

    assert d.sender.send_payload(priya_approve).status_code == 200
    d.completed(run_id)
    assert d.sender.send_payload(priya_approve, retry_num=1).status_code == 200  # Slack resends her click

    assert d.sender.send_payload(outsider_approve).status_code == 200
    told = d.ephemeral(OUTSIDER_SLACK, "may not")["text"]
    assert told == f"🚫 {may_not('outsider', 'approve')}", told
    before = len(d.slack.ephemerals_for(OUTSIDER_SLACK))
    assert d.sender.send_payload(outsider_reject).status_code == 200  # (a button that opens a form)
    told = d.ephemeral(OUTSIDER_SLACK, "may not", after=before)["text"]
    assert told == f"🚫 {may_not('outsider', 'reject')}", told
    assert len(d.slack.views) == 1  # no form opened for the outsider
    # alice's form, submitted by the outsider: the same refusal, under the form's field
    answer = d.sender.submit(OUTSIDER_SLACK, form, {"reason": "no"}, name="outsider")
    assert answer.json() == {"response_action": "errors", "errors": {"reason": may_not("outsider", "reject")}}

    refused = wait_for(lambda: len(d.refusals(run_id)) >= 3 and d.refusals(run_id), "three refusals")
    assert [(e.channel, e.actor_id, e.detail["attempted"]) for e in refused] == [
        ("slack", OUTSIDER_SLACK, "approve"), ("slack", OUTSIDER_SLACK, "reject"), ("slack", OUTSIDER_SLACK, "reject")]
    assert all("rule" not in e.detail and e.detail["reason"].startswith("outsider may not ") for e in refused)

    # alice may reject there: her click, and her form, are told who approved it and when
    assert d.sender.send_payload(alice_reject).status_code == 200
    assert d.ephemeral(ALICE_SLACK, "Already")["text"].startswith(f"Already approved by <@{PRIYA_SLACK}> at ")
    answer = d.sender.submit(ALICE_SLACK, form, {"reason": "no"}, name="alice.s")
    assert answer.json()["errors"]["reason"].startswith("Already approved by priya at ")
    assert len(d.slack.views) == 1
    [decision] = d.hazel.decisions(run_id=run_id)  # priya's click, once: its resend decided nothing more
    assert (decision.actor_id, decision.action.value) == (PRIYA_SLACK, "approve")
    assert not [e for e in d.refusals(run_id) if e.actor_id == PRIYA_SLACK]


# -- Jira ----------------------------------------------------------------------------------------------------------

def test_jira_commands_on_a_settled_issue_refuse_who_may_not(deploy) -> None:  # noqa: ANN001
    d: Deployment = deploy()
    run_id = d.api_start("jira-signoff", token="alice")
    request = d.waiting(run_id)
    issue = d.jira.issue(request.message_ref["issue_id"])

    def comment(body: str, who: str) -> dict[str, Any]:
        payload = jira_payloads.comment_event(issue, body, who, cloud=True, base=d.jira.base,
                                              display=who.split(":")[1])
        response = d.jira_send(payload)
        assert response.status_code == 200, response.text
        return response.json()

    assert comment("/approve", PRIYA_JIRA)["decided"] == "approve"
    d.completed(run_id)

    refused = comment("/approve", STRANGER_JIRA)["refused"]
    assert refused.startswith(f"{may_not('stranger-stu', 'approve')}. Nothing changed. Who may steer this "
                              "request: "), refused
    assert "already" not in refused.lower()
    [event] = d.refusals(run_id)
    not_allowed_audit(event, by=("jira", STRANGER_JIRA), attempted="approve",
                      reason=may_not("stranger-stu", "approve"), request_id=request.id)
    late = comment("/reject not yet", ALICE_JIRA)["refused"]
    assert late.startswith("already approved by priya at "), late


# -- the engine: what the request's row says, and a version that is not deployed -----------------------------------

def test_a_backup_approver_may_act_on_a_settled_request_only_where_its_row_says_it_was_escalated(
        db_url: str) -> None:
    clock = FakeClock()
    wf = sign_off_workflow("escalating", channel="console", approvers=Approvers(users=("ann",)),
                           escalate_to=Approvers(users=("lead",)), escalate_after_sec=3600)
    hazel = make_hazel(db_url, wf, clock=clock)

    def settled(*, escalate: bool) -> tuple[str, int]:
        run = hazel.start(workflow="escalating", input={}, actor=person("author"))
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
        request = hazel.pending_request(run_id=run.id)
        if escalate:
            clock.advance(3601)
            hazel.fire_request(request_id=request.id, now=clock())
            assert hazel.pending_request(run_id=run.id).escalated_at is not None
        hazel.decide(run_id=run.id, action="approve", actor=person("ann"))
        assert hazel.requests(run_id=run.id)[-1].status is RequestStatus.DECIDED
        return run.id, request.id

    quiet_run, quiet_request = settled(escalate=False)
    with pytest.raises(NotAllowedError, match=f"^lead may not reject at '{SIGN_OFF}': only ann may$"):
        hazel.decide(run_id=quiet_run, action="reject", actor=person("lead"), payload={"reason": "no"},
                     request_id=quiet_request)
    escalated_run, escalated_request = settled(escalate=True)
    with pytest.raises(AlreadyDecidedError, match="^already approved by ann at "):
        hazel.decide(run_id=escalated_run, action="reject", actor=person("lead"), payload={"reason": "no"},
                     request_id=escalated_request)


def test_a_settled_request_whose_version_is_not_deployed_names_nobody(db_url: str) -> None:
    """Who may act at a point of a version that is not deployed is not known here: nobody is told who settled
    its request, as a decision on a pending request of such a run is refused; Hazel's own actors are not
    asked."""
    old = make_hazel(db_url, sign_off_workflow("retired", channel="console", approvers=Approvers(users=("ann",))))
    run = old.start(workflow="retired", input={}, actor=person("author"))
    assert old.drive(run_id=run.id).run.status is RunStatus.WAITING
    request = old.pending_request(run_id=run.id)
    old.decide(run_id=run.id, action="approve", actor=person("ann"))
    new = make_hazel(db_url, _retired_v2())
    for who in ("ann", "mallory"):
        with pytest.raises(VersionUnavailableError, match="version 1, which is not deployed"):
            new.decide(run_id=run.id, action="approve", actor=person(who), request_id=request.id)
    assert [e.action for e in new.audit(run_id=run.id) if e.action.startswith("decision.")] == ["decision.approve"]


def _retired_v2() -> Workflow:
    """``retired`` v2, which declares no migration from v1."""
    wf = Workflow("retired", version=2, state=Change)

    @wf.step
    def prepare(state: Change, ctx) -> Change:  # noqa: ANN001
        return state

    return wf


def test_a_stale_pages_rewind_tells_how_the_run_moved_on_only_to_who_may_rewind(db_url: str) -> None:
    """A run page's rewind carries the head it showed (``expect_head``): when the run moved on since, who may
    rewind is told how (the last decision: who, when); who may not is refused as such, as on a fresh page."""
    hazel = make_hazel(db_url, console_signoff)
    run = hazel.start(workflow="console-signoff", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    seen = hazel.get(run_id=run.id).head_seq
    hazel.decide(run_id=run.id, action="approve", actor=person("priya"))
    hazel.drive(run_id=run.id)
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED

    with pytest.raises(NotAllowedError, match=f"^mallory may not rewind run {run.id}: only priya, alice may, or who "
                                              "started the run$"):
        hazel.rewind(run_id=run.id, actor=person("mallory"), to=0, expect_head=seen)
    with pytest.raises(AlreadyDecidedError, match=r"^the run changed since this page was loaded \(.*last approved "
                                                  "by priya at "):
        hazel.rewind(run_id=run.id, actor=person("alice"), to=0, expect_head=seen)
    refused = [e for e in hazel.audit(run_id=run.id) if e.action == "decision.refused"]
    assert [(e.actor_id, "rule" in e.detail) for e in refused] == [("mallory", False), ("alice", True)]


def test_what_a_person_may_do_on_a_settled_request_says_why_not_in_the_same_order(db_url: str) -> None:
    """``Hazel.access`` (the buttons and reasons channels render): nothing is allowed on a settled request; the
    reason for who may not act there is the permission's, for who may that it was settled (by whom)."""
    hazel = make_hazel(db_url, console_signoff)
    run = hazel.start(workflow="console-signoff", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    request = hazel.pending_request(run_id=run.id)
    hazel.decide(run_id=run.id, action="approve", actor=person("priya"))

    mallory = hazel.access(request_id=request.id, actor=person("mallory"))
    assert mallory.allowed == () and mallory.refused == {verb: may_not("mallory", verb)
                                                         for verb in ("approve", "reject", "rewind")}
    alice = hazel.access(request_id=request.id, actor=person("alice"))
    assert alice.allowed == () and set(alice.refused.values()) == {"this request was already approved by priya"}
