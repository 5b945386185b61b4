"""End to end on SQLite and PostgreSQL, Jira Cloud and Server: the example workflow with its scripts review and
sign-off on Jira goes from a feedback comment to a re-draft, to approval by transition, to sign-off by comment,
to completion; and Jira failures are retried from the outbox without losing or doubling an issue."""

from __future__ import annotations

import pytest
import requests

from store.models import RequestStatus, RunStatus
from tests.support.jira_env import jira_env


pytestmark = pytest.mark.usefixtures("offline_example")  # (no model: the examples draft offline)


@pytest.mark.parametrize("cloud", [True, False], ids=["cloud", "server"])
def test_feedback_redraft_approve_by_transition_sign_off_complete(db_url: str, cloud: bool) -> None:
    with jira_env(db_url, cloud=cloud) as env:
        run_id = env.start()
        issue = env.issue(run_id)
        assert issue["key"] == "MIG-1" and issue["fields"]["status"]["name"] == "To Do"
        assert "*001_rename_users_email_to_users_email_addres.up.sql*" in issue["fields"]["description"]

        # 1. the SME comments: feedback, and the scripts are written again
        answer = env.send(env.comment(issue, "Add an index on the new column, please."))
        assert answer.status_code == 200 and answer.json()["decided"] == "feedback"
        assert env.drive(run_id).status is RunStatus.WAITING
        state = env.hazel.state_at(run_id=run_id)
        assert state.script_revisions == 1
        assert "revision 1: Add an index on the new column, please." in next(iter(state.scripts.values()))
        again = env.issue(run_id)
        assert again["id"] == issue["id"], "the same point asks again in the same issue"
        assert "revision 1: Add an index" in again["fields"]["description"]
        bodies = env.fake.bodies(issue["id"])
        assert bodies[0].startswith("Answered with feedback by ") and "new version is ready for review" in bodies[-1]

        # 2. the SME moves the issue to Approved: the run goes on to the sign-off, a new issue
        answer = env.send(env.transition(again, "Approved"))
        assert answer.json()["decided"] == "approve"
        assert env.drive(run_id).status is RunStatus.WAITING
        assert env.fake.status(issue["id"]) == "Done", "approved issues move to the done status"
        signoff = env.issue(run_id)
        assert signoff["key"] == "MIG-2" and env.pending(run_id).point == "sign_off"

        # 3. sign-off by comment; the run deploys and completes, the issue is done
        answer = env.send(env.comment(signoff, "/approve"))
        assert answer.json()["decided"] == "approve"
        run = env.drive(run_id)
        assert run.status is RunStatus.COMPLETED
        assert env.hazel.state_at(run_id=run_id).deployed_to
        assert env.fake.status(signoff["id"]) == "Done"
        assert env.fake.bodies(signoff["id"])[-2:] == ["(/) Approved by " + env.who["sme"] + ".",
                                                       f"(/) Run {run_id} completed after deploy."]
        decisions = [(d.action.value, d.channel, d.actor_id) for d in env.hazel.decisions(run_id=run_id)]
        assert decisions == [("approve", "console", "priya"), ("feedback", "jira", env.who["sme"]),
                             ("approve", "jira", env.who["sme"]), ("approve", "jira", env.who["sme"])]
        assert len(env.fake.issues) == 2


def test_jira_failures_are_retried_from_the_outbox(db_url: str) -> None:
    with jira_env(db_url) as env:
        env.fake.fail("POST", r"^/issue$", status=503)
        env.fake.fail("GET", r"^/search", exception=requests.ConnectionError("connection reset"))
        env.fake.fail("POST", r"^/issue$", status=429, headers={"Retry-After": "30"})
        run_id = env.start()
        request = env.pending(run_id)
        assert request is not None and request.status is RequestStatus.PENDING and request.message_ref is None
        assert not env.fake.issues

        def outbox() -> list:
            with env.hazel.store.read() as tx:
                messages = tx.outbox.list(run_id=run_id)
            return [m for m in messages if m.kind == "request.opened" and m.channel == "jira:MIG"]

        for attempt in (1, 2, 3):  # network error on the search, then 503, then 429 on the create
            (message,) = outbox()
            assert message.status.value == "pending" and message.attempts == attempt
            assert "Jira" in (message.last_error or "")
            assert env.hazel.deliverer.deliver_due() == 0, "not due yet: nothing is sent early"
            wait = (message.next_attempt_at - env.clock.now).total_seconds()
            if attempt == 3:
                assert wait >= 30, "Jira's Retry-After is honoured"
            env.clock.advance(wait + 1)
            env.hazel.deliverer.deliver_due()

        (message,) = outbox()
        assert message.status.value == "sent"
        assert len(env.fake.issues) == 1 and env.fake.count("POST", r"^/issue$") == 3
        issue = env.issue(run_id)
        # the request was pending all along and is answered from the issue created late
        assert env.send(env.comment(issue, "/approve")).json()["decided"] == "approve"
        assert env.drive(run_id).status is RunStatus.WAITING and env.pending(run_id).point == "sign_off"
        events = [e.action for e in env.hazel.audit(run_id=run_id)]
        assert "outbox.failed" in events
