"""Every Slack message that shows a request with its buttons loses them when the request settles.

A steering point that reminds, escalates to a backup approver in another channel, and times out: the request's
message, the approvers' DMs, the escalation's copy in the other channel and its DM to the backup approver are
all updated in place by the outbox (after the commit, retried) whether the request ends by timeout or by a
click on a copy; reminders reach people who already hold the buttons as replies in that message's thread,
without more buttons. Real HTTP into ``/slack/events`` with signed payloads; only Slack's Web API is faked
(on loopback); the scheduler's timers are driven by ``Scheduler.tick()`` under a clock moved by hand.
"""

from __future__ import annotations

from pydantic import BaseModel

from bot.engine.workflow import StepContext, Workflow
from bot.ops.scheduler import Scheduler
from store.models import Actor, Approvers, RequestStatus
from tests.bot.slack.conftest import APPROVERS, DEPLOYS, MIGRATIONS, PRIYA, SAM, SlackEnv
from tests.support.clock import FakeClock
from tests.support.fake_slack import Message

BACKUP = "U0000000009"
AUTHOR = "U0000000007"  # starts the run (the backup approver may not approve their own run)
GROUP_MEMBER = "U0000000004"


class Doc(BaseModel):
    text: str = ""
    published: bool = False


def escalating(**extra: object) -> Workflow:
    """draft -> review (reminds every 5 s after 5 s, escalates to BACKUP in #deploys after 12 s, rejects at
    25 s) -> publish; the request lives in #migrations and DMs its approvers."""
    wf = Workflow("escalating", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> dict:
        return {"text": "drop the legacy column"}

    options: dict = dict(channel="slack:#migrations", approvers=APPROVERS, notify_approvers=True,
                         remind_after_sec=5, remind_every_sec=5, escalate_after_sec=12,
                         escalate_to=Approvers(slack_users=(BACKUP,)), escalate_channel=f"slack:{DEPLOYS}",
                         timeout_sec=25, on_timeout="reject")
    options.update(extra)
    wf.steer("review", show="text", **options)

    @wf.step
    def publish(state: Doc, ctx: StepContext) -> dict:
        return {"published": True}

    return wf


def with_buttons(env: SlackEnv) -> list[Message]:
    """Every message the fake Slack holds that still offers buttons."""
    with env.fake._lock:
        messages = list(env.fake.messages.values())
    return [m for m in messages if any(b.get("type") == "actions" for b in m.blocks or [])]


def tick(env: SlackEnv, scheduler: Scheduler, clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    scheduler.tick()
    env.settle()


def escalated(make_env, clock: FakeClock):  # noqa: ANN001, ANN201
    """A run waiting at review after two reminders and the escalation (t = 12 s), all delivered."""
    env: SlackEnv = make_env(escalating(), clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("escalating", {"text": "x"}, by=AUTHOR)
    env.settle()
    original = env.request_message(run_id)
    tick(env, scheduler, clock, 5)    # reminder 1
    tick(env, scheduler, clock, 5)    # reminder 2
    tick(env, scheduler, clock, 2)    # escalation
    request = env.pending(run_id)
    assert request is not None and request.escalated_at is not None and request.reminders_sent == 2
    return env, scheduler, run_id, original


def test_a_timeout_takes_the_buttons_off_every_copy(make_env) -> None:  # noqa: ANN001
    clock = FakeClock()
    env, scheduler, run_id, original = escalated(make_env, clock)
    [copy] = env.fake.channel_messages(DEPLOYS, top_level=True)
    [backup_dm] = env.fake.channel_messages("D" + BACKUP[1:])
    assert any(b["type"] == "actions" for b in copy.blocks) and any(b["type"] == "actions" for b in backup_dm.blocks)
    holders = {m.channel for m in with_buttons(env)}
    assert holders == {MIGRATIONS, DEPLOYS, "D" + BACKUP[1:], "D" + PRIYA[1:], "D" + SAM[1:],
                       "D" + GROUP_MEMBER[1:]}
    # the reminders reached the approvers in the thread of the DM that has the buttons, without more buttons
    for user in (PRIYA, SAM, GROUP_MEMBER):
        dms = env.fake.channel_messages("D" + user[1:])
        [first] = [m for m in dms if m.thread_ts is None]
        replies = [m for m in dms if m.thread_ts == first.ts]
        assert len(replies) == 2 and all(r.text.startswith("⏰ Reminder") and not r.blocks for r in replies)

    tick(env, scheduler, clock, 13)   # t = 25 s: on_timeout="reject"
    assert env.pending(run_id) is None
    [request] = env.hazel.requests(run_id=run_id)
    assert request.status is RequestStatus.DECIDED and request.decided_action == "reject"
    assert with_buttons(env) == []
    for message in (env.fake.message(MIGRATIONS, original.ts), env.fake.message(DEPLOYS, copy.ts),
                    env.fake.message(backup_dm.channel, backup_dm.ts)):
        assert "Rejected" in str(message.blocks), message.blocks
    # and nothing reminds anyone of it afterwards
    posted = len(env.fake.calls_to("chat.postMessage"))
    tick(env, scheduler, clock, 60)
    assert with_buttons(env) == [] and len(env.fake.calls_to("chat.postMessage")) == posted


def test_an_approval_on_the_escalation_copy_updates_every_copy(make_env) -> None:  # noqa: ANN001
    clock = FakeClock()
    env, scheduler, run_id, original = escalated(make_env, clock)
    [copy] = env.fake.channel_messages(DEPLOYS, top_level=True)
    assert env.sender.click(BACKUP, "approve", copy).status_code == 200
    env.wait(lambda: env.pending(run_id) is None, "the backup approver's approval")
    env.settle()
    assert env.hazel.get(run_id=run_id).status.value == "completed"
    assert with_buttons(env) == []
    for message in (env.fake.message(MIGRATIONS, original.ts), env.fake.message(DEPLOYS, copy.ts)):
        assert f"Approved by <@{BACKUP}>" in str(message.blocks), message.blocks
    # the copies are kept in the request's message_ref, each with the channel it went through
    [request] = env.hazel.requests(run_id=run_id)
    vias = sorted(c["via"] for c in request.message_ref["copies"])
    assert vias == [f"slack:{DEPLOYS}", f"slack:{DEPLOYS}"]  # the channel post and the DM to the backup


def test_a_copy_posted_by_an_escalation_that_then_failed_is_updated_too(make_env, monkeypatch) -> None:  # noqa: ANN001
    """The escalation's channel post goes out, its DM to the backup approver fails (and keeps failing); a
    person decides meanwhile: the copy the failed attempt did post is recorded with it, and updated."""
    clock = FakeClock()
    env: SlackEnv = make_env(escalating(remind_after_sec=None, remind_every_sec=None), clock=clock,
                             max_retries=0)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("escalating", {"text": "x"}, by=AUTHOR)
    env.settle()
    original = env.request_message(run_id)
    post = env.fake._chat_postMessage

    def dms_fail(p: dict) -> dict:
        return {"ok": False, "error": "fatal_error"} if p.get("channel") == BACKUP else post(p)

    monkeypatch.setattr(env.fake, "_chat_postMessage", dms_fail)
    tick(env, scheduler, clock, 12)
    [copy] = env.fake.channel_messages(DEPLOYS, top_level=True)
    assert any(b["type"] == "actions" for b in copy.blocks)
    with env.hazel.store.read() as tx:
        [escalation] = [m for m in tx.outbox.list(run_id=run_id) if m.kind == "escalation"]
    assert escalation.status.value == "pending" and "fatal_error" in escalation.last_error

    assert env.sender.click(PRIYA, "approve", original).status_code == 200
    env.wait(lambda: env.pending(run_id) is None, "the approval")
    env.settle()
    assert with_buttons(env) == []
    assert "Approved by <@U0000000001>" in str(env.fake.message(DEPLOYS, copy.ts).blocks)
    # the escalation's retry, the request settled, posts nothing more
    monkeypatch.setattr(env.fake, "_chat_postMessage", post)
    posted = len(env.fake.calls_to("chat.postMessage"))
    clock.advance(3600)
    env.settle()
    assert len(env.fake.calls_to("chat.postMessage")) == posted and with_buttons(env) == []


def test_a_console_request_escalated_to_slack_has_its_slack_copies_updated_when_cancelled(make_env) -> None:  # noqa: ANN001
    """The request lives on the console (it could be Jira), its escalation is posted in a Slack channel: the
    update of the request goes to the console, and once delivered it is queued for Slack too, which updates
    the copies there."""
    clock = FakeClock()
    env: SlackEnv = make_env(escalating(channel="console", approvers=Approvers(users=("ops",)),
                                        remind_after_sec=None, remind_every_sec=None), clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("escalating", {"text": "x"}, by=AUTHOR)
    env.settle()
    tick(env, scheduler, clock, 12)
    [copy] = env.fake.channel_messages(DEPLOYS, top_level=True)
    [backup_dm] = env.fake.channel_messages("D" + BACKUP[1:])
    assert {m.channel for m in with_buttons(env)} == {DEPLOYS, backup_dm.channel}

    env.hazel.cancel(run_id=run_id, actor=Actor(id="ops", channel="console", name="ops", person="ops"),
                     reason="not needed")
    env.settle()
    assert env.hazel.get(run_id=run_id).status.value == "cancelled"
    assert with_buttons(env) == []
    assert "Cancelled" in str(env.fake.message(DEPLOYS, copy.ts).blocks)
    with env.hazel.store.read() as tx:
        updates = [(m.channel, m.payload.get("copies_only"), m.status.value) for m in tx.outbox.list(run_id=run_id)
                   if m.kind == "request.closed"]
    assert sorted(updates, key=str) == sorted([("console", None, "sent"), (f"slack:{DEPLOYS}", True, "sent")],
                                              key=str)


def test_copies_posted_while_the_request_settles_are_updated_after_all(make_env, monkeypatch) -> None:  # noqa: ANN001
    """The race: the escalation posts its copies, a person approves, and the update of the request goes out
    before the delivered escalation records them. Recording them finds the request settled and queues their
    update."""
    clock = FakeClock()
    env: SlackEnv = make_env(escalating(remind_after_sec=None, remind_every_sec=None), clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("escalating", {"text": "x"}, by=AUTHOR)
    env.settle()
    original = env.request_message(run_id)
    remind = env.channel.remind

    def racing(view):  # noqa: ANN001, ANN202
        out = remind(view)
        assert env.sender.click(PRIYA, "approve", original).status_code == 200
        env.wait(lambda: env.pending(run_id) is None, "the approval")
        env.hazel.deliverer.deliver_due()  # the update of the request, before the copies are recorded
        assert "Approved" in str(env.fake.message(MIGRATIONS, original.ts).blocks)
        assert {m.channel for m in with_buttons(env)} == {DEPLOYS, "D" + BACKUP[1:]}
        return out

    monkeypatch.setattr(env.channel, "remind", racing)
    tick(env, scheduler, clock, 12)
    assert with_buttons(env) == []
    [copy] = env.fake.channel_messages(DEPLOYS, top_level=True)
    assert "Approved by <@U0000000001>" in str(copy.blocks)


def test_the_backup_approvers_home_follows_the_escalation_and_the_end(make_env) -> None:  # noqa: ANN001
    """A fresh-user finding (s28 F3): the Home tab of the ``escalate_to`` approver was republished neither when
    the request was escalated to them (they may decide it from then on) nor when it ended (its buttons stayed
    live on a rejected request until they opened the tab again). Now both."""
    clock = FakeClock()
    env: SlackEnv = make_env(escalating(), clock=clock)
    scheduler = Scheduler(env.hazel)
    run_id = env.start("escalating", {"text": "x"}, by=AUTHOR)
    env.settle()
    tick(env, scheduler, clock, 5)
    tick(env, scheduler, clock, 5)
    assert BACKUP not in env.fake.homes  # (not yet theirs)
    tick(env, scheduler, clock, 2)    # escalation
    home = env.wait(lambda: env.fake.homes.get(BACKUP), "the backup approver's Home tab")
    assert "Waiting on you (1)" in str(home) and run_id in str(home) and "hazel_approve" in str(home)
    for _ in range(3):
        tick(env, scheduler, clock, 5)  # the timeout (25 s) rejects it
    assert env.hazel.get(run_id=run_id).status.value == "rejected"
    env.wait(lambda: "Waiting on you (0)" in str(env.fake.homes.get(BACKUP)), "the backup's Home tab, refreshed")
