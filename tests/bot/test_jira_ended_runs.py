"""Comments on the issue of a run that has ended (completed, rejected, cancelled, failed), over real HTTP with
signed webhooks and the fake Jira: each one gets an answer on the issue.

A tester's finding: ``/rewind STEP [feedback]`` there got no reply at all. The engine takes it (any ended run can
be rewound: the run goes on from that checkpoint on a new branch), but settles no request of the issue, so no
outcome comment came from the outbox: the webhook now answers with what the rewind did.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from store.models import RunStatus
from tests.support.jira_env import OPERATOR, JiraEnv, jira_env


pytestmark = pytest.mark.usefixtures("offline_example")  # (no model: the examples draft offline)


@pytest.fixture
def env(db_url: str) -> Iterator[JiraEnv]:
    with jira_env(db_url) as e:
        e.fake.groups.update({e.who["stranger"]: ["jira-users"]})
        yield e


ENDINGS = ["completed", "rejected", "cancelled", "failed"]


def ended(env: JiraEnv, how: str) -> tuple[str, dict]:
    """A run of the example ended ``how``, and the issue of its scripts review (the request it ended at, but for
    a completed run: approved there, then signed off on the sign-off's issue)."""
    run_id = env.start()
    issue = env.issue(run_id)
    if how == "completed":  # approved on both issues; the run deploys
        assert env.send(env.comment(issue, "/approve")).json()["decided"] == "approve"
        env.drive(run_id)
        assert env.send(env.comment(env.issue(run_id), "/approve")).json()["decided"] == "approve"
    elif how == "rejected":
        assert env.send(env.comment(issue, "/reject the down script loses data")).json()["decided"] == "reject"
    elif how == "cancelled":
        env.hazel.cancel(run_id=run_id, actor=OPERATOR, reason="superseded")
    else:  # what a timeout with on_timeout="fail" does
        assert env.hazel.steering.end_waiting(env.pending(run_id), RunStatus.FAILED, "nobody decided in time")
    run = env.drive(run_id)
    assert run.status.value == how
    return run_id, issue


@pytest.mark.parametrize("how", ENDINGS)
def test_a_rewind_of_an_ended_run_is_answered_with_what_it_did(env: JiraEnv, how: str) -> None:
    run_id, issue = ended(env, how)
    before = len(env.fake.bodies(issue["id"]))
    answer = env.send(env.comment(issue, "/rewind write_scripts use batches of 1000"))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["decided"] == "rewind" and body["run_status"] == "ready", body
    to = env.hazel.decisions(run_id=run_id)[-1].payload["to"]
    expected = (f"Rewound run {run_id} to checkpoint #{to} (it had ended {how}): it continues at write_scripts "
                "on a new branch, with your feedback: use batches of 1000")
    assert body["answered"] == expected
    assert env.fake.bodies(issue["id"])[before:] == [f"[~accountid:{env.who['sme']}] {expected}"]
    # the run goes on from there: the scripts are written again with the feedback, and asked about again
    assert env.drive(run_id).status is RunStatus.WAITING
    assert env.pending(run_id).point == "review_artefacts"
    assert "revision 1: use batches of 1000" in next(iter(env.hazel.state_at(run_id=run_id).scripts.values()))


def test_a_rewind_from_an_issue_whose_run_waits_elsewhere_is_answered_there(env: JiraEnv) -> None:
    """The review's issue (approved) while the run waits at the sign-off's: the sign-off's issue hears that its
    request was rewound (the outbox), the review's, where the person wrote, gets the answer."""
    run_id = env.start()
    review = env.issue(run_id)
    assert env.send(env.comment(review, "/approve")).json()["decided"] == "approve"
    env.drive(run_id)
    signoff = env.issue(run_id)
    assert signoff["id"] != review["id"]
    before = len(env.fake.bodies(review["id"]))
    body = env.send(env.comment(review, "/rewind write_scripts")).json()
    assert body["decided"] == "rewind", body
    assert body["answered"].startswith(f"Rewound run {run_id} to checkpoint #") and body["answered"].endswith(
        ": it continues at write_scripts on a new branch."), body
    assert "had ended" not in body["answered"]
    assert env.fake.bodies(review["id"])[before:] == [f"[~accountid:{env.who['sme']}] {body['answered']}"]
    env.drive(run_id)
    assert any(b.startswith("Rewound by ") for b in env.fake.bodies(signoff["id"])), env.fake.bodies(signoff["id"])


def test_a_rewind_answered_while_jira_is_down_is_answered_on_the_retry(env: JiraEnv) -> None:
    """The rewind is recorded, but Jira does not take the answer: 503, and Jira's retry of the same comment posts
    the answer and rewinds nothing more."""
    run_id, issue = ended(env, "rejected")
    before = len(env.fake.bodies(issue["id"]))
    payload = env.comment(issue, "/rewind write_scripts")
    env.fake.fail("POST", "/comment$", status=503)
    assert env.send(payload).status_code == 503
    retry = env.send(payload)
    assert retry.status_code == 200 and retry.json()["decided"] == "rewind", retry.text
    assert retry.json()["answered"].startswith(f"Rewound run {run_id} to checkpoint #")
    assert len(env.fake.bodies(issue["id"])) == before + 1
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)].count("rewind") == 1


