"""Reminders, escalation and timeouts, fired by ``Scheduler.tick()`` under a clock the tests move by hand.

Everything runs on SQLite and PostgreSQL. What is checked is what the database holds afterwards: outbox rows,
audit events, decisions (a timeout's recorded as the timeout's), request and run states.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import BaseModel

from hazel import Approvers, StepContext, Workflow
from bot.engine.errors import NotAllowedError, WorkflowDefinitionError
from bot.ops.scheduler import Scheduler
from store.models import RequestStatus, RunStatus
from tests.support import engine
from tests.support.clock import FakeClock
from tests.support.engine import person

HOUR = 3600.0


class Doc(BaseModel):
    text: str = ""
    published: bool = False
    drafts: int = 0


def timed(**steer: object) -> Workflow:
    """draft -> review (a steering point with ``steer`` options) -> publish."""
    wf = Workflow("timed", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> dict:
        return {"text": f"draft {state.drafts + 1}", "drafts": state.drafts + 1}

    wf.steer("review", show="text", **steer)

    @wf.step
    def publish(state: Doc, ctx: StepContext) -> dict:
        return {"published": True}

    return wf


OPEN: list = []
"""Every Hazel these tests build, closed after each test (PostgreSQL connections are shared by all helpers)."""


def make_hazel(db_url: str, *workflows: Workflow, **kwargs: object):  # noqa: ANN201
    hazel = engine.make_hazel(db_url, *workflows, **kwargs)
    OPEN.append(hazel)
    return hazel


@pytest.fixture(autouse=True)
def close_hazels():  # noqa: ANN201
    yield
    while OPEN:
        OPEN.pop().close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def waiting(db_url: str, clock: FakeClock, **steer: object):  # noqa: ANN201
    """A Hazel on ``db_url`` with the ``timed`` workflow, a scheduler, and one run waiting at review."""
    hazel = make_hazel(db_url, timed(**steer), clock=clock)
    run = hazel.start(workflow="timed", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    return hazel, Scheduler(hazel), run.id


def outbox(hazel, kind: str) -> list:  # noqa: ANN001
    with hazel.store.read() as tx:
        return sorted((m for m in tx.outbox.list(limit=1000) if m.kind == kind), key=lambda m: m.id)


def events(hazel, run_id: str, action: str) -> list:  # noqa: ANN001
    return [e for e in hazel.audit(run_id=run_id) if e.action == action]


def request_of(hazel, run_id: str):  # noqa: ANN001, ANN201
    return hazel.requests(run_id=run_id)[-1]


# -- scheduling at open ---------------------------------------------------------------------------------------


def test_open_request_schedules_the_earliest_action(db_url: str, clock: FakeClock) -> None:
    hazel, _, run_id = waiting(db_url, clock, remind_after_sec=4 * HOUR, escalate_after_sec=2 * HOUR,
                               escalate_to=Approvers(users=["lead"]), timeout_sec=8 * HOUR, on_timeout="approve")
    request = request_of(hazel, run_id)
    assert request.due_at == clock.now + timedelta(hours=8)
    assert request.next_action_at == clock.now + timedelta(hours=2)

    plain, _, plain_run = waiting(db_url, FakeClock())
    assert request_of(plain, plain_run).next_action_at is None


# -- reminders ------------------------------------------------------------------------------------------------


def test_reminders_fire_once_per_slot_and_repeat(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, remind_after_sec=HOUR, remind_every_sec=HOUR / 2)
    opened_at = clock.now

    clock.advance(HOUR - 1)
    assert scheduler.tick().reminders == [] and outbox(hazel, "reminder") == []

    clock.advance(1)
    first = scheduler.tick()
    assert len(first.reminders) == 1 and scheduler.tick().reminders == []  # a second tick fires nothing more
    [reminder] = outbox(hazel, "reminder")
    assert reminder.channel == "console" and reminder.run_id == run_id
    [event] = events(hazel, run_id, "request.reminded")
    assert (event.actor_id, event.channel, event.detail["reminder"]) == ("hazel", "system", 1)  # Hazel itself
    request = request_of(hazel, run_id)
    assert request.reminders_sent == 1 and request.next_action_at == opened_at + timedelta(hours=1.5)

    clock.advance(HOUR / 2)
    assert len(scheduler.tick().reminders) == 1 and len(outbox(hazel, "reminder")) == 2

    # The scheduler was down for 3 hours: ONE reminder for the missed slots, then back on the series.
    clock.advance(3 * HOUR)
    assert len(scheduler.tick().reminders) == 1 and len(outbox(hazel, "reminder")) == 3
    last = events(hazel, run_id, "request.reminded")[-1]
    assert last.detail["reminder"] == 8 and last.detail["missed"] == 5
    assert request_of(hazel, run_id).next_action_at == opened_at + timedelta(hours=5)

    # Delivered through the request's channel (the console here) as a reminder.
    hazel.deliverer.deliver_due()
    assert "Reminder: Review" in hazel.console_buffer.getvalue()


def test_a_decided_request_gets_no_more_reminders(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, remind_after_sec=HOUR)
    hazel.decide(run_id=run_id, action="approve", actor=person("sme"))
    clock.advance(2 * HOUR)
    assert scheduler.tick().fired == 0 and outbox(hazel, "reminder") == []


# -- escalation ----------------------------------------------------------------------------------------------


def test_escalation_notifies_and_lets_backup_approvers_decide(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, approvers=Approvers(users=["priya"]),
                                       escalate_after_sec=2 * HOUR, escalate_to=Approvers(users=["lead"]),
                                       escalate_channel="slack:#leads")
    with pytest.raises(NotAllowedError, match="only priya"):
        hazel.decide(run_id=run_id, action="approve", actor=person("lead"))

    clock.advance(2 * HOUR)
    assert len(scheduler.tick().escalations) == 1 and scheduler.tick().escalations == []
    request = request_of(hazel, run_id)
    assert request.escalated_at == clock.now and request.next_action_at is None
    [notice] = outbox(hazel, "escalation")
    assert notice.channel == "slack:#leads"
    [event] = events(hazel, run_id, "request.escalated")
    assert event.channel == "system" and event.detail["to"] == "lead" and event.detail["reason"] == "waited 7200 s"
    # Slack is not configured here: the escalation falls back to the console, rendered as an escalation that
    # names who may decide now (it named only priya)
    hazel.deliverer.deliver_due()
    shown = hazel.console_buffer.getvalue()
    assert "Escalated: Review" in shown and "approvers: priya" in shown and "escalated to: lead" in shown, shown

    outcome = hazel.decide(run_id=run_id, action="approve", actor=person("lead"))
    assert outcome.settled and outcome.decision.actor_id == "lead"
    assert hazel.drive(run_id=run_id).run.status is RunStatus.COMPLETED



# -- timeouts ------------------------------------------------------------------------------------------------


def test_timeout_approve_is_recorded_as_the_timeout(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, timeout_sec=HOUR, on_timeout="approve",
                                       approvers=Approvers(users=["priya"]))
    clock.advance(HOUR - 1)
    assert scheduler.tick().timeouts == []
    clock.advance(1)
    report = scheduler.tick()
    assert report.timeouts == [(request_of(hazel, run_id).id, "approve")]

    [decision] = hazel.decisions(run_id=run_id)
    assert (decision.action.value, decision.actor_id, decision.channel, decision.actor_name) == (
        "approve", "timeout", "timeout", "timeout")
    assert decision.delivery_id == f"timeout:{decision.request_id}"
    request = request_of(hazel, run_id)
    assert request.status is RequestStatus.DECIDED and request.decided_by == "timeout"
    [event] = events(hazel, run_id, "decision.approve")
    assert event.channel == "timeout"
    assert hazel.drive(run_id=run_id).run.status is RunStatus.COMPLETED
    assert scheduler.tick().fired == 0


def test_timeout_approve_settles_a_quorum(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, approvals_required=3, timeout_sec=HOUR,
                                       on_timeout="approve")
    hazel.decide(run_id=run_id, action="approve", actor=person("ann"))
    clock.advance(HOUR)
    scheduler.tick()
    request = request_of(hazel, run_id)
    assert request.status is RequestStatus.DECIDED and request.approvals == 1
    assert hazel.get(run_id=run_id).status is RunStatus.READY


def test_timeout_reject_gives_the_reason(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, timeout_sec=72 * HOUR, on_timeout="reject")
    clock.advance(72 * HOUR)
    scheduler.tick()
    [decision] = hazel.decisions(run_id=run_id)
    assert decision.action.value == "reject" and decision.channel == "timeout"
    assert decision.payload == {"reason": "timed out after 259200 s"}
    assert hazel.get(run_id=run_id).status is RunStatus.REJECTED


def test_a_timeout_says_the_wait_the_request_was_opened_with(db_url: str, clock: FakeClock) -> None:
    """s25 F7: a request opened by code with ``timeout_sec=60``, fired by a process whose code says 480, was
    said to have "timed out after 480 s": the message says the wait that happened (its stored due time)."""
    _, _, run_id = waiting(db_url, clock, timeout_sec=60, on_timeout="fail")
    later = make_hazel(db_url, timed(timeout_sec=480, on_timeout="fail"), clock=clock)
    clock.advance(61)
    Scheduler(later).tick()
    assert later.get(run_id=run_id).error == "'Review' timed out after 60 s (on_timeout=fail)"


def test_timeout_fail_leaves_a_retryable_failed_run(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, timeout_sec=60, on_timeout="fail")
    clock.advance(61)
    scheduler.tick()
    run = hazel.get(run_id=run_id)
    assert run.status is RunStatus.FAILED and run.error == "'Review' timed out after 60 s (on_timeout=fail)"
    first = request_of(hazel, run_id)
    assert first.status is RequestStatus.CANCELLED and first.decided_by == "timeout"
    [event] = events(hazel, run_id, "run.failed")
    assert event.channel == "timeout"
    assert hazel.decisions(run_id=run_id) == []  # nobody decided: the run failed

    hazel.retry(run_id=run_id, actor=person("olga"))  # asks again, with a fresh timeout
    assert hazel.drive(run_id=run_id).run.status is RunStatus.WAITING
    second = request_of(hazel, run_id)
    assert second.id != first.id and second.next_action_at == clock.now + timedelta(seconds=60)


def test_timeout_cancel(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, timeout_sec=60, on_timeout="cancel")
    clock.advance(60)
    scheduler.tick()
    assert hazel.get(run_id=run_id).status is RunStatus.CANCELLED
    assert request_of(hazel, run_id).status is RequestStatus.CANCELLED
    [event] = events(hazel, run_id, "run.cancelled")
    assert event.actor_id == "timeout" and "timed out after 60 s" in event.detail["reason"]
    [closed] = outbox(hazel, "request.closed")
    assert closed.payload == {"cancelled": True, "timed_out": True}


def test_timeout_escalate_keeps_the_request_pending(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, timeout_sec=HOUR, on_timeout="escalate",
                                       escalate_to=Approvers(users=["lead"]), remind_after_sec=2 * HOUR)
    clock.advance(HOUR)
    report = scheduler.tick()
    assert len(report.escalations) == 1 and report.timeouts == []
    request = request_of(hazel, run_id)
    assert request.status is RequestStatus.PENDING and request.escalated_at == clock.now
    assert events(hazel, run_id, "request.escalated")[0].detail["reason"] == "timed out after 3600 s"
    assert request.next_action_at == clock.now + timedelta(hours=1)  # only the reminder is left
    clock.advance(10 * HOUR)
    assert scheduler.tick().escalations == []
    [notice] = outbox(hazel, "escalation")
    assert notice.channel == "console" and notice.payload == {"timed_out": True}  # the request's own channel
    assert hazel.decide(run_id=run_id, action="approve", actor=person("lead")).settled


def test_a_person_who_decides_first_wins_over_the_timeout(db_url: str, clock: FakeClock) -> None:
    hazel, scheduler, run_id = waiting(db_url, clock, timeout_sec=HOUR, on_timeout="cancel")
    request = request_of(hazel, run_id)
    point = hazel.registry.get("timed").point("review")
    clock.advance(HOUR)
    hazel.decide(run_id=run_id, action="approve", actor=person("sme"))  # just before the timeout acts
    assert hazel.timeouts._act(request, point, "cancel").timeout is None
    assert hazel.timeouts._act(request, point, "approve").timeout is None
    assert hazel.get(run_id=run_id).status is RunStatus.READY
    assert [d.actor_id for d in hazel.decisions(run_id=run_id)] == ["sme"]
    assert scheduler.tick().fired == 0


def test_on_timeout_must_be_an_allowed_action() -> None:
    with pytest.raises(WorkflowDefinitionError, match="times out with 'approve', which its actions do not allow"):
        timed(actions=["reject", "feedback"], timeout_sec=60, on_timeout="approve").validate()
    timed(actions=["reject"], timeout_sec=60, on_timeout="fail").validate()
