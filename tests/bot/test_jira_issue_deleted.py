"""A Jira issue deleted while its request waits (``jira:issue_deleted``, over real HTTP with a signed webhook):
nobody in Jira could answer the request any more and its reminders went to an issue that no longer exists (a
fresh-user finding, s25 F19). The request is asked again on a new issue, and the audit log says who deleted
the old one; a deletion decides nothing, and the same webhook twice asks once."""

from __future__ import annotations

import pytest

from tests.bot.test_jira_ended_runs import env  # noqa: F401  (the fixture: the example on Jira, a stranger's groups)
from tests.support import jira_payloads
from tests.support.jira_env import OPERATOR, JiraEnv

pytestmark = pytest.mark.usefixtures("offline_example")  # (no model: the examples draft offline)


def test_a_deleted_issue_is_asked_again_on_a_new_issue(env: JiraEnv) -> None:
    run_id = env.start()
    request = env.pending(run_id)
    decided = env.hazel.decisions(run_id=run_id)  # (the plan, approved on the console)
    old = env.fake.delete(env.issue(run_id)["id"])
    deleted = jira_payloads.issue_deleted(old, env.who["stranger"])
    response = env.send(deleted)
    assert response.status_code == 200 and response.json() == {"asked_again": request.id}, response.text
    env.hazel.deliverer.deliver_due()
    now = env.pending(run_id)
    assert now.id == request.id and now.status.value == "pending" and now.approvals == 0  # nothing decided
    new = env.issue(run_id)
    assert new["id"] != old["id"] and new["key"] != old["key"]
    assert new["fields"]["summary"] == old["fields"]["summary"]
    [asked] = [e for e in env.hazel.audit(run_id=run_id) if e.action == "request.asked_again"]
    assert asked.actor_id == env.who["stranger"] and asked.request_id == request.id
    assert asked.detail["reason"] == f"its Jira issue {old['key']} was deleted"
    assert env.hazel.decisions(run_id=run_id) == decided
    # the same webhook again (Jira's retry) asks nothing more
    again = env.send(deleted)
    assert again.status_code == 200 and "asked_again" not in again.json(), again.text
    env.hazel.deliverer.deliver_due()
    assert len(env.fake.issues) == 1 and env.issue(run_id)["id"] == new["id"]
    # the new issue is the request's: a comment there decides it
    assert env.send(env.comment(new, "/approve")).json()["decided"] == "approve"


def test_deleting_the_issue_of_a_settled_request_changes_nothing(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    env.hazel.cancel(run_id=run_id, actor=OPERATOR, reason="superseded")
    env.drive(run_id)
    old = env.fake.delete(issue["id"])
    response = env.send(jira_payloads.issue_deleted(old, env.who["sme"]))
    assert response.status_code == 200 and "ignored" in response.json(), response.text
    env.hazel.deliverer.deliver_due()
    assert env.fake.issues == {} or all(i["id"] != old["id"] for i in env.fake.issues.values())
    assert not [e for e in env.hazel.audit(run_id=run_id) if e.action == "request.asked_again"]


def test_a_deleted_issue_hazel_never_created_is_ignored(env: JiraEnv) -> None:
    other = {"id": "99999", "key": "MIG-999", "fields": {"status": {"name": "To Do"}, "labels": []}}
    response = env.send(jira_payloads.issue_deleted(other, env.who["sme"]))
    assert response.status_code == 200 and response.json() == {"ignored": "not an issue Hazel created"}


def test_an_issue_deleted_webhook_without_an_issue_id_is_malformed(env: JiraEnv) -> None:
    payload = jira_payloads.issue_deleted({"id": "1", "key": "MIG-1", "fields": {"status": {"name": "To Do"}}},
                                          env.who["sme"])
    del payload["issue"]["id"]
    response = env.send(payload)
    assert response.status_code == 400 and "jira:issue_deleted without issue.id" in response.text
