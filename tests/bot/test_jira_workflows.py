"""Jira workflows without direct transitions, comments in Atlassian Document Format, and delivery keys per site
and issue, over real HTTP into ``POST /jira/webhook`` (signed), on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Iterator

import pytest
import responses

from store.models import RequestStatus, RunStatus
from tests.support import jira_payloads as p
from tests.support.jira_env import JiraEnv, jira_env

REVIEW = {
    "To Do": [("Start review", "In Review")],
    "In Review": [("Approve", "Approved"), ("Reject", "Rejected"), ("Back to backlog", "To Do")],
    "Approved": [("Reopen", "To Do"), ("Close", "Done")],
    "Rejected": [("Reopen", "To Do")],
    "Done": [],
}
"""A review workflow with no transition from Approved back to In Review (only Reopen, then Start review)."""


pytestmark = pytest.mark.usefixtures("offline_example")  # (no model: the examples draft offline)


@pytest.fixture
def env(db_url: str) -> Iterator[JiraEnv]:
    with jira_env(db_url) as e:
        e.fake.groups.update({e.who["stranger"]: ["jira-users"]})
        yield e


def still_pending(env: JiraEnv, run_id: str) -> None:
    request = env.pending(run_id)
    assert request is not None and request.status is RequestStatus.PENDING and request.point == "review_artefacts"
    assert env.hazel.get(run_id=run_id).status is RunStatus.WAITING
    assert [d.channel for d in env.hazel.decisions(run_id=run_id)] == ["console"]


# -- moving issues through the workflow -------------------------------------------------------------------------

def test_a_refused_transition_goes_back_through_the_workflow(env: JiraEnv) -> None:
    env.fake.workflow = REVIEW
    run_id = env.start()
    issue = env.issue(run_id)
    env.fake.set_status(issue["id"], "In Review")  # the SME started the review
    answer = env.send(env.transition(issue, "Approved", person="stranger"))
    assert "may not approve" in answer.json()["refused"]
    assert env.fake.status(issue["id"]) == "In Review"
    assert env.fake.transitions_made(issue["id"]) == ["Reopen", "Start review"]
    reply = env.fake.bodies(issue["id"])[-1]
    assert reply.endswith(" The request is still open. Hazel moved the issue back to In Review (through Reopen, "
                          "Start review).")
    assert "could not" not in reply
    still_pending(env, run_id)


def test_no_path_back_is_said_on_the_issue_and_the_request_stays_pending(env: JiraEnv) -> None:
    env.fake.workflow = {**REVIEW, "Approved": [("Close", "Done")]}  # only forward, into a done status
    run_id = env.start()
    issue = env.issue(run_id)
    env.fake.set_status(issue["id"], "In Review")
    answer = env.send(env.transition(issue, "Approved", person="stranger"))
    assert "may not approve" in answer.json()["refused"]
    assert env.fake.status(issue["id"]) == "Approved" and env.fake.transitions_made(issue["id"]) == []
    (reply,) = env.fake.bodies(issue["id"])
    assert reply.endswith(". The request is still open. Hazel could not move the issue back to In Review: no path "
                          "of transitions leads there from Approved. Move it back by hand.")
    assert "moved the issue back" not in reply and "goes back" not in reply
    still_pending(env, run_id)
    # the request is still open: an approver decides it from the issue as it is
    assert env.send(env.comment(issue, "/approve")).json()["decided"] == "approve"


def test_completion_from_to_do_walks_to_done(env: JiraEnv) -> None:
    env.fake.workflow = {"To Do": [("Start", "In Progress")], "In Progress": [("Stop", "To Do"), ("Finish", "Done")],
                         "Done": [("Reopen", "To Do")]}
    run_id = env.start()
    review = env.issue(run_id)
    assert env.send(env.comment(review, "/approve")).json()["decided"] == "approve"
    env.drive(run_id)
    signoff = env.issue(run_id)
    assert env.send(env.comment(signoff, "/approve")).json()["decided"] == "approve"
    assert env.drive(run_id).status is RunStatus.COMPLETED
    for issue in (review, signoff):
        assert env.fake.status(issue["id"]) == "Done"
        assert env.fake.transitions_made(issue["id"]) == ["Start", "Finish"]
        assert not [b for b in env.fake.bodies(issue["id"]) if "could not move" in b]
    assert env.fake.bodies(signoff["id"])[-1] == f"(/) Run {run_id} completed after deploy."


# -- Atlassian Document Format -----------------------------------------------------------------------------------

def test_an_adf_approve_comment_decides(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    body = p.adf(p.paragraph(p.text("/approve", "strong"), p.text(" looks right")))
    answer = env.send(env.comment(issue, body))
    assert answer.status_code == 200 and answer.json()["decided"] == "approve"
    assert env.drive(run_id).status is RunStatus.WAITING and env.pending(run_id).point == "sign_off"


def test_adf_feedback_is_read_as_its_text(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    body = p.adf(
        p.paragraph(p.text("Hi "), {"type": "mention", "attrs": {"id": env.who["sme"], "text": "@Sam"}},
                    p.text(", two things:"), {"type": "hardBreak"}, p.text("see below")),
        {"type": "bulletList", "content": [
            {"type": "listItem", "content": [p.paragraph(p.text("add an index"))]},
            {"type": "listItem", "content": [p.paragraph(p.text("batch the update"))]}]},
        {"type": "codeBlock", "attrs": {"language": "sql"}, "content": [p.text("CREATE INDEX i ON t (c);")]})
    answer = env.send(env.comment(issue, body, person="stranger"))
    assert answer.json()["decided"] == "feedback"
    (feedback,) = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
    assert feedback.payload == {"text": "Hi @Sam, two things:\nsee below\n\n- add an index\n- batch the update\n\n"
                                        "CREATE INDEX i ON t (c);"}
    env.drive(run_id)
    assert "revision 1: Hi @Sam, two things:" in next(iter(env.hazel.state_at(run_id=run_id).scripts.values()))


@pytest.mark.parametrize("opening", [
    {"type": "blockquote", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "/reject too expensive"}]}]},
    {"type": "codeBlock", "content": [{"type": "text", "text": "/approve"}]},
    {"type": "bulletList", "content": [{"type": "listItem", "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": "/approve"}]}]}]},
], ids=["quote", "code", "list"])
def test_an_adf_comment_that_opens_with_a_quote_or_code_is_feedback_not_a_command(env: JiraEnv,
                                                                                 opening: dict) -> None:
    """Replying to a colleague's "/reject too expensive" by quoting it is no rejection (fresh-user s13 F10):
    only the author's own first line is a command, as in wiki markup (``{quote}/approve{quote}``)."""
    run_id = env.start()
    body = p.adf(opening, p.paragraph(p.text("I disagree with the above: looks fine to me")))
    answer = env.send(env.comment(env.issue(run_id), body))
    assert answer.status_code == 200 and answer.json()["decided"] == "feedback", answer.json()
    assert env.hazel.get(run_id=run_id).status is not RunStatus.COMPLETED
    (feedback,) = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
    assert feedback.payload["text"].endswith("I disagree with the above: looks fine to me")
    # the author's own first line still commands, whatever follows it
    second = env.start("drop the legacy table")
    quoted_after = p.adf(p.paragraph(p.text("/approve")), opening)
    assert env.send(env.comment(env.issue(second), quoted_after)).json()["decided"] == "approve"


