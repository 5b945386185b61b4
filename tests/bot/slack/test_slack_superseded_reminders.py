"""Reminders queued while Slack is unreachable are posted once when it comes back: the ones a later reminder
superseded before they could be delivered are marked ``superseded`` in the outbox, not posted back to back (s25
F18, on Slack: the mechanism is the deliverer's, ``tests/bot/test_outbox_superseded_reminders.py``). Slack's Web
API faked on loopback, the scheduler driven by ``Scheduler.tick()`` under a clock moved by hand."""

from __future__ import annotations

from pydantic import BaseModel

from bot.engine.workflow import StepContext, Workflow
from bot.ops.scheduler import Scheduler
from store.models import Approvers
from tests.bot.slack.conftest import MIGRATIONS, PRIYA, SAM, SlackEnv
from tests.support.clock import FakeClock


class Doc(BaseModel):
    text: str = ""


def slack_flow() -> Workflow:
    """draft -> review in #migrations (priya and sam), reminded every 5 s after 5 s."""
    wf = Workflow("slack-remind", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> dict:
        return {"text": "drop the legacy column"}

    wf.steer("review", show="text", channel="slack:#migrations", approvers=Approvers(slack_users=(PRIYA, SAM)),
             remind_after_sec=5, remind_every_sec=5)
    return wf


def test_slack_reminders_queued_while_slack_is_down_are_posted_once(make_env) -> None:  # noqa: ANN001
    clock = FakeClock()
    env: SlackEnv = make_env(slack_flow(), clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("slack-remind", {"text": "x"})
    env.settle()
    message = env.request_message(run_id)

    def reminders() -> list[str]:
        return [m.text for m in env.fake.channel_messages(MIGRATIONS, thread_ts=message.ts)
                if m.text.startswith("⏰ Reminder")]

    env.fake.fail("chat.postMessage", status=503, times=None)  # Slack down
    for _ in range(4):
        clock.advance(5)
        assert len(scheduler.tick().reminders) == 1
        env.settle()
    assert reminders() == []
    env.fake.clear_failures()
    clock.advance(4)  # (past the backoff; before the next slot)
    env.settle()
    assert len(reminders()) == 1, reminders()
    with env.hazel.store.read() as tx:
        rows = sorted((m for m in tx.outbox.list(run_id=run_id) if m.kind == "reminder"), key=lambda m: m.id)
    assert [m.status.value for m in rows] == ["superseded"] * 3 + ["sent"]
