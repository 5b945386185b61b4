"""``bot.engine.deadlines``: the schedule of a request, computed from what its row stores."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from bot.engine import deadlines
from bot.engine.workflow import SteeringPoint

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
H = timedelta(hours=1)


def point(**kwargs: object) -> SteeringPoint:
    return SteeringPoint(name="review", title="Review", **kwargs)


def test_reminder_slots() -> None:
    once = point(remind_after_sec=3600)
    assert deadlines.reminder_at(once, created_at=T0, slot=0) == T0 + H
    assert deadlines.reminder_at(once, created_at=T0, slot=1) is None
    assert deadlines.reminder_slots_passed(once, created_at=T0, now=T0 + 10 * H) == 1

    every = point(remind_after_sec=3600, remind_every_sec=1800)
    assert deadlines.reminder_at(every, created_at=T0, slot=2) == T0 + 2 * H
    assert [deadlines.reminder_slots_passed(every, created_at=T0, now=T0 + k * H / 2) for k in range(6)] == [
        0, 0, 1, 2, 3, 4]

    only_every = point(remind_every_sec=600)
    assert deadlines.reminder_at(only_every, created_at=T0, slot=0) == T0 + timedelta(minutes=10)
    assert deadlines.reminder_slots_passed(point(), created_at=T0, now=T0 + 99 * H) == 0


def test_next_action_is_the_earliest_left() -> None:
    p = point(remind_after_sec=4 * 3600, escalate_after_sec=2 * 3600, timeout_sec=8 * 3600, on_timeout="reject")
    due_at = T0 + 8 * H
    assert deadlines.next_action_at(p, created_at=T0, due_at=due_at) == T0 + 2 * H
    assert deadlines.next_action_at(p, created_at=T0, due_at=due_at, escalated_at=T0 + 2 * H) == T0 + 4 * H
    assert deadlines.next_action_at(p, created_at=T0, due_at=due_at, escalated_at=T0, reminders_sent=1) == due_at
    # A due date without on_timeout is only shown; an escalating timeout is done once escalated.
    assert deadlines.next_action_at(point(timeout_sec=60), created_at=T0, due_at=T0 + H) is None
    esc = point(timeout_sec=3600, on_timeout="escalate")
    assert deadlines.next_action_at(esc, created_at=T0, due_at=T0 + H) == T0 + H
    assert deadlines.next_action_at(esc, created_at=T0, due_at=T0 + H, escalated_at=T0) is None


def test_an_ending_timeout_wins_over_reminders_due_at_the_same_time() -> None:
    p = point(remind_after_sec=3600, escalate_after_sec=3600, timeout_sec=3600, on_timeout="approve")
    due = deadlines.due(p, created_at=T0, due_at=T0 + H, reminders_sent=0, escalated_at=None, now=T0 + H)
    assert due == deadlines.Due(timed_out=True, timeout="approve")

    esc = point(remind_after_sec=3600, timeout_sec=3600, on_timeout="escalate")
    due = deadlines.due(esc, created_at=T0, due_at=T0 + H, reminders_sent=0, escalated_at=None, now=T0 + H)
    assert due.reminder and due.escalation and due.timed_out and due.timeout is None
    early = deadlines.due(esc, created_at=T0, due_at=T0 + H, reminders_sent=0, escalated_at=None, now=T0)
    assert not early.anything


def test_a_late_reminder_stands_for_a_slot_due_within_half_a_period() -> None:
    p = point(remind_after_sec=3600, remind_every_sec=3600)  # slots at 1 h, 2 h, 3 h, …

    def due_at(hours: float, sent: int) -> deadlines.Due:
        return deadlines.due(p, created_at=T0, due_at=None, reminders_sent=sent, escalated_at=None,
                             now=T0 + hours * H)

    assert (due_at(1, 0).reminder_slots, due_at(1, 0).missed) == (1, 0)  # on time: its own slot
    assert (due_at(2.4, 1).reminder_slots, due_at(2.4, 1).missed) == (2, 0)  # 0.4 h late: slot 3 stays
    assert (due_at(2.5, 1).reminder_slots, due_at(2.5, 1).missed) == (3, 0)  # half a period late: slot 3 too
    assert (due_at(4.9, 0).reminder_slots, due_at(4.9, 0).missed) == (5, 3)  # one reminder for slots 1-4 (and 5)
    assert not due_at(3, 3).reminder  # slot 3 was counted early: nothing until slot 4
    assert deadlines.next_action_at(p, created_at=T0, due_at=None, reminders_sent=3) == T0 + 4 * H
    once = point(remind_after_sec=3600)  # one slot: nothing to stand for
    assert deadlines.due(once, created_at=T0, due_at=None, reminders_sent=0, escalated_at=None,
                         now=T0 + 9 * H).reminder_slots == 1
