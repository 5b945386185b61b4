"""``POST /jira/webhook`` over real HTTP: signatures, unknown issues, Hazel's own changes, duplicates, Server vs
Cloud shapes, permissions (people and groups), commands and their refusals, transitions."""

from __future__ import annotations

import json
from typing import Iterator

import pytest

from integrations.jira.render import inline
from store.models import RequestStatus, RunStatus
from tests.support import jira_payloads as p
from tests.support.jira_env import SECRET, JiraEnv, jira_env


pytestmark = pytest.mark.usefixtures("offline_example")  # (no model: the examples draft offline)


BOTH = pytest.mark.parametrize("deployment", ["cloud", "server"])
"""Tests where Cloud and Server differ (people by account id or user name, mentions, user lookups)."""


@pytest.fixture
def deployment() -> str:
    return "cloud"


@pytest.fixture
def env(deployment: str, db_url: str) -> Iterator[JiraEnv]:
    with jira_env(db_url, cloud=deployment == "cloud") as e:
        e.fake.groups.update({e.who["lead"]: ["dba", "jira-users"], e.who["stranger"]: ["jira-users"]})
        yield e


def unchanged(env: JiraEnv, run_id: str, comments_before: int = 0) -> None:
    """The run still waits on the same pending request, with no Jira decision and no new comment."""
    request = env.pending(run_id)
    assert request is not None and request.status is RequestStatus.PENDING and request.point == "review_artefacts"
    assert env.hazel.get(run_id=run_id).status is RunStatus.WAITING
    assert [d.channel for d in env.hazel.decisions(run_id=run_id)] == ["console"]
    assert len(env.fake.bodies(request.message_ref["issue_id"])) == comments_before


# -- origin ----------------------------------------------------------------------------------------------------

def test_unsigned_and_wrongly_signed_requests_are_refused(env: JiraEnv) -> None:
    run_id = env.start()
    payload = env.comment(env.issue(run_id), "/approve")
    body = json.dumps(payload).encode()
    for kw in ({"secret": None}, {"secret": "not-the-secret"}, {"signature": "sha256=" + "0" * 64},
               {"signature": p.sign(SECRET, body + b" ")},
               {"signature": p.sign(SECRET, body).replace("sha256", "md5")}):
        answer = env.send(payload, **kw)
        assert answer.status_code == 401, kw
    unchanged(env, run_id)


def test_a_webhook_from_another_jira_site_is_not_taken_for_hazels_issue(env: JiraEnv) -> None:
    """A fresh-user finding (s30 F7, HIGH): a signed ``/approve`` from another site (a staging copy restored
    from production's backup: the same issue ids, webhooks and secret) approved the production request, and its
    deletion there had the request asked again. An issue is Hazel's on the site its ``self`` URL named when
    Hazel created it."""
    run_id = env.start()
    issue = env.issue(run_id)
    assert env.pending(run_id).message_ref["site"] == "example.atlassian.net"
    other = "https://sandbox-other.atlassian.net"
    for payload in (p.comment_event(issue, "/approve", env.who["sme"], cloud=True, base=other),
                    p.issue_deleted(issue, env.who["sme"], base=other)):
        answer = env.send(payload).json()
        assert answer == {"ignored": "not an issue Hazel created: it is sandbox-other.atlassian.net's, Hazel's "
                                     "are example.atlassian.net's"}, answer
    unchanged(env, run_id)
    assert len(env.fake.issues) == 1
    # an issue whose request keeps no site (made by a Hazel before requests kept it: s31 F4) is the site's that
    # Jira's serverInfo names as its base URL
    from sqlalchemy import update

    from store.schema import steering_requests

    request = env.pending(run_id)
    with env.hazel.store.transaction() as tx:
        tx.conn.execute(update(steering_requests).where(steering_requests.c.id == request.id).values(
            message_ref={k: v for k, v in request.message_ref.items() if k != "site"}))
    answer = env.send(p.comment_event(issue, "/approve", env.who["sme"], cloud=True, base=other)).json()
    assert answer == {"ignored": "not an issue Hazel created: it is sandbox-other.atlassian.net's, Hazel's are "
                                 "example.atlassian.net's"}, answer
    unchanged(env, run_id)
    assert env.send(env.comment(issue, "/approve")).json()["decided"] == "approve"


