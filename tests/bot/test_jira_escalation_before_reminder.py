"""When a reminder and the escalation of a request fall due together (a catch-up after the scheduler was stopped
over both, or the same moment), the escalation is queued, and posted, first: the reminder after it already names
the backup approvers it announces (s25 F6). Served as ``hazel serve`` serves it, Jira Server faked at its HTTP
boundary, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from bot.ops.scheduler import Scheduler
from store.models import Actor, Approvers, RunStatus
from tests.bot.test_jira_fresh_user_b import HOUR, served, timed

OPS = Actor(id="ops", channel="console", name="ops")


def test_an_escalation_goes_before_the_reminder_that_falls_due_with_it(db_url: str, tmp_path: Path) -> None:
    """A catch-up (the scheduler stopped over the escalation) fires the escalation and a reminder together: the
    issue gets the escalation first, then the reminder naming the backup approver it announced."""
    wf = timed(approvers=Approvers(people=("priya",)), remind_after_sec=HOUR, remind_every_sec=HOUR,
               escalate_after_sec=2 * HOUR, escalate_to=Approvers(jira_users=("boss.b",)))
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, _):
        run = hazel.start(workflow="timed", input={}, actor=OPS)
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
        hazel.deliverer.deliver_due()
        [issue] = fake.issues.values()
        scheduler = Scheduler(hazel)
        clock.advance(HOUR)
        assert len(scheduler.tick().reminders) == 1
        hazel.deliverer.deliver_due()
        clock.advance(1.5 * HOUR)  # stopped over the reminder slot and the escalation, both at 2 h
        report = scheduler.tick()
        assert len(report.reminders) == 1 and len(report.escalations) == 1
        hazel.deliverer.deliver_due()
        bodies = [b for b in fake.bodies(issue["id"]) if b.startswith(("Reminder:", "(!) Escalated"))]
        assert len(bodies) == 3, bodies
        assert bodies[1].startswith("(!) Escalated"), bodies
        assert bodies[2].startswith("Reminder:") and "[~boss.b]" in bodies[2], bodies
        with hazel.store.read() as tx:
            queued = sorted((m.id, m.kind, m.status.value) for m in tx.outbox.list(run_id=run.id)
                            if m.kind in ("reminder", "escalation"))
        assert [(kind, status) for _, kind, status in queued] == [("reminder", "sent"), ("escalation", "sent"),
                                                                  ("reminder", "sent")]
        events = [e.action for e in hazel.audit(run_id=run.id) if e.action in ("request.reminded",
                                                                               "request.escalated")]
        assert events == ["request.reminded", "request.escalated", "request.reminded"]
