"""The Jira channel against Jira's REST API faked with ``responses`` (``tests/support/fake_jira.py``)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest
import requests
import responses

from integrations.base import DeliveryError, PermanentDeliveryError
from integrations.jira import JiraChannel, JiraDirectory, point_label
from store.models import (
    Action,
    Approvers,
    CheckpointInfo,
    Decision,
    ProgressView,
    RequestStatus,
    RequestView,
    RewindChoices,
    Run,
    RunStatus,
    SteeringRequest,
)
from tests.support.fake_jira import FakeJira

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
SCRIPTS = {"001_email.up.sql": "ALTER TABLE users ADD COLUMN email_new TEXT;\n",
           "001_email.down.sql": "ALTER TABLE users DROP COLUMN email_new;\n"}


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture(params=["cloud", "server"])
def fake(request: pytest.FixtureRequest, rsps: responses.RequestsMock) -> FakeJira:
    return FakeJira(rsps, cloud=request.param == "cloud")


def run(status: RunStatus = RunStatus.WAITING, run_id: str = "a1b2c3d4e5f6") -> Run:
    return Run(id=run_id, workflow="migration-plan", workflow_version=1, status=status, head_seq=3,
               last_seq=3, branch=0, started_by="priya", started_via="console", created_at=NOW, updated_at=NOW)


def request(*, id: int = 7, status: RequestStatus = RequestStatus.PENDING, ref: dict | None = None,
            action: str | None = None, approvals: int = 0, required: int = 1) -> SteeringRequest:
    return SteeringRequest(
        id=id, run_id="a1b2c3d4e5f6", checkpoint_seq=3, point="review_artefacts", title="Review the migration scripts",
        channel="jira:MIG", status=status, approvals_required=required, approvals=approvals, created_at=NOW,
        decided_at=NOW if status is not RequestStatus.PENDING else None, decided_by="Sam SME" if action else None,
        decided_action=action, message_ref=ref, message_key=ref.get("key") if ref else None)


def view(req: SteeringRequest, *, options: dict[str, Any] | None = None, decisions: tuple[Decision, ...] = (),
         approvers: Approvers | None = None, shown: Any = None, of_run: Run | None = None,
         **kw: Any) -> RequestView:
    history = tuple(CheckpointInfo(run_id="a1b2c3d4e5f6", seq=s, parent_seq=s - 1 if s else None, branch=0, step=step,
                                   next_step=nxt, workflow_version=1, created_at=NOW, is_snapshot=True,
                                   stored_bytes=10)
                    for s, step, nxt in ((1, "draft_plan", "review_plan"), (0, "__start__", "draft_plan")))
    kw.setdefault("rewind", RewindChoices(checkpoints=history, total=len(history)))  # (as the engine offers them)
    return RequestView(
        request=req, run=of_run or run(), workflow="migration-plan", workflow_version=1, point="review_artefacts",
        title=req.title, show="scripts", shown_value=SCRIPTS if shown is None else shown,
        actions=("approve", "edit", "reject", "feedback", "rewind"),
        approvers=approvers or Approvers(jira_users=("acc-sme", "acc-lead"), jira_groups=("dba",)),
        options=options or {}, decisions=decisions, checkpoints=history, **kw)


def decision(action: str, **payload: Any) -> Decision:
    return Decision(id=1, run_id="a1b2c3d4e5f6", request_id=7, action=Action(action), actor_id="acc-sme",
                    actor_name="Sam SME", channel="jira", payload=payload, created_at=NOW)


def test_open_request_creates_the_issue(fake: FakeJira) -> None:
    channel = fake.channel()
    ref = channel.open_request(view(request(), options={"jira_issue_type": "Story"}))
    issue = fake.issue(ref["issue_id"])
    fields = issue["fields"]
    assert ref == {"key": f"jira:{issue['id']}", "issue_id": issue["id"], "issue_key": "MIG-1",
                   "url": f"{fake.base}/browse/MIG-1", "done_status": "Done", "rejected_status": None,
                   "site": fake.base.split("://", 1)[1]}  # (its self URL's: webhooks of another site are not its)
    assert fields["project"] == {"key": "MIG"} and fields["issuetype"] == {"name": "Story"}
    assert fields["summary"] == "Review the migration scripts (run a1b2c3d4e5f6)"
    assert fields["labels"] == ["hazel", "a1b2c3d4e5f6", point_label("a1b2c3d4e5f6", "review_artefacts"),
                                "hazel-request-7"]
    description = fields["description"]
    for text in ("*001_email.up.sql*", "ALTER TABLE users ADD COLUMN email_new TEXT;", "migration-plan v1",
                 "a1b2c3d4e5f6", "review_artefacts", "{{/approve}}", "*Approved*", "{{/reject REASON}}",
                 "steps: draft_plan, review_plan", "members of dba"):
        assert text in description
    assert ("[~accountid:acc-sme]" if fake.cloud else "[~acc-sme]") in description
    assert fake.watchers[issue["id"]] == ["acc-sme", "acc-lead"]
    assert "assignee" not in fields
    # the field list (read once per client), one search, one create, the watchers; never the createmeta,
    # project or user-search lookups
    assert [(m, path) for m, path, _, _ in fake.calls if "watchers" not in path] == [
        ("GET", "/field"), ("GET", "/search/jql" if fake.cloud else "/search"), ("POST", "/issue")]


def test_assignee_is_set_per_deployment(fake: FakeJira) -> None:
    ref = fake.channel().open_request(view(request(), options={"jira_assignee": "acc-lead"}))
    expected = {"accountId": "acc-lead"} if fake.cloud else {"name": "acc-lead"}
    assert fake.issue(ref["issue_id"])["fields"]["assignee"] == expected


def test_a_long_artefact_is_cut_with_a_pointer_to_the_cli(fake: FakeJira) -> None:
    channel = JiraChannel(client=fake.channel().client, cloud=fake.cloud, max_chars=1000)
    ref = channel.open_request(view(request(), shown="x" * 50_000))
    description = fake.issue(ref["issue_id"])["fields"]["description"]
    assert len(description) < 3000 and "{{hazel show a1b2c3d4e5f6 --full}}" in description


def test_the_description_always_fits_in_jira(fake: FakeJira) -> None:
    many_files = {f"{i:04}_step.up.sql": "SELECT 1;\n" * 20 for i in range(2000)}
    ref = fake.channel().open_request(view(request(), shown=many_files))
    description = fake.issue(ref["issue_id"])["fields"]["description"]
    assert len(description) <= 32_767 and description.count("{noformat}") % 2 == 0
    assert "{{hazel show a1b2c3d4e5f6 --full}}" in description and "h3. How to answer" in description


def test_the_same_point_asking_again_reuses_its_open_issue(fake: FakeJira) -> None:
    channel = fake.channel()
    first = channel.open_request(view(request(id=7)))
    second = channel.open_request(view(request(id=8), shown={"001_email.up.sql": "-- revised\n"}))
    assert second["key"] == first["key"] and len(fake.issues) == 1
    issue = fake.issue(first["issue_id"])
    assert "-- revised" in issue["fields"]["description"]
    assert "new version is ready for review (request #8)" in fake.bodies(first["issue_id"])[-1]
    assert issue["fields"]["labels"][-2:] == ["hazel-request-7", "hazel-request-8"]


def test_an_issue_created_by_an_attempt_whose_answer_was_lost_is_found_not_doubled(fake: FakeJira) -> None:
    channel = fake.channel()
    fake.fail("POST", r"^/issue$", status=504, after=True)
    with pytest.raises(DeliveryError, match="HTTP 504"):
        channel.open_request(view(request(id=7)))
    assert len(fake.issues) == 1
    ref = channel.open_request(view(request(id=7)))
    assert len(fake.issues) == 1 and ref["issue_key"] == "MIG-1"
    assert fake.bodies(ref["issue_id"]) == [], "not announced as a new version"


def test_an_issue_found_after_a_lost_answer_gets_the_approvers_as_watchers(fake: FakeJira) -> None:
    channel = fake.channel()
    fake.fail("POST", r"^/issue$", status=504, after=True)  # created, but the answer (and the watchers) lost
    with pytest.raises(DeliveryError):
        channel.open_request(view(request(id=7)))
    assert fake.watchers == {}
    ref = channel.open_request(view(request(id=7)))
    assert fake.watchers[ref["issue_id"]] == ["acc-sme", "acc-lead"]


@pytest.mark.parametrize("required", [1, 2])
def test_how_to_edit_says_what_an_edit_does_under_a_quorum(fake: FakeJira, required: int) -> None:
    ref = fake.channel().open_request(view(request(required=required)))
    description = fake.issue(ref["issue_id"])["fields"]["description"]
    line = next(x for x in description.splitlines() if x.startswith("* {{/edit}}"))
    if required == 1:
        assert line.endswith("replaces the scripts and approves it."), line
    else:  # an edit under a quorum opens a new request at 0 of N (README, Decisions)
        assert "approves it" not in line and "asked again and needs 2 approvals anew" in line, line


def test_a_finished_issue_is_not_reused(fake: FakeJira) -> None:
    channel = fake.channel()
    first = channel.open_request(view(request(id=7)))
    fake.set_status(first["issue_id"], "Done")
    second = channel.open_request(view(request(id=8)))
    assert second["key"] != first["key"] and len(fake.issues) == 2


def test_a_request_settled_before_delivery_gets_no_issue(fake: FakeJira) -> None:
    channel = fake.channel()
    ref = channel.open_request(view(request(status=RequestStatus.DECIDED, action="approve")))
    assert "key" not in ref and "skipped" in ref and not fake.issues
    assert fake.count("GET", r"^/search") == 1 and all(m == "GET" for m, _, _, _ in fake.calls)  # (it only looked
    # for an issue a lost attempt may have created) nothing to update or to report on either
    before = len(fake.calls)
    channel.update_request(view(request(status=RequestStatus.DECIDED, action="approve", ref=ref)))
    assert len(fake.calls) == before


def test_a_settled_request_adopts_only_its_own_runs_issue(fake: FakeJira) -> None:
    """Request ids start at 1 in every database: another database's issue for its request #7 (staging beside
    production on one site, a database reset) is neither commented nor moved by this run's settled #7."""
    channel = fake.channel()
    theirs = channel.open_request(view(request(id=7), of_run=run(run_id="0ther0databas")))
    settled = request(status=RequestStatus.DECIDED, action="approve")
    ref = channel.open_request(view(settled))
    assert "skipped" in ref and list(fake.issues) == [theirs["issue_id"]]
    channel.update_request(view(request(status=RequestStatus.DECIDED, action="approve", ref=ref),
                                decisions=(decision("approve"),)))
    assert fake.status(theirs["issue_id"]) == "To Do" and fake.bodies(theirs["issue_id"]) == []


