"""A reminder that could not be delivered before a later reminder or escalation of its request was queued on its
channel (Jira or Slack unreachable meanwhile), or before its request was settled, is not sent late: the outbox
marks it ``superseded`` with the reason, so that when the channel comes back the approvers get the latest notice,
once, not one per missed slot (s25 F18). The mechanism is the deliverer's, on every channel: console and Jira
here, each on SQLite and PostgreSQL, Jira's server faked at its HTTP boundary (Slack:
``tests/bot/slack/test_slack_superseded_reminders.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pydantic import BaseModel

from bot.engine.workflow import StepContext, Workflow
from bot.ops.scheduler import Scheduler
from store.models import Actor, Approvers, RunStatus
from tests.bot.test_jira_fresh_user_b import HOUR, served, timed
from tests.support import engine
from tests.support.cli import in_process_cli
from tests.support.clock import FakeClock
from tests.support.engine import person

OPS = Actor(id="ops", channel="console", name="ops")


def notices(hazel, run_id: str) -> list:  # noqa: ANN001
    """The run's reminder and escalation outbox rows, oldest first."""
    with hazel.store.read() as tx:
        return sorted((m for m in tx.outbox.list(run_id=run_id, limit=1000) if m.kind in ("reminder", "escalation")),
                      key=lambda m: m.id)


def statuses(rows: list) -> list[tuple[str, str]]:
    return [(m.kind, m.status.value) for m in rows]


# -- Jira: down while the slots pass ---------------------------------------------------------------------------


def test_reminders_queued_while_jira_is_down_are_superseded_by_the_latest(db_url: str, tmp_path: Path) -> None:
    wf = timed(approvers=Approvers(people=("priya",), jira_users=("lee.lead",)), remind_after_sec=HOUR,
               remind_every_sec=HOUR)
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, _):
        fake.fail("POST", ".", times=10**6)  # Jira down: the issue cannot be created
        fake.fail("GET", ".", times=10**6)
        run = hazel.start(workflow="timed", input={}, actor=OPS)
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
        hazel.deliverer.deliver_due()
        assert fake.issues == {}
        scheduler = Scheduler(hazel)
        for _ in range(5):  # five reminder slots, each fired on time, none deliverable
            clock.advance(HOUR)
            assert len(scheduler.tick().reminders) == 1
            hazel.deliverer.deliver_due()
        assert fake.issues == {}
        assert statuses(notices(hazel, run.id)) == [("reminder", "pending")] * 5

        fake.failures.clear()  # Jira is back
        clock.advance(HOUR - 1)  # (past every backoff; before the next slot)
        hazel.deliverer.deliver_due()  # one pass: the issue, then the latest reminder only

        [issue] = fake.issues.values()
        reminders = [b for b in fake.bodies(issue["id"]) if b.startswith("Reminder:")]
        assert len(reminders) == 1, fake.bodies(issue["id"])
        rows = notices(hazel, run.id)
        assert statuses(rows) == [("reminder", "superseded")] * 4 + [("reminder", "sent")]
        latest = rows[-1]
        for row in rows[:-1]:
            assert row.last_error == (f"a later reminder (message {latest.id}) was queued before it could be "
                                      "delivered"), row
        with hazel.store.read() as tx:  # not part of the backlog, not retried
            assert tx.outbox.list(status="pending", run_id=run.id) == []
            assert tx.outbox.backlog().get("superseded") == 4
        assert hazel.retry_dead_outbox() == 0
        hazel.deliverer.deliver_due()
        assert len([b for b in fake.bodies(issue["id"]) if b.startswith("Reminder:")]) == 1


