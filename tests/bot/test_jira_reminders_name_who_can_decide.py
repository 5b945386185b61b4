"""A Jira reminder names (and mentions) those who can still move the request: its approvers, plus the backup
approvers once escalated, minus the people whose vote is in and the starter under a self-approval ban
(``bot.engine.permissions.still_deciding``, computed once in the request view). Served as ``hazel serve``
serves it, signed webhooks over real HTTP, Jira Server faked at its HTTP boundary, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from bot.ops.scheduler import Scheduler
from store.models import Actor, Approvers, RunStatus
from tests.bot.test_jira_fresh_user_b import HOUR, SECRET, served, timed
from tests.support import jira_payloads as p


def reminders(fake, issue_id: str) -> list[str]:  # noqa: ANN001
    return [b for b in fake.bodies(issue_id) if b.startswith("Reminder:")]


def test_a_jira_reminder_names_only_who_can_still_decide(db_url: str, tmp_path: Path) -> None:
    wf = timed(approvers=Approvers(people=("priya", "sam"), jira_users=("lee.lead",)), approvals_required=2,
               allow_self_approval=False, remind_after_sec=HOUR, remind_every_sec=HOUR,
               escalate_after_sec=2.5 * HOUR, escalate_to=Approvers(jira_users=("olga.o",)), timeout_sec=48 * HOUR)
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, url):
        run = hazel.start(workflow="timed", input={}, actor=Actor(id="priya", channel="console", name="priya"))
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
        issue = fake.issue(hazel.pending_request(run_id=run.id).message_ref["issue_id"])
        vote = p.send(url, p.comment_event(issue, "/approve", "sam.sme", cloud=False, base=fake.base), secret=SECRET)
        assert vote.status_code == 200, vote.text
        assert hazel.pending_request(run_id=run.id).approvals == 1
        scheduler = Scheduler(hazel)
        clock.advance(HOUR)
        assert len(scheduler.tick().reminders) == 1
        hazel.deliverer.deliver_due()
        [first] = reminders(fake, issue["id"])
        assert first.startswith("Reminder: this request is still waiting for [~lee.lead] (since "), first
        assert "priya" not in first and "sam" not in first, first
        clock.advance(1.5 * HOUR)  # t = 2.5 h: the escalation (a reminder at 2 h on the way)
        scheduler.tick()
        hazel.deliverer.deliver_due()
        assert hazel.pending_request(run_id=run.id).escalated_at is not None
        clock.advance(HOUR)
        scheduler.tick()
        hazel.deliverer.deliver_due()
        last = reminders(fake, issue["id"])[-1]
        assert last.startswith("Reminder: this request is still waiting for [~lee.lead], [~olga.o] (since "), last


def test_a_jira_reminder_says_so_when_nobody_left_can_decide(db_url: str, tmp_path: Path) -> None:
    wf = timed(approvers=Approvers(people=("priya", "sam")), approvals_required=2, allow_self_approval=False,
               remind_after_sec=HOUR)
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, url):
        run = hazel.start(workflow="timed", input={}, actor=Actor(id="priya", channel="console", name="priya"))
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
        issue = fake.issue(hazel.pending_request(run_id=run.id).message_ref["issue_id"])
        vote = p.send(url, p.comment_event(issue, "/approve", "sam.sme", cloud=False, base=fake.base), secret=SECRET)
        assert vote.status_code == 200, vote.text
        clock.advance(HOUR)
        assert len(Scheduler(hazel).tick().reminders) == 1
        hazel.deliverer.deliver_due()
        [text] = reminders(fake, issue["id"])
        assert "none of its approvers can decide it any more" in text and "[~" not in text, text