def test_an_adf_edit_takes_its_code_block(env: JiraEnv) -> None:
    run_id = env.start()
    body = p.adf(p.paragraph(p.text("/edit")),
                 {"type": "codeBlock", "content": [p.text('{"001_fix.up.sql": "SELECT 1;"}')]})
    assert env.send(env.comment(env.issue(run_id), body)).json()["decided"] == "edit"
    env.drive(run_id)
    assert env.hazel.state_at(run_id=run_id).scripts == {"001_fix.up.sql": "SELECT 1;"}


def test_an_unreadable_adf_body_is_refused_with_a_reason(env: JiraEnv) -> None:
    run_id = env.start()
    deep: dict = {"type": "paragraph", "content": [p.text("/approve")]}
    for _ in range(150):
        deep = {"type": "blockquote", "content": [deep]}
    answer = env.send(env.comment(env.issue(run_id), p.adf(deep)))
    assert answer.status_code == 400 and "nests deeper than 100 levels" in answer.json()["error"]
    still_pending(env, run_id)


# -- delivery keys: per site and issue -----------------------------------------------------------------------------

def test_the_same_comment_id_on_two_issues_decides_both(env: JiraEnv) -> None:
    first, second = env.start(), env.start("drop the legacy table")
    one, two = env.issue(first), env.issue(second)
    assert one["id"] != two["id"]
    assert env.send(env.comment(one, "/approve", comment_id="777")).json()["decided"] == "approve"
    answer = env.send(env.comment(two, "/approve", comment_id="777")).json()
    assert answer["decided"] == "approve" and answer["run_id"] == second and answer["duplicate"] is False
    for run_id in (first, second):
        assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve", "approve"]


def test_the_same_comment_id_on_two_sites_decides_both_and_each_delivery_once(db_url: str) -> None:
    """Two Hazel deployments (one per Jira site) on one database: comment 777 of each site decides its own
    request; a delivery sent again, to the same process or to the other one, decides nothing more."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        with jira_env(db_url, rsps=rsps) as a, \
                jira_env(db_url, rsps=rsps, base="https://other-team.atlassian.net", first_issue_id=20001) as b:
            run_a, run_b = a.start(), b.start()
            issue_a, issue_b = a.issue(run_a), b.issue(run_b)
            from_a = a.comment(issue_a, "/approve", comment_id="777")
            from_b = b.comment(issue_b, "/approve", comment_id="777")
            assert a.send(from_a, webhook_id="a-1").json()["decided"] == "approve"
            answer = b.send(from_b, webhook_id="b-1").json()
            assert answer["decided"] == "approve" and answer["run_id"] == run_b and answer["duplicate"] is False
            assert a.send(from_a, webhook_id="a-1").json() == {"duplicate": True}  # this process saw it
            again = b.send(from_a, webhook_id="a-1").json()  # another process: the database knows it
            assert again["duplicate"] is True and again["run_id"] == run_a
            for env, run_id, issue in ((a, run_a, issue_a), (b, run_b, issue_b)):
                assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve", "approve"]
                (jira,) = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
                site = env.fake.base.removeprefix("https://")
                assert jira.delivery_id == f"{site}/issue/{issue['id']}/comment/777"
