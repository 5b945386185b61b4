"""A Slack reminder names (and mentions) those who can still move the request: its approvers, plus the backup
approvers once escalated, minus people whose vote is in and the starter under a self-approval ban; when nobody
is left it says so. Real HTTP into ``/slack/events`` with signed payloads, Slack's Web API faked on loopback,
the scheduler driven by ``Scheduler.tick()`` under a clock moved by hand (``bot.engine.permissions.
still_deciding`` computes the list once, in the request view)."""

from __future__ import annotations

from pydantic import BaseModel

from bot.engine.workflow import StepContext, Workflow
from bot.ops.scheduler import Scheduler
from store.models import Approvers
from tests.bot.slack.conftest import MIGRATIONS, PRIYA, SAM, SlackEnv
from tests.support.clock import FakeClock

DAN = "U0000000004"
OLGA = "U0000000008"  # the backup approver


class Doc(BaseModel):
    text: str = ""


def quorum(approvers: Approvers, **extra: object) -> Workflow:
    """draft -> review (2 approvals, no self-approval, reminds every 5 s after 5 s, escalates to OLGA at
    12 s) in #migrations."""
    wf = Workflow("quorum-remind", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> dict:
        return {"text": "drop the legacy column"}

    options: dict = dict(channel="slack:#migrations", approvers=approvers, approvals_required=2,
                         allow_self_approval=False, remind_after_sec=5, remind_every_sec=5,
                         escalate_after_sec=12, escalate_to=Approvers(slack_users=(OLGA,)), timeout_sec=600)
    options.update(extra)
    wf.steer("review", show="text", **options)
    return wf


def reminders(env: SlackEnv, run_id: str) -> list[str]:
    message = env.request_message(run_id)
    return [m.text for m in env.fake.channel_messages(MIGRATIONS, thread_ts=message.ts)
            if m.text.startswith("⏰ Reminder")]


def tick(env: SlackEnv, scheduler: Scheduler, clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    scheduler.tick()
    env.settle()


def test_a_reminder_leaves_out_who_voted_and_the_starter_and_adds_the_backup_once_escalated(make_env) -> None:  # noqa: ANN001
    clock = FakeClock()
    env: SlackEnv = make_env(quorum(Approvers(slack_users=(PRIYA, SAM, DAN))), clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("quorum-remind", {"text": "x"}, by=PRIYA)  # priya started it: she may not approve
    env.settle()
    message = env.request_message(run_id)
    env.sender.click(SAM, "approve", message)
    env.ephemeral(SAM, "1 of 2")
    tick(env, scheduler, clock, 5)    # reminder 1
    [first] = reminders(env, run_id)
    assert first.endswith(f"still waits for <@{DAN}>."), first
    assert SAM not in first and PRIYA not in first, first
    tick(env, scheduler, clock, 5)    # reminder 2
    tick(env, scheduler, clock, 2)    # the escalation
    assert env.pending(run_id).escalated_at is not None
    # the escalation's copy of the request names the backup approver too (s23 F1: the point's approvers only)
    escalated = [m for m in env.fake.messages.values() if "Escalated" in str(m.blocks)]
    assert escalated, [m.text for m in env.fake.messages.values()]
    assert all("· escalated <!date^" in str(m.blocks) and f"to <@{OLGA}>" in str(m.blocks) for m in escalated)
    tick(env, scheduler, clock, 5)    # a reminder after the escalation: olga may decide now
    last = reminders(env, run_id)[-1]
    assert last.endswith(f"still waits for <@{DAN}>, <@{OLGA}>."), last
    assert SAM not in last and PRIYA not in last, last


def test_a_reminder_says_so_when_nobody_left_can_decide(make_env) -> None:  # noqa: ANN001
    clock = FakeClock()
    env: SlackEnv = make_env(quorum(Approvers(slack_users=(PRIYA, SAM)), escalate_after_sec=None,
                                    escalate_to=None), clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("quorum-remind", {"text": "x"}, by=PRIYA)
    env.settle()
    env.sender.click(SAM, "approve", env.request_message(run_id))
    env.ephemeral(SAM, "1 of 2")
    tick(env, scheduler, clock, 5)
    [text] = reminders(env, run_id)
    assert "none of its approvers can decide it any more" in text, text
    assert "<@" not in text, text



def _posted_to(env: SlackEnv, since: int) -> set[str]:
    """The ``channel`` of every ``chat.postMessage`` after the first ``since`` calls (a DM: a user id)."""
    return {str(c.params.get("channel")) for c in env.fake.calls_to("chat.postMessage")[since:]}


def test_reminder_dms_go_only_to_those_who_can_still_decide(make_env) -> None:  # noqa: ANN001
    """With ``notify_approvers=True`` a reminder also reaches approvers by DM: not someone whose vote is in, nor
    the starter under a self-approval ban (the same people the reminder's text names)."""
    clock = FakeClock()
    env: SlackEnv = make_env(quorum(Approvers(slack_users=(PRIYA, SAM, DAN)), notify_approvers=True,
                                    escalate_after_sec=None, escalate_to=None), clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("quorum-remind", {"text": "x"}, by=PRIYA)  # priya started it: she may not approve
    env.settle()
    message = env.request_message(run_id)
    env.sender.click(SAM, "approve", message)
    env.ephemeral(SAM, "1 of 2")
    env.settle()
    since = len(env.fake.calls_to("chat.postMessage"))
    tick(env, scheduler, clock, 5)    # reminder 1
    assert reminders(env, run_id), "no reminder"
    dms = _posted_to(env, since) - {MIGRATIONS}  # replies in each one's DM with the buttons (the fake: D… of U…)
    assert dms == {"D" + DAN[1:]}, dms  # not sam's (his vote is in), not priya's (she started it)
