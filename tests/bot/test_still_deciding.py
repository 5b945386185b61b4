"""Who a reminder says can still decide (``permissions.still_deciding``) once a point open to anyone escalates."""

from __future__ import annotations

from bot.engine import People
from bot.engine.permissions import still_deciding
from store.models import Approvers


def test_a_point_open_to_anyone_stays_open_after_its_escalation() -> None:
    backup = Approvers(slack_users=("U0000000009",))
    assert still_deciding([Approvers(), backup], People(), "slack:#c", voted=set(), starter=None) == Approvers()
    assert still_deciding([Approvers()], People(), "slack:#c", voted=set(), starter=None) == Approvers()


def test_named_approvers_and_their_backups_are_listed_and_those_who_voted_left_out() -> None:
    left = still_deciding([Approvers(slack_users=("U1",)), Approvers(slack_users=("U2",))], People(), "slack:#c",
                          voted={"slack:U1"}, starter=None)
    assert left == Approvers(slack_users=("U2",))


def test_a_console_reminder_says_who_is_left_or_that_nobody_is(db_url: str) -> None:
    from pydantic import BaseModel

    from bot.engine.workflow import Workflow
    from bot.ops.scheduler import Scheduler
    from tests.support.clock import FakeClock
    from tests.support.engine import make_hazel, person

    class Doc(BaseModel):
        text: str = "x"

    def only(approvers: Approvers) -> Workflow:
        wf = Workflow("remind-console", version=1, state=Doc)
        wf.steer("review", show="text", actions=["approve", "reject"], approvers=approvers,
                 allow_self_approval=False, remind_after_sec=5,
                 remind_every_sec=5)
        return wf

    for approvers, says, answers in ((Approvers(users=("olga",)), "none of its approvers can decide it", False),
                                     (Approvers(users=("olga", "ana")), "still waits for: ana", True)):
        clock = FakeClock()
        hz = make_hazel(db_url, only(approvers), clock=clock)
        run = hz.start(workflow="remind-console", input={}, actor=person("olga"))  # olga may not approve it
        hz.drive(run_id=run.id)
        hz.deliver_due()
        hz.console_buffer.truncate(0)
        hz.console_buffer.seek(0)
        clock.advance(5)
        Scheduler(hz).tick()
        hz.deliver_due()
        printed = hz.console_buffer.getvalue()
        assert "Reminder" in printed and says in printed, printed
        assert ("Answer with:" in printed) is answers, printed