def test_an_escalation_supersedes_the_reminders_before_it_but_not_the_one_after(db_url: str,
                                                                                tmp_path: Path) -> None:
    wf = timed(approvers=Approvers(people=("priya",)), remind_after_sec=HOUR, remind_every_sec=HOUR,
               escalate_after_sec=2.5 * HOUR, escalate_to=Approvers(jira_users=("boss.b",)))
    with served(db_url, tmp_path, wf) as (hazel, fake, clock, _):
        fake.fail("POST", ".", times=10**6)
        fake.fail("GET", ".", times=10**6)
        run = hazel.start(workflow="timed", input={}, actor=OPS)
        assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
        scheduler = Scheduler(hazel)
        for step in (HOUR, HOUR, 0.5 * HOUR, 0.5 * HOUR):  # reminders at 1 h, 2 h; escalation; reminder at 3 h
            clock.advance(step)
            scheduler.tick()
            hazel.deliverer.deliver_due()
        assert statuses(notices(hazel, run.id)) == [("reminder", "pending"), ("reminder", "pending"),
                                                    ("escalation", "pending"), ("reminder", "pending")]
        fake.failures.clear()
        clock.advance(0.9 * HOUR)
        hazel.deliverer.deliver_due()
        [issue] = fake.issues.values()
        bodies = [b for b in fake.bodies(issue["id"]) if b.startswith(("Reminder:", "(!) Escalated"))]
        assert [b.split(":")[0] for b in bodies] == ["(!) Escalated", "Reminder"], bodies
        assert statuses(notices(hazel, run.id)) == [("reminder", "superseded"), ("reminder", "superseded"),
                                                    ("escalation", "sent"), ("reminder", "sent")]


# -- console: any channel --------------------------------------------------------------------------------------


class Doc(BaseModel):
    text: str = ""


def console_flow(**steer: object) -> Workflow:
    wf = Workflow("remindme", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> dict:
        return {"text": "draft"}

    wf.steer("review", title="Review", show="text", **steer)
    return wf


@pytest.mark.usefixtures("offline_example")
def test_console_reminders_piled_up_print_once(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    clock = FakeClock()
    hazel = engine.make_hazel(db_url, console_flow(remind_after_sec=HOUR, remind_every_sec=HOUR), clock=clock)
    run = hazel.start(workflow="remindme", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    hazel.deliverer.deliver_due()
    scheduler = Scheduler(hazel)
    for _ in range(3):  # three slots fired, nothing delivered meanwhile (no process delivering)
        clock.advance(HOUR)
        assert len(scheduler.tick().reminders) == 1
    assert hazel.deliverer.deliver_due() == 1
    assert hazel.console_buffer.getvalue().count("Reminder: Review") == 1
    rows = notices(hazel, run.id)
    assert statuses(rows) == [("reminder", "superseded")] * 2 + [("reminder", "sent")]
    # hazel outbox: superseded beside sent, not in the backlog; --status superseded lists them with the reason
    cli = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows="examples.migration_plan")
    first = cli("outbox").stdout.splitlines()[0]
    assert first.startswith("backlog: empty (sent ") and first.endswith(", superseded 2)"), first
    listed = cli("outbox", "--status", "superseded", "--run", run.id).stdout
    reason = f"a later reminder (message {rows[-1].id}) was queued before it could be delivered"
    assert listed.count(reason) == 2 and listed.count("superseded") >= 3, listed


def test_a_reminder_of_a_request_settled_before_it_was_delivered_is_not_posted(db_url: str) -> None:
    clock = FakeClock()
    hazel = engine.make_hazel(db_url, console_flow(remind_after_sec=HOUR, remind_every_sec=HOUR,
                                                   escalate_after_sec=HOUR, escalate_to=Approvers(users=["lead"])),
                              clock=clock)
    run = hazel.start(workflow="remindme", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    hazel.deliverer.deliver_due()
    clock.advance(HOUR)
    report = Scheduler(hazel).tick()
    assert len(report.reminders) == 1 and len(report.escalations) == 1
    hazel.decide(run_id=run.id, action="approve", actor=person("priya"))  # before the deliverer came round
    hazel.deliverer.deliver_due()
    shown = hazel.console_buffer.getvalue()
    assert "Reminder: Review" not in shown and "Escalated: Review" not in shown, shown
    rows = notices(hazel, run.id)
    assert statuses(rows) == [("escalation", "superseded"), ("reminder", "superseded")]
    assert {r.last_error for r in rows} == {f"request {rows[0].request_id} was approved before it could be "
                                            "delivered"}