def test_a_settled_request_adopts_its_issue_made_by_an_attempt_whose_answer_was_lost(fake: FakeJira) -> None:
    channel = fake.channel()
    fake.fail("POST", r"^/issue$", status=504, after=True)  # created, but the answer lost
    with pytest.raises(DeliveryError):
        channel.open_request(view(request(id=7)))
    ref = channel.open_request(view(request(id=7, status=RequestStatus.DECIDED, action="approve")))
    assert ref["issue_id"] in fake.issues and "skipped" not in ref
    channel.update_request(view(request(id=7, status=RequestStatus.DECIDED, action="approve", ref=ref),
                                decisions=(decision("approve"),)))
    assert fake.status(ref["issue_id"]) == "Done"


@pytest.mark.parametrize("action, payload, status, text", [
    ("approve", {}, "Done", "(/) Approved by Sam SME."),
    ("edit", {"value": {}}, "Done", "(/) Edited by Sam SME: their version of the scripts replaces the draft."),
    ("reject", {"reason": "no rollback"}, "Rejected", "(x) Rejected by Sam SME: no rollback"),
    ("feedback", {"text": "add an index"}, "To Do", "Answered with feedback by Sam SME"),
    ("rewind", {"to": 1, "feedback": "start over"}, "To Do",
     "Rewound by Sam SME to checkpoint #1 with feedback: start over"),
])
def test_update_request_comments_and_moves_the_issue(fake: FakeJira, action: str, payload: dict, status: str,
                                                     text: str) -> None:
    channel = fake.channel(rejected_status="Won't do")  # the point's option below wins over this default
    ref = channel.open_request(view(request()))
    settled = request(status=RequestStatus.DECIDED, action=action, ref=ref)
    channel.update_request(view(settled, decisions=(decision(action, **payload),),
                                options={"jira_rejected_status": "Rejected"}))
    assert fake.status(ref["issue_id"]) == status
    assert fake.bodies(ref["issue_id"])[-1].startswith(text)