def test_without_a_secret_webhooks_are_refused_unless_allowed(db_url: str) -> None:
    with jira_env(db_url, secret=None) as env:
        run_id = env.start()
        assert env.send(env.comment(env.issue(run_id), "/approve"), secret=None).status_code == 401
        unchanged(env, run_id)
    with jira_env(db_url, secret=None, JIRA_WEBHOOK_ALLOW_UNSIGNED=True) as env:
        run_id = env.start()
        assert env.send(env.comment(env.issue(run_id), "/approve"), secret=None).json()["decided"] == "approve"


def test_malformed_payloads_get_400_and_change_nothing(env: JiraEnv) -> None:
    run_id = env.start()
    issue_id = env.issue(run_id)["id"]
    no_author = {"webhookEvent": "comment_created",
                 "comment": {"id": "1", "body": "/approve", "self": f"/rest/api/2/issue/{issue_id}/comment/1"}}
    for raw in (b"", b"not json", b"[1, 2]", b'{"webhookEvent": "comment_created"}', json.dumps(no_author).encode()):
        answer = env.send(None, raw=raw, signature=p.sign(SECRET, raw))
        assert answer.status_code == 400 and "malformed" in answer.json()["error"], raw
    unchanged(env, run_id)


def test_issues_hazel_did_not_create_and_other_events_are_ignored(env: JiraEnv) -> None:
    run_id = env.start()
    stranger_issue = {"id": "99999", "key": "OPS-7", "fields": {"status": {"name": "To Do"}, "labels": []}}
    stranger = env.comment(stranger_issue, "/approve")
    answer = env.send(stranger)
    assert answer.status_code == 200 and answer.json() == {"ignored": "not an issue Hazel created"}
    again = env.send(stranger)  # the same delivery again: ignored again (it said {"duplicate": true})
    assert again.status_code == 200 and again.json() == {"ignored": "not an issue Hazel created"}
    answer = env.send({"webhookEvent": "jira:issue_created", "issue": {"id": "1"}})
    assert answer.status_code == 200 and "ignored" in answer.json()
    unchanged(env, run_id)
    assert env.fake.count("POST", "/comment$") == 0


