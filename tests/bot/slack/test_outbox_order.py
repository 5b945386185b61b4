"""A run's notifications to one channel are delivered in order: a steering request whose post timed out (Slack
made the message) and that is decided from the CLI before the retry gets exactly one message, adopted by the
retry and then updated (the outcome, no buttons), with the run's progress in its thread."""

from __future__ import annotations

from store.models import Actor
from tests.bot.slack.conftest import (MIGRATIONS, SlackEnv, claim_request_post, driven_to_its_request, example,
                                     post_answer_lost)

OPS = Actor(id="ops", channel="console", name="ops")


def test_a_post_whose_answer_was_lost_is_adopted_then_updated_after_a_cli_decision(make_env) -> None:  # noqa: ANN001
    env, clock, run_id = post_answer_lost(make_env)  # the post times out after Slack made the message
    [posted] = env.fake.channel_messages(MIGRATIONS, top_level=True)
    assert env.pending(run_id).message_ref is None

    env.hazel.decide(run_id=run_id, action="approve", actor=OPS)  # from the CLI, before the retry
    env.settle()  # the run goes on to its next request (also in #migrations); the update must wait for the post
    assert len(env.fake.channel_messages(MIGRATIONS, top_level=True)) == 1, "nothing overtakes the lost post"
    for _ in range(3):
        clock.advance(3600)
        env.hazel.deliverer.deliver_due()

    plan = env.fake.message(MIGRATIONS, posted.ts)
    assert plan.versions, "the adopted message was updated"
    assert not any(b["type"] == "actions" for b in plan.blocks), "its buttons are gone"
    assert "approved" in (plan.text or "").lower() + str(plan.blocks).lower()
    replies = [m for m in env.fake.channel_messages(MIGRATIONS, thread_ts=posted.ts) if m.ts != posted.ts]
    assert replies, "the run's progress follows in the request's thread"
    top = env.fake.channel_messages(MIGRATIONS, top_level=True)
    review = env.pending(run_id)
    assert review is not None and review.point != "plan"
    assert [m.ts for m in top] == [posted.ts, review.message_ref["ts"]], "the plan once, then the next request"
    with env.hazel.store.read() as tx:
        assert [m for m in tx.outbox.list(run_id=run_id) if m.status.value != "sent"] == []


def test_two_deliverers_keep_a_runs_messages_to_one_channel_in_order(make_env, db_url: str) -> None:  # noqa: ANN001
    env, clock, run_id, pool = driven_to_its_request(make_env)
    other = SlackEnv(db_url, [example()], env.fake, clock=clock)  # a second process on the same database
    try:
        opened = claim_request_post(env, clock)  # this process claims the post and is still sending it ...
        env.hazel.decide(run_id=run_id, action="approve", actor=OPS)
        while pool.drain():
            pass
        assert other.hazel.deliverer.deliver_due() == 0, "the other process waits for the post"
        with other.hazel.store.read() as tx:
            later = [m for m in tx.outbox.list(run_id=run_id, status="pending") if m.id > opened.id
                     and m.channel == opened.channel]
        assert {m.kind for m in later} >= {"request.closed", "run.progress"}
        assert env.fake.calls_to("chat.update") == [] and env.fake.calls_to("chat.postMessage") == []

        ref = env.channel.open_request(env.hazel.outbox_view(message=opened))  # ... and finishes it
        with env.hazel.store.transaction() as tx:
            tx.requests.set_message_ref(opened.request_id, ref)
            tx.outbox.mark_sent(opened.id, now=clock())
        assert other.hazel.deliverer.deliver_due() >= 3, "now the rest goes, in one pass"
        plan = env.fake.message(ref["channel"], ref["ts"])
        assert plan.versions and not any(b["type"] == "actions" for b in plan.blocks)
        assert [m for m in env.fake.channel_messages(MIGRATIONS, thread_ts=ref["ts"]) if m.ts != ref["ts"]]
        assert len(env.fake.channel_messages(MIGRATIONS, top_level=True)) == 2  # the plan, the next request
    finally:
        other.close()