@pytest.mark.parametrize("how", ENDINGS)
def test_every_command_on_an_ended_runs_issue_is_answered(env: JiraEnv, how: str) -> None:
    """``/approve``, ``/reject``, ``/edit`` and a plain comment (feedback where the point takes it) on the issue
    of an ended run are each answered: who settled the request, that nothing changed and that the run has ended
    (a plain comment there was ignored: the person who meant it as feedback heard nothing)."""
    run_id, issue = ended(env, how)
    decisions = env.hazel.decisions(run_id=run_id)
    before = len(env.fake.bodies(issue["id"]))
    tail = f"Run {run_id} has ended ({how})."
    for text in ("/approve", "/reject too risky", '/edit {"001_fix.up.sql": "SELECT 1;"}',
                 "Please also add an index on users.email_address."):
        answer = env.send(env.comment(issue, text))
        assert answer.status_code == 200, answer.text
        refused = answer.json()["refused"]
        assert "Nothing changed." in refused and tail in refused, (text, refused)
        if how in ("completed", "rejected"):
            verb = "approved" if how == "completed" else "rejected"
            assert refused.startswith(f"already {verb} by {env.who['sme']} at "), refused
        else:
            assert refused.startswith("this request was cancelled ("), refused
        if how == "failed":
            assert f"{{{{hazel retry {run_id}}}}} resumes it." in refused, refused
        assert env.fake.bodies(issue["id"])[-1] == f"[~accountid:{env.who['sme']}] {refused}"
    # someone who may not approve there is told who may, and that the run has ended
    refused = env.send(env.comment(issue, "/approve", person="stranger")).json()["refused"]
    assert "may not approve" in refused and tail in refused, refused
    assert len(env.fake.bodies(issue["id"])) == before + 5
    assert env.hazel.decisions(run_id=run_id) == decisions, "nothing was decided"
    assert env.hazel.get(run_id=run_id).status.value == how
    if how == "completed":  # where the point takes no feedback, a plain comment is just a comment, as while it
        # waited; a command there is answered
        signoff = env.fake.issue("MIG-2")
        thanks = env.send(env.comment(signoff, "Deployed fine, thanks.")).json()
        assert thanks == {"ignored": "a comment, not a decision"}
        refused = env.send(env.comment(signoff, "/approve")).json()["refused"]
        assert refused.startswith("already approved by ") and refused.endswith(
            f"{tail} To run it again from an earlier step: /rewind STEP [feedback]."), refused