def test_a_missing_transition_is_said_in_the_comment_not_raised(fake: FakeJira) -> None:
    channel = fake.channel(done_status="Shipped")
    ref = channel.open_request(view(request()))
    channel.update_request(view(request(status=RequestStatus.DECIDED, action="approve", ref=ref),
                                decisions=(decision("approve"),)))
    assert fake.status(ref["issue_id"]) == "To Do"
    assert "could not move this issue to *Shipped*" in fake.bodies(ref["issue_id"])[-1]


def test_quorum_votes_and_cancellation(fake: FakeJira) -> None:
    channel = fake.channel()
    ref = channel.open_request(view(request(required=2)))
    channel.update_request(view(request(required=2, approvals=1, ref=ref), decisions=(decision("approve"),)))
    channel.update_request(view(request(status=RequestStatus.CANCELLED, action="cancel", ref=ref)))
    assert fake.bodies(ref["issue_id"]) == ["Approval 1 of 2 from Sam SME; waiting for 1 more.",
                                           "Cancelled by Sam SME: nothing more to decide here."]
    assert fake.status(ref["issue_id"]) == "To Do"


@pytest.mark.parametrize("event, facts, status, text", [
    ("waiting", {}, "To Do", "Now waiting at *Sign off* (jira:MIG)"),
    ("completed", {}, "Done", "(/) Run a1b2c3d4e5f6 completed after deploy."),
    ("rejected", {"by": "Sam", "reason": "no"}, "Rejected", "Run a1b2c3d4e5f6 ended rejected by Sam: no."),
    ("failed", {"error": "boom", "step": "deploy"}, "To Do", "(!) Run a1b2c3d4e5f6 failed at step deploy: boom"),
    ("cancelled", {"by": "priya"}, "To Do", "Run a1b2c3d4e5f6 ended cancelled by priya."),
])
def test_progress_comments_and_final_transitions(fake: FakeJira, event: str, facts: dict, status: str,
                                                 text: str) -> None:
    channel = fake.channel(rejected_status="Rejected")
    ref = channel.open_request(view(request()))
    nxt = request(id=8).model_copy(update={"title": "Sign off"})
    action = "reject" if event == "rejected" else "approve"  # (the request the run ended at, or before)
    channel.progress(ProgressView(run=run(), workflow="migration-plan", event=event, facts=facts,
                                  request=request(status=RequestStatus.DECIDED, action=action, ref=ref),
                                  next_request=nxt if event == "waiting" else None, steps=("deploy",)))
    assert fake.status(ref["issue_id"]) == status
    assert text in fake.bodies(ref["issue_id"])[-1]


