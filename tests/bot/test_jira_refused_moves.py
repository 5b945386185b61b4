"""Where a refused move leaves a Jira issue (fresh-user findings, s30): a move whose comment's webhook came
first was never moved back, and while the issue stayed in the approve or reject status the next approver's
plain comment was read as that move (F4: a question rejected the run); a refused move delivered after Hazel
had closed the issue took it from Done back to To Do (F2); a comment holding a lone surrogate was a 500 (F1)."""

from __future__ import annotations

import json
from typing import Iterator

import pytest

from store.models import RequestStatus, RunStatus
from tests.support import jira_payloads as p
from tests.support.jira_env import OPERATOR, JiraEnv, jira_env


@pytest.fixture
def env(db_url: str) -> Iterator[JiraEnv]:
    with jira_env(db_url) as e:
        e.fake.groups.update({e.who["lead"]: ["dba", "jira-users"], e.who["stranger"]: ["jira-users"]})
        yield e


def _moved_with_a_comment(env: JiraEnv, run_id: str, to: str, text: str, person: str) -> tuple[dict, dict, str]:
    """``person`` moves the run's issue to ``to`` typing ``text`` on the screen: (its comment's webhook, its
    status change's, the status it left)."""
    issue = env.issue(run_id)
    before = env.fake.set_status(issue["id"], to)
    comment = env.comment(env.fake.issue(issue["id"]), text, person, comment_id="7101")
    moved = p.transition_event(env.fake.issue(issue["id"]), to, before, env.who[person], cloud=env.cloud,
                               base=env.fake.base, comment=text, comment_id="7101")
    return comment, moved, before


@pytest.mark.parametrize("to, text, person", [("Rejected", "lgtm", "stranger"), ("Approved", "/reject nope", "sme")],
                         ids=["a-strangers-move", "a-move-its-comment-disagrees-with"])
def test_a_refused_move_whose_comment_came_first_is_moved_back_and_a_plain_comment_meanwhile_is_a_comment(
        env: JiraEnv, to: str, text: str, person: str) -> None:
    run_id = env.start()
    issue_id = env.issue(run_id)["id"]
    comment, moved, before = _moved_with_a_comment(env, run_id, to, text, person)
    refused = env.send(comment).json()["refused"]
    assert refused.endswith(f"The issue is still in {to}: Hazel moves it back once Jira reports the move (else "
                            "move it back by hand)."), refused
    # the status change is late; an approver asks a question in a plain comment, the payload showing the issue
    # still where the refused move left it: feedback, never that move again
    question = env.send(env.comment(env.fake.issue(issue_id), "what about the index on orders?")).json()
    assert question["decided"] == "feedback", question
    [decision] = [d for d in env.hazel.decisions(run_id=run_id) if d.channel == "jira"]
    assert decision.action.value == "feedback" and decision.payload["text"] == "what about the index on orders?"
    assert env.hazel.get(run_id=run_id).status is not RunStatus.REJECTED
    late = env.send(moved).json()  # the status change: its issue is moved back now
    assert late == {"duplicate": True, "answered": f"Hazel moved the issue back to {before}."}, late
    assert env.fake.status(issue_id) == before
    assert env.send(moved).json() == {"duplicate": True}  # (Jira's retry: nothing more)


def test_a_status_change_arriving_while_its_comment_is_handled_moves_the_issue_back_at_once(env: JiraEnv) -> None:
    """The two webhooks of one move come at once: the status change, dropped as the duplicate of the comment
    still being handled, hands over the status the issue left."""
    run_id = env.start()
    issue_id = env.issue(run_id)["id"]
    comment, moved, before = _moved_with_a_comment(env, run_id, "Rejected", "lgtm", "stranger")
    from bot.inbound.jira import _Unmoved, _key
    from integrations.jira import parse_event

    unmoved = _Unmoved()
    key = _key(parse_event(comment, webhook_id=None))
    assert key == _key(parse_event(moved, webhook_id=None))  # one key: one decides, the other is its duplicate
    assert unmoved.companion(key, before) is None  # the status change came first, its comment still handled
    assert unmoved.left(key, issue_id, "Rejected") == before  # so the comment's refusal moves the issue back
    assert not unmoved.holds(issue_id, "Rejected")


def test_a_refused_move_delivered_after_hazel_closed_the_issue_leaves_it_closed(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.issue(run_id)
    late = env.transition(issue, "Rejected", "stranger")  # made now, delivered after the approval below
    env.hazel.decide(run_id=run_id, action="approve", actor=OPERATOR)
    env.drive(run_id)
    closed = env.fake.status(issue["id"])
    assert closed == "Done", closed
    refused = env.send(late).json()["refused"]
    assert refused.endswith("The issue is in Done now, so Hazel left it there."), refused
    assert env.fake.status(issue["id"]) == "Done"
    assert env.hazel.get(run_id=run_id).status is RunStatus.WAITING  # (at the sign-off: not rejected)


def test_a_comment_holding_a_lone_surrogate_is_answered_not_a_500(env: JiraEnv) -> None:
    run_id = env.start()
    issue = env.fake.issue(env.issue(run_id)["id"])
    payload = env.comment(issue, "feedback \ud83d here")
    assert "\\ud83d" in json.dumps(payload)  # (sent ASCII-escaped, as JSON carries a lone surrogate)
    response = env.send(payload)
    assert response.status_code == 200, response.text
    assert "not Unicode text" in response.json()["refused"], response.text
    assert env.pending(run_id).status is RequestStatus.PENDING
    # an account id holding one (s31 F9): the group lookup sent it to Jira first, a 500
    odd = env.send(env.comment(issue, "/approve", "557058:ev\ud800il", comment_id="7202"))
    assert odd.status_code == 200 and "may not approve" in odd.json()["refused"], odd.text
    refused = [e for e in env.hazel.audit(run_id=run_id) if e.action == "decision.refused"]
    assert refused[-1].person == "jira:557058:ev\ufffdil", refused[-1]
    assert env.pending(run_id).status is RequestStatus.PENDING
