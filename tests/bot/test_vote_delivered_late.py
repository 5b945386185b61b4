"""A quorum vote's message (``request.vote``) carries the vote as it was counted (``store.models.Vote``: who, k
of n), so a vote delivered after the request settled (Jira unreachable for a while, the outbox retrying it) still
says "Approval 1 of 2 from priya", and the outcome is said once, by the ``request.closed`` message after it
(s25 F2: it was a second "(/) Approved by sam." and priya's vote never appeared). On the Jira issue (served as
``hazel serve`` serves it, signed webhooks over real HTTP, Jira Server faked at its HTTP boundary) and on the
console, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from hazel import StepContext, Workflow
from store.models import Approvers, RunStatus
from tests.bot.test_jira_fresh_user_b import HOUR, SECRET, served, timed
from tests.support import jira_payloads as p
from tests.support.engine import make_hazel, person

pytestmark = pytest.mark.usefixtures("offline_example")


def test_a_jira_vote_delivered_after_the_request_settled_names_the_voter(db_url: str, tmp_path: Path) -> None:
    wf = timed(approvers=Approvers(people=("priya", "sam")), approvals_required=2)
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, url):
        run = hazel.start(workflow="timed", input={}, actor=person("ops"))
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
        hazel.deliverer.deliver_due()
        issue = fake.issue(hazel.pending_request(run_id=run.id).message_ref["issue_id"])
        fake.fail("POST", "/comment$", times=1)  # Jira answers 503 to priya's vote's comment: retried later
        vote = p.send(url, p.comment_event(issue, "/approve", "priya.k", cloud=False, base=fake.base), secret=SECRET)
        assert vote.status_code == 200 and vote.json()["decided"] == "approve", vote.text
        hazel.deliverer.deliver_due()
        assert fake.bodies(issue["id"]) == []
        last = p.send(url, p.comment_event(issue, "/approve", "sam.sme", cloud=False, base=fake.base), secret=SECRET)
        assert last.json()["decided"] == "approve", last.text
        assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED  # settled before the vote is delivered
        clock.advance(HOUR)  # the vote's retry is due
        while hazel.deliverer.deliver_due():
            pass
        assert fake.bodies(issue["id"]) == ["Approval 1 of 2 from priya; waiting for 1 more.",
                                            "(/) Approved by sam.",
                                            f"(/) Run {run.id} completed after publish."]
        assert fake.status(issue["id"]) == "Done"


class Doc(BaseModel):
    text: str = ""


def quorum() -> Workflow:
    wf = Workflow("quorum", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return Doc(text="a draft")

    wf.steer("sign", title="Sign it", show="text", approvers=Approvers(users=("olga", "sam")),
             approvals_required=2)
    return wf


def test_a_console_vote_delivered_after_the_request_settled_names_the_voter(db_url: str) -> None:
    hazel = make_hazel(db_url, quorum())
    run = hazel.start(workflow="quorum", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    hazel.deliver_due()
    hazel.decide(run_id=run.id, action="approve", actor=person("olga"))
    hazel.decide(run_id=run.id, action="approve", actor=person("sam"))  # settles it before the vote is shown
    hazel.deliver_due()
    printed = re.sub(r"\s+", " ", hazel.console_buffer.getvalue())
    assert f"run {run.id}: 1/2 approvals at 'Sign it': olga approved" in printed, printed
    assert len(re.findall(rf"run {run.id}: 'Sign it' approved by sam\b", printed)) == 1, printed