@pytest.mark.parametrize("action, event, status", [("approve", "rejected", "Done"), ("edit", "rejected", "Done"),
                                                   ("reject", "completed", "Rejected"),
                                                   ("feedback", "rejected", "Rejected"),
                                                   ("feedback", "completed", "Done")])
def test_a_runs_ending_never_undoes_the_decision_of_the_issues_own_request(fake: FakeJira, action: str, event: str,
                                                                           status: str) -> None:
    """The run ended at a later point (in Slack, say) otherwise than this issue's request was decided: told in a
    comment, the issue stays where its decision put it; an issue left open (feedback) moves as the run ended."""
    channel = fake.channel(rejected_status="Rejected")
    ref = channel.open_request(view(request()))
    decided = request(status=RequestStatus.DECIDED, action=action, ref=ref)
    channel.update_request(view(decided, decisions=(decision(action),)))
    channel.progress(ProgressView(run=run(), workflow="migration-plan", event=event, request=decided,
                                  facts={"by": "priya", "reason": "no"} if event == "rejected" else {}))
    assert fake.status(ref["issue_id"]) == status
    assert f"Run a1b2c3d4e5f6 {'ended rejected by priya' if event == 'rejected' else 'completed'}" in \
        fake.bodies(ref["issue_id"])[-1]