@BOTH
def test_hazels_own_comments_and_transitions_never_decide(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    for payload in (env.comment(issue, "/approve", person=env.fake.me),
                    env.comment(issue, "A new version is ready", person=env.fake.me),
                    env.transition(issue, "Approved", person=env.fake.me)):
        assert env.send(payload).json() == {"ignored": "Hazel's own change"}
    env.fake.set_status(issue["id"], "To Do")
    unchanged(env, run_id)


# -- duplicates ------------------------------------------------------------------------------------------------

def test_a_retried_delivery_decides_once(env: JiraEnv) -> None:
    run_id = env.start()
    payload = env.comment(env.issue(run_id), "Please add an index.")
    first = env.send(payload, webhook_id="hook-1")
    again = env.send(payload, webhook_id="hook-1")
    assert first.json()["decided"] == "feedback" and again.json()["duplicate"] is True
    env.drive(run_id)
    edited = dict(payload, webhookEvent="comment_updated")
    assert env.send(edited).json()["duplicate"] is True, "an edit of a comment that decided changes nothing"
    assert [d.action.value for d in env.hazel.decisions(run_id=run_id)] == ["approve", "feedback"]


def test_server_comment_and_its_issue_commented_companion_decide_once(db_url: str) -> None:
    with jira_env(db_url, cloud=False) as env:
        run_id = env.start()
        issue = env.issue(run_id)
        created = env.comment(issue, "/approve", comment_id="777")
        assert "issue" not in created  # Server: the issue is only in comment.self
        companion = p.server_issue_commented(issue, "/approve", env.who["sme"], comment_id="777")
        answers = [env.send(created, webhook_id="a").json(), env.send(companion, webhook_id="b").json()]
        assert answers[0]["decided"] == "approve" and answers[0]["duplicate"] is False
        assert answers[1]["duplicate"] is True
        assert [d.delivery_id for d in env.hazel.decisions(run_id=run_id)] == [
            None, f"jira.example.invalid:8080/issue/{issue['id']}/comment/777"]
        # in the other order, for the next request: the companion first
        env.drive(run_id)
        signoff = env.issue(run_id)
        companion = p.server_issue_commented(signoff, "/approve", env.who["sme"], comment_id="778")
        assert env.send(companion).json()["decided"] == "approve"
        assert env.send(env.comment(signoff, "/approve", comment_id="778")).json()["duplicate"] is True
        assert env.drive(run_id).status is RunStatus.COMPLETED


# -- permissions -----------------------------------------------------------------------------------------------

@BOTH
def test_someone_not_allowed_gets_an_answer_and_nothing_changes(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    answer = env.send(env.comment(issue, "/approve", person="stranger"), webhook_id="x-1")
    assert answer.status_code == 200 and "may not approve" in answer.json()["refused"]
    unchanged(env, run_id, comments_before=1)
    (reply,) = env.fake.bodies(issue["id"])
    mention = f"[~accountid:{env.who['stranger']}]" if env.cloud else f"[~{env.who['stranger']}]"
    assert reply.startswith(mention) and "Nothing changed" in reply
    # the approvers named, never mentioned (s25 F16: a mention notifies them, at each comment anyone writes)
    assert f"Who may steer this request: {inline(env.who['sme'])}, group dba" in reply, reply
    assert (f"[~accountid:{env.who['sme']}]" if env.cloud else f"[~{env.who['sme']}]") not in reply
    refused = [e for e in env.hazel.audit(run_id=run_id) if e.action == "decision.refused"]
    assert len(refused) == 1 and refused[0].actor_id == env.who["stranger"] and refused[0].channel == "jira"
    # Jira sending the same comment again (a retry, or Server's companion event) is not answered twice
    retry = env.comment(issue, "/approve", person="stranger", comment_id="4242")
    assert env.send(retry, webhook_id="x-2").json()["refused"]
    assert env.send(retry, webhook_id="x-2").json() == {"duplicate": True}
    assert len(env.fake.bodies(issue["id"])) == 2
    assert len([e for e in env.hazel.audit(run_id=run_id) if e.action == "decision.refused"]) == 2


def test_feedback_is_open_to_anyone_where_the_point_says_so(env: JiraEnv) -> None:
    run_id = env.start()
    answer = env.send(env.comment(env.issue(run_id), "Mind the replication lag.", person="stranger"))
    assert answer.json()["decided"] == "feedback"  # the example allows feedback from anyone


@BOTH
def test_a_group_member_may_decide_and_groups_are_cached(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    env.send(env.comment(issue, "/reject", person="lead"))  # refused: no reason; groups read once
    assert env.send(env.comment(issue, "/approve", person="lead")).json()["decided"] == "approve"
    assert env.fake.count("GET", "^/user$") == 1


# -- commands --------------------------------------------------------------------------------------------------

def test_an_invalid_edit_is_answered_with_the_validation_message(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    answer = env.send(env.comment(issue, '/edit ["not", "a", "mapping"]'))
    assert "Input should be a valid dictionary" in answer.json()["refused"]
    answer = env.send(env.comment(issue, "/edit {not json"))
    assert "as JSON" in answer.json()["refused"]
    assert "the request is still open" in env.fake.bodies(issue["id"])[-1].lower()
    unchanged(env, run_id, comments_before=2)
    # the SME corrects the comment: the corrected version is taken
    bad = env.comment(issue, "/edit {oops", comment_id="5150")
    env.send(bad)
    fixed = env.comment(issue, '/edit {code:json}\n{"001_fix.up.sql": "SELECT 1;"}\n{code}', comment_id="5150",
                        event="comment_updated")
    assert env.send(fixed).json()["decided"] == "edit"
    env.drive(run_id)
    assert env.hazel.state_at(run_id=run_id).scripts == {"001_fix.up.sql": "SELECT 1;"}


def test_reject_needs_a_reason_and_ends_the_run(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    assert "needs a reason" in env.send(env.comment(issue, "/reject")).json()["refused"]
    assert env.send(env.comment(issue, "/reject the down script loses data")).json()["decided"] == "reject"
    assert env.drive(run_id).status is RunStatus.REJECTED
    last_two = sorted(env.fake.bodies(issue["id"])[-2:])
    assert last_two[0].startswith("(x) Rejected by ") and last_two[0].endswith("the down script loses data")
    assert last_two[1].startswith(f"Run {run_id} ended rejected by {env.who['sme']}: the down script loses data")
    # a command on a settled request says who decided
    late = env.send(env.comment(issue, "/approve", person="lead")).json()["refused"]
    assert late.startswith("already rejected by ") and f"Run {run_id} has ended (rejected)." in late
    # feedback there too: the run has ended (a plain comment on a request decided while the run goes on, or where
    # the point takes no feedback, is just a comment)
    thanks = env.send(env.comment(issue, "thanks all")).json()["refused"]
    assert thanks.startswith("already rejected by ") and f"Run {run_id} has ended (rejected)." in thanks


def test_rewind_from_a_comment(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    assert "never reached 'nowhere'" in env.send(env.comment(issue, "/rewind nowhere")).json()["refused"]
    answer = env.send(env.comment(issue, "/rewind write_scripts use batches of 1000"))
    assert answer.json()["decided"] == "rewind"
    env.drive(run_id)
    assert env.hazel.get(run_id=run_id).branch == 1
    assert "revision 1: use batches of 1000" in next(iter(env.hazel.state_at(run_id=run_id).scripts.values()))
    assert env.issue(run_id)["id"] == issue["id"]


def test_unknown_commands_get_help(env: JiraEnv) -> None:
    run_id = env.start()
    answer = env.send(env.comment(env.issue(run_id), "/aprove"))
    assert "/aprove is not a Hazel command" in answer.json()["refused"]
    unchanged(env, run_id, comments_before=1)


# -- transitions -----------------------------------------------------------------------------------------------

@BOTH
def test_transition_to_reject_status_uses_its_comment_as_the_reason(env: JiraEnv) -> None:
    run_id = env.start()
    answer = env.send(env.transition(env.issue(run_id), "Rejected", comment="no rollback plan"))
    assert answer.json()["decided"] == "reject"
    (decision,) = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
    assert decision.payload == {"reason": "no rollback plan"}


def test_other_statuses_decide_nothing(env: JiraEnv) -> None:
    run_id = env.start()
    answer = env.send(env.transition(env.issue(run_id), "In Progress"))
    assert "decides nothing" in answer.json()["ignored"]
    unchanged(env, run_id)


@BOTH
def test_a_refused_transition_is_moved_back(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    answer = env.send(env.transition(issue, "Approved", person="stranger"))
    assert "may not approve" in answer.json()["refused"]
    assert env.fake.status(issue["id"]) == "To Do"
    assert "Hazel moved the issue back to To Do." in env.fake.bodies(issue["id"])[-1]
    unchanged(env, run_id, comments_before=1)


def test_per_point_statuses(db_url: str) -> None:
    with jira_env(db_url, JIRA_APPROVE_STATUS="Ship it", JIRA_DONE_STATUS="") as env:
        run_id = env.start()
        issue = env.issue(run_id)
        assert "decides nothing" in env.send(env.transition(issue, "Approved")).json()["ignored"]
        assert "*Ship it*" in issue["fields"]["description"]


# -- Jira unavailable --------------------------------------------------------------------------------------------

def test_when_jira_is_down_the_webhook_asks_to_be_sent_again(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    env.fake.fail("GET", "^/myself$", status=502)  # Hazel cannot tell whether it wrote this itself
    payload = env.comment(issue, "/approve", person="lead")
    assert env.send(payload).status_code == 503
    unchanged(env, run_id)
    env.fake.fail("GET", "^/user$", status=503)  # nor read the person's groups
    assert env.send(payload).status_code == 503
    unchanged(env, run_id)
    assert env.send(payload).json()["decided"] == "approve"  # Jira sent it again: now it decides
    env.fake.fail("POST", "/comment$", status=503)
    payload = env.comment(issue, "/reject too late", person="stranger")
    assert env.send(payload).status_code == 503
    assert env.send(payload).json()["refused"]  # Jira Cloud sends it again; now the answer goes through
    (answer,) = env.fake.bodies(issue["id"])  # answered once
    # (the stranger may not reject there: told so, settled or not, never who approved it)
    assert "may not reject" in answer and "already" not in answer, answer


def test_a_signed_body_nested_too_deeply_or_not_utf8_gets_400_as_the_rest_api_says(env: JiraEnv) -> None:
    run_id = env.start()
    for raw, reason in ((b"[" * 100_000, "the body is nested too deeply to be read as JSON"),
                        (b"\xff\xfe", "the body is not valid UTF-8 (byte 0): send JSON in UTF-8")):
        answer = env.send(None, raw=raw, signature=p.sign(SECRET, raw))
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == f"malformed Jira webhook: {reason}"
    unchanged(env, run_id)


# -- late deliveries and races ---------------------------------------------------------------------------------

@BOTH
def test_a_late_delivery_answers_the_version_the_issue_showed_when_the_person_acted(env: JiraEnv) -> None:
    """A comment or a transition Jira delivers late (Hazel restarting, Jira retrying) is bound to the request
    the issue showed when it was written, never to a newer version asked since (as a Slack button is)."""
    from datetime import timedelta

    from tests.support.jira_env import OPERATOR

    run_id = env.start()
    issue = env.issue(run_id)
    first = env.pending(run_id)
    written = env.clock.now + timedelta(seconds=30)  # the SME acts on the first version ...
    env.clock.advance(60)  # ... and before Jira's webhooks reach Hazel, another channel sends it back
    env.hazel.decide(run_id=run_id, action="feedback", actor=OPERATOR, payload={"text": "add an index"},
                     request_id=first.id)
    assert env.drive(run_id).status is RunStatus.WAITING
    second = env.pending(run_id)
    assert second.id != first.id and env.issue(run_id)["id"] == issue["id"], "the issue asks again"
    comments = len(env.fake.bodies(issue["id"]))

    late = [env.comment(issue, "/approve", at=written), env.comment(issue, "Looks right to me.", at=written),
            env.transition(issue, "Approved", at=written)]
    for payload in late:
        answer = env.send(payload)
        assert answer.status_code == 200, answer.text
        refused = answer.json()["refused"]
        assert refused.startswith("already answered with feedback by priya at "), refused
        assert refused.endswith(f"This answered an earlier version of the issue; it now asks again (request "
                                f"{second.id}): read it and answer that one.") or "moved the issue back" in refused
        assert "still open" not in refused
    assert "Hazel moved the issue back to To Do." in env.fake.bodies(issue["id"])[-1]
    assert env.fake.status(issue["id"]) == "To Do"
    assert len(env.fake.bodies(issue["id"])) == comments + 3
    assert env.pending(run_id).id == second.id and env.pending(run_id).status is RequestStatus.PENDING
    assert [d.channel for d in env.hazel.decisions(run_id=run_id)] == ["console", "console"]

    # written after the second version was asked: it answers that one
    answer = env.send(env.comment(issue, "/approve", at=env.clock.now + timedelta(seconds=1)))
    assert answer.json()["decided"] == "approve"
    assert [(d.channel, d.request_id) for d in env.hazel.decisions(run_id=run_id)][-1] == ("jira", second.id)


def test_a_refusal_says_the_request_is_open_only_while_it_is(env: JiraEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another channel settles the request between the webhook's read of it and its decision: the refusal
    says who decided, not that the request is still open."""
    from tests.support.jira_env import OPERATOR

    run_id = env.start()
    issue = env.issue(run_id)
    decide = env.hazel.decide

    def settled_first(**kw):  # noqa: ANN003, ANN202
        decide(run_id=run_id, action="approve", actor=OPERATOR)  # (the console wins the race)
        return decide(**kw)

    monkeypatch.setattr(env.hazel, "decide", settled_first)
    refused = env.send(env.comment(issue, "/approve")).json()["refused"]
    assert refused.startswith("already approved by priya at ") and refused.endswith("Nothing changed."), refused
    monkeypatch.setattr(env.hazel, "decide", decide)

    # while the request is open, a refusal says so (a transition by someone not allowed, moved back)
    assert env.drive(run_id).status is RunStatus.WAITING
    refused = env.send(env.transition(env.issue(run_id), "Approved", person="stranger")).json()["refused"]
    assert "may not approve" in refused and "The request is still open. Hazel moved the issue back" in refused


@pytest.mark.parametrize("to, decided", [("Rejected", "reject"), ("Approved", "approve")])
def test_a_transitions_comment_delivered_before_the_transition_decides_as_the_transition(
        env: JiraEnv, to: str, decided: str) -> None:
    """A fresh-user finding: moving the issue to Rejected with a reason on the transition screen sends the
    status change and a ``comment_created`` for its comment, in no set order. When the comment came first it
    was taken as feedback (the run drafted again on a new issue) and the transition was dropped as its
    duplicate, the old issue left in Rejected. The comment on an issue the payload shows already moved is that
    transition: it decides what the person did, and the transition that follows is its duplicate."""
    run_id = env.start()
    issue = env.issue(run_id)
    before = env.fake.set_status(issue["id"], to)  # the person moves it, typing a reason on the screen
    comment = env.comment(env.fake.issue(issue["id"]), "The index would lock the table for an hour.")
    first = env.send(comment)
    assert first.json()["decided"] == decided, first.text
    moved = p.transition_event(env.fake.issue(issue["id"]), to, before, env.who["sme"], cloud=env.cloud,
                               base=env.fake.base, comment="The index would lock the table for an hour.",
                               comment_id=comment["comment"]["id"])
    assert env.send(moved).json() == {"duplicate": True}
    [decision] = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
    assert decision.action.value == decided
    if decided == "reject":
        assert decision.payload["reason"] == "The index would lock the table for an hour."
        assert env.hazel.get(run_id=run_id).status is RunStatus.REJECTED
    assert len(env.fake.issues) == 1, "no second issue: nothing was drafted again"


def test_a_transition_agreeing_with_a_settled_request_leaves_the_issue_where_it_is(env: JiraEnv) -> None:
    """A fresh-user finding: the run was rejected over REST (or the CLI); someone then moved its issue to
    Rejected, agreeing, and Hazel "moved the issue back to To Do": an ended run's issue looked open. A move
    that disagrees is still moved back."""
    from tests.support.jira_env import OPERATOR

    run_id = env.start()
    issue = env.issue(run_id)
    env.hazel.decide(run_id=run_id, action="reject", actor=OPERATOR, payload={"reason": "superseded"})
    status = env.fake.status(issue["id"])
    refused = env.send(env.transition(issue, "Rejected")).json()["refused"]
    assert refused.startswith("already rejected by priya at ") and refused.endswith(
        "The issue stays in Rejected, as the request was rejected."), refused
    assert env.fake.status(issue["id"]) == "Rejected"
    env.fake.set_status(issue["id"], status)
    refused = env.send(env.transition(issue, "Approved")).json()["refused"]
    assert "Hazel moved the issue back to" in refused and env.fake.status(issue["id"]) == status, refused


EDITED = '/edit {code:json}\n{"001_fix.up.sql": "SELECT 1;"}\n{code}'


@pytest.mark.parametrize("comment_first", [True, False], ids=["comment-first", "transition-first"])
@pytest.mark.parametrize("to, text, decided, reason", [
    ("Approved", EDITED, "edit", None),
    ("Approved", "/approve", "approve", None),
    ("Rejected", "/reject the index locks the table", "reject", "the index locks the table"),
    ("Rejected", "the index locks the table", "reject", "the index locks the table"),
    ("Approved", "/reject nope", None, None),
    ("Rejected", "/approve", None, None),
    ("Approved", "/feedback add a rollback", None, None),
    ("Approved", "/bogus", None, None),
], ids=["approve+edit", "approve+approve", "reject+reject", "reject+plain", "approve+reject", "reject+approve",
        "approve+feedback", "approve+unknown"])
def test_a_transition_with_a_command_reads_the_same_in_either_order(
        env: JiraEnv, comment_first: bool, to: str, text: str, decided: str | None, reason: str | None) -> None:
    """s25 F8: a transition made with a command in its comment reaches Hazel as a status change and a
    ``comment_created``, in no set order, and was read differently by each: moved to Approved with ``/edit …``,
    the status change approved the draft unedited (the edit dropped without a word) while the comment edited it;
    moved to Approved with ``/reject nope``, one approved and the other rejected, the issue left in Approved. The
    two now read the same: a command that agrees with the move decides (an edit approves), one that disagrees
    decides nothing, is answered, and the issue is moved back."""
    run_id = env.start()
    issue = env.issue(run_id)
    before = env.fake.set_status(issue["id"], to)  # the person moves it, typing the comment on the screen
    comment = env.comment(env.fake.issue(issue["id"]), text, comment_id="7001")
    moved = p.transition_event(env.fake.issue(issue["id"]), to, before, env.who["sme"], cloud=env.cloud,
                               base=env.fake.base, comment=text, comment_id="7001")
    first, second = (comment, moved) if comment_first else (moved, comment)
    answer = env.send(first).json()
    then = env.send(second).json()
    if decided is None:
        assert "the two disagree, so neither counts. Nothing changed." in answer["refused"], answer
        if comment_first:  # (a comment's webhook does not say which status the issue left: its status change,
            assert answer["refused"].endswith(  # the duplicate, does, and the issue is moved back then: s30 F4)
                f"The issue is still in {to}: Hazel moves it back once Jira reports the move (else move it back by "
                "hand)."), answer
            assert then == {"duplicate": True, "answered": f"Hazel moved the issue back to {before}."}, then
            assert env.fake.status(issue["id"]) == before
        else:
            assert then == {"duplicate": True}, then
            assert f"Hazel moved the issue back to {before}" in answer["refused"], answer
            assert env.fake.status(issue["id"]) == before
        unchanged(env, run_id, comments_before=2 if comment_first else 1)
        return
    assert then == {"duplicate": True}, then
    assert answer["decided"] == decided, answer
    [decision] = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
    assert decision.action.value == decided
    if reason is not None:
        assert decision.payload["reason"] == reason
    if decided == "edit":
        env.drive(run_id)
        assert env.hazel.state_at(run_id=run_id).scripts == {"001_fix.up.sql": "SELECT 1;"}


def test_an_edit_of_a_comment_that_decided_is_answered(env: JiraEnv) -> None:
    """s25 F15: a feedback comment edited into ``/approve`` was taken as the feedback's duplicate without a word,
    and the person believed they had approved. The decision stands as first taken and the person is told so."""
    run_id = env.start()
    issue = env.issue(run_id)
    first = env.send(env.comment(issue, "please add a rollback section", comment_id="7770001")).json()
    assert first["decided"] == "feedback", first
    env.drive(run_id)
    edited = env.send(env.comment(issue, "/approve", comment_id="7770001", event="comment_updated")).json()
    assert edited["duplicate"] is True and edited["decided"] == "feedback", edited
    [feedback] = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
    assert edited["answered"] == (
        f"This comment was already counted: {'answered with feedback'} at "
        f"{feedback.created_at.strftime('%Y-%m-%d %H:%M UTC')}. Editing it changes nothing; to answer again, add "
        "a new comment."), edited
    assert env.fake.bodies(issue["id"])[-1].endswith(edited["answered"])
    assert env.hazel.get(run_id=run_id).status is RunStatus.WAITING  # (at the redraft: nothing was approved)


def test_feedback_written_before_another_channel_settled_is_answered(env: JiraEnv) -> None:
    """s25 F13: feedback written while the request was pending and delivered just after someone approved it on
    another channel, while the run executed its next step, was ignored as a comment, without a word. It is
    refused now, saying who settled it; a comment written after the settlement is still only a comment."""
    from datetime import datetime, timedelta, timezone

    from tests.support.jira_env import OPERATOR

    run_id = env.start()
    issue = env.issue(run_id)
    written = env.clock() - timedelta(seconds=2)  # (Hazel's clock, which the approval is stamped by: the real
    # one's "2 s ago" was after it on a machine that took more than 2 s to start the run, since env's is fixed)
    env.hazel.decide(run_id=run_id, action="approve", actor=OPERATOR)  # (not driven: the next step "executes")
    assert env.hazel.get(run_id=run_id).status is not RunStatus.WAITING
    late = env.send(env.comment(issue, "rework please: the plan misses the rollback", at=written)).json()
    assert late["refused"].startswith("already approved by priya at "), late
    assert env.fake.bodies(issue["id"])[-1].endswith(late["refused"])
    after = env.send(env.comment(issue, "thanks, looks good", comment_id="7770002",
                                 at=datetime.now(timezone.utc) + timedelta(seconds=1))).json()
    assert after == {"ignored": "a comment, not a decision"}, after
    assert [d.channel for d in env.hazel.decisions(run_id=run_id)] == ["console", "console"]


def test_an_empty_edit_is_refused_after_whether_the_person_may_edit(env: JiraEnv) -> None:
    """s25 F1: ``/edit`` with no value from a person who may not steer was answered how to form the command,
    where ``/reject`` without a reason was answered that they may not: whether a person may act comes first."""
    run_id = env.start()
    issue = env.issue(run_id)
    stranger = env.send(env.comment(issue, "/edit", person="stranger")).json()
    assert "may not edit" in stranger["refused"] and "/edit needs" not in stranger["refused"], stranger
    approver = env.send(env.comment(issue, "/edit  ", comment_id="7770003")).json()
    assert approver["refused"].startswith("/edit needs the new value after it. Nothing changed."), approver
    unchanged(env, run_id, comments_before=2)


def test_a_request_nobody_left_may_decide_says_so(db_url: str, tmp_path) -> None:  # noqa: ANN001
    """s25 F11: sam started a run whose point lists only sam with self-approval off (``hazel workflows`` warns it
    waits for ever); the issue said "Who may decide: sam" and a refusal "Who may steer this request: sam",
    naming the one person who would be refused. Both say nobody left may decide."""
    from hazel import StepContext, Workflow
    from store.models import Actor, Approvers
    from tests.support.jira_env import people as jira_people
    from tests.workflows.doc import Doc

    sme = jira_people(True)["sme"]
    (tmp_path / "people.toml").write_text(f'[people.sam]\njira = ["{sme}"]\n')
    wf = Workflow("selfish", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state

    wf.steer("check", title="Self check", channel="jira:MIG", approvers=Approvers(people=("sam",)),
             allow_self_approval=False)
    with jira_env(db_url, workflows=[wf], HAZEL_PEOPLE_FILE=str(tmp_path / "people.toml")) as env:
        run = env.hazel.start(workflow="selfish", input={"topic": "mine"},
                              actor=Actor(id="sam", channel="console", name="sam", person="sam"))
        env.drive(run.id)
        issue = env.issue(run.id)
        assert "*Who may decide:* nobody: none of" in issue["fields"]["description"], issue["fields"]["description"]
        refused = env.send(env.comment(issue, "/approve")).json()["refused"]
        assert "Nobody left may steer this request" in refused and "Who may steer" not in refused, refused
        assert env.hazel.get(run_id=run.id).status is RunStatus.WAITING


def test_a_request_asked_again_on_a_new_issue_is_named_on_the_closed_one(env: JiraEnv) -> None:
    """s25 F3: a rejected run rewound from its (closed) issue asked again on a new issue that nothing on the old
    one named: the SME kept reading a closed issue. The closed issue now says where the run asks."""
    run_id = env.start()
    issue = env.issue(run_id)
    assert env.send(env.transition(issue, "Rejected", comment="wrong table")).json()["decided"] == "reject"
    env.hazel.deliverer.deliver_due()
    rewound = env.send(env.comment(env.fake.issue(issue["id"]), "/rewind write_scripts try again",
                                   comment_id="8801")).json()
    assert rewound["decided"] == "rewind", rewound
    env.drive(run_id)
    new = env.issue(run_id)
    assert new["id"] != issue["id"]
    said = [b for b in env.fake.bodies(issue["id"]) if "asks again" in b]
    assert said == [f"This run asks again at Review the migration scripts (request #{env.pending(run_id).id}) on "
                    f"{new['key']}: answer there; this issue, in {env.fake.status(issue['id'])}, is not asked on "
                    "again."], env.fake.bodies(issue["id"])


@pytest.mark.parametrize("person, refused", [("sme", "/edit needs the new value after it. Nothing changed."),
                                             ("stranger", "may not edit")])
def test_an_empty_edit_with_a_move_is_refused_as_a_comments_is(env: JiraEnv, person: str, refused: str) -> None:
    """An empty ``/edit`` typed with a move to the approve status is answered as the same comment alone is: who
    may not edit is told so first (s25 F1), an approver that the edit needs its value; the issue moved back."""
    run_id = env.start()
    issue = env.issue(run_id)
    before = env.fake.set_status(issue["id"], "Approved")
    moved = p.transition_event(env.fake.issue(issue["id"]), "Approved", before, env.who[person], cloud=env.cloud,
                               base=env.fake.base, comment="/edit", comment_id="7101")
    answer = env.send(moved).json()
    assert refused in answer["refused"] and f"Hazel moved the issue back to {before}" in answer["refused"], answer
    assert env.fake.status(issue["id"]) == before
    assert env.pending(run_id) is not None and env.hazel.get(run_id=run_id).status is RunStatus.WAITING
