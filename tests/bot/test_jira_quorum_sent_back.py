"""A quorum's first vote moves the issue to the approve status and Hazel leaves it there while the request waits
for more approvals; when the request is then sent back (feedback), the issue was left Approved for good and the
point, asking again, opened a second issue beside it saying the first "is closed" (a fresh-user finding, s30
F5): the board showed a version approved that never was. Hazel moves it back to an open status, and the point
asks again on it. Served as ``hazel serve`` serves it, Jira Server faked at its HTTP boundary."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.models import Approvers, RunStatus
from tests.bot.test_jira_fresh_user_b import SECRET, served, timed
from tests.support import jira_payloads as p
from tests.support.engine import person

pytestmark = pytest.mark.usefixtures("offline_example")


def test_a_quorum_request_sent_back_after_one_vote_reopens_its_issue(db_url: str, tmp_path: Path) -> None:
    wf = timed(approvers=Approvers(people=("priya", "sam")), approvals_required=2,
               actions=["approve", "feedback"], on_feedback="draft")
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, url):
        run = hazel.start(workflow="timed", input={}, actor=person("ops"))
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
        hazel.deliverer.deliver_due()
        issue = fake.issue(hazel.pending_request(run_id=run.id).message_ref["issue_id"])
        before = fake.set_status(issue["id"], "Approved")  # priya's vote, moving the issue
        moved = p.transition_event(fake.issue(issue["id"]), "Approved", before, "priya.k", cloud=False, base=fake.base)
        assert p.send(url, moved, secret=SECRET).json()["decided"] == "approve"
        hazel.deliverer.deliver_due()
        assert fake.status(issue["id"]) == "Approved"  # (waiting for one more)
        sent_back = p.send(url, p.comment_event(fake.issue(issue["id"]), "please add a rollback step", "sam.sme",
                                                cloud=False, base=fake.base), secret=SECRET)
        assert sent_back.json()["decided"] == "feedback", sent_back.text
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING  # drafted again, asking again
        while hazel.deliverer.deliver_due():
            pass
        assert fake.status(issue["id"]) == before == "To Do"
        assert len(fake.issues) == 1, "the point asks again on the same issue"
        assert hazel.pending_request(run_id=run.id).message_ref["issue_id"] == issue["id"]
        said = fake.bodies(issue["id"])
        assert any("(Hazel moved this issue back to *To Do*: this version got 1 of 2 approvals and was not "
                   "approved.)" in b for b in said), said
        assert any(b.startswith("A new version is ready for review") for b in said), said