def test_reminders_and_escalations_comment_on_the_issue(fake: FakeJira) -> None:
    channel = fake.channel()
    with pytest.raises(DeliveryError, match="no Jira issue yet"):
        channel.remind(view(request(), reminder=True))
    ref = channel.open_request(view(request()))
    channel.remind(view(request(ref=ref), reminder=True))
    channel.remind(view(request(ref=ref), escalation=True, escalate_to=Approvers(jira_groups=("oncall",))))
    bodies = fake.bodies(ref["issue_id"])
    assert bodies[0].startswith("Reminder: this request is still waiting for ")
    assert "Escalated: members of oncall may now decide" in bodies[1]
    assert len(fake.issues) == 1
    slack_request = request(ref={"channel": "C1", "ts": "1.2", "key": "C1:1.2"}).model_copy(
        update={"channel": "slack:#migrations"})
    with pytest.raises(PermanentDeliveryError, match="not supported"):
        channel.remind(view(slack_request, escalation=True))


# -- failures ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status, headers, retry_after", [(503, {}, None), (500, {}, None),
                                                         (429, {"Retry-After": "7"}, 7.0)])
def test_transient_failures_are_delivery_errors(fake: FakeJira, status: int, headers: dict,
                                                retry_after: float | None) -> None:
    fake.fail("POST", r"^/issue$", status=status, headers=headers)
    with pytest.raises(DeliveryError) as caught:
        fake.channel().open_request(view(request()))
    assert not isinstance(caught.value, PermanentDeliveryError)
    assert caught.value.retry_after_sec == retry_after
    assert f"HTTP {status}" in str(caught.value)
    assert not fake.issues


def test_network_errors_are_delivery_errors(fake: FakeJira) -> None:
    fake.fail("GET", r"^/search", exception=requests.ConnectionError("connection refused"))
    with pytest.raises(DeliveryError, match="ConnectionError") as caught:
        fake.channel().open_request(view(request()))
    assert not isinstance(caught.value, PermanentDeliveryError)


def test_refusals_are_permanent_and_say_why(fake: FakeJira) -> None:
    with pytest.raises(PermanentDeliveryError, match="HTTP 400: Specify a valid issue type"):
        fake.channel().open_request(view(request(), options={"jira_issue_type": "Epic"}))


def test_errors_never_carry_the_credentials(fake: FakeJira, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake.fail("POST", r"^/issue$", status=401)
    with pytest.raises(PermanentDeliveryError) as caught:
        fake.channel().open_request(view(request()))
    assert fake.auth_headers, "the client authenticated"
    secret = fake.client_kwargs().get("api_token") or fake.client_kwargs()["pat"]
    for text in (str(caught.value), repr(caught.value), caplog.text):
        assert secret not in text
        for header in fake.auth_headers:
            assert header not in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_failing_watcher_does_not_lose_the_issue(fake: FakeJira) -> None:
    fake.fail("POST", r"/watchers$", status=500, times=5)
    ref = fake.channel().open_request(view(request()))
    assert ref["issue_key"] == "MIG-1" and len(fake.issues) == 1


def test_directory_caches_groups_and_knows_hazel(fake: FakeJira) -> None:
    fake.groups["acc-sme"] = ["dba", "jira-users"]
    now = [0.0]
    directory = JiraDirectory(fake.channel().client, group_ttl_sec=60, clock=lambda: now[0])
    assert directory.own_id() == fake.me
    assert directory.groups_of("acc-sme") == {"dba", "jira-users"}
    directory.groups_of("acc-sme")
    assert fake.count("GET", "^/user$") == 1
    now[0] = 61.0
    fake.groups["acc-sme"] = ["dba"]
    assert directory.groups_of("acc-sme") == {"dba"}
    assert fake.count("GET", "^/user$") == 2 and fake.count("GET", "^/myself$") == 1
    with pytest.raises(PermanentDeliveryError):
        directory.groups_of("nobody")
