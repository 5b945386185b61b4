"""The outbox retries a steering request whose post Slack carried out but never answered (the client timed out;
or the process died mid-post) and exactly one message exists afterwards, the one the request tracks."""

from __future__ import annotations

from bot.ops.worker import WorkerPool
from store.models import OutboxKind
from tests.bot.slack.conftest import MIGRATIONS, SlackEnv, example
from tests.support.jira_env import Clock


def top_level(env: SlackEnv) -> list:
    return env.fake.channel_messages(MIGRATIONS, top_level=True)


def test_a_post_that_timed_out_is_retried_without_a_second_message(make_env) -> None:  # noqa: ANN001
    clock = Clock()
    env: SlackEnv = make_env(clock=clock)
    env.channel.client.timeout = 1  # production: 10 s
    env.fake.lose_answers("chat.postMessage", stall_sec=3)
    run_id = env.start()
    env.settle()  # the post times out after Slack made the message
    assert env.pending(run_id).message_ref is None and len(top_level(env)) == 1
    for _ in range(3):
        clock.advance(3600)
        env.hazel.deliverer.deliver_due()
    [message] = top_level(env)
    ref = env.pending(run_id).message_ref
    assert ref["ts"] == message.ts and ref["channel"] == MIGRATIONS
    assert len(env.fake.calls_to("chat.postMessage")) == 1


def test_a_post_cut_short_by_a_crash_is_adopted_by_the_next_process(make_env, db_url: str) -> None:  # noqa: ANN001
    clock = Clock()
    env: SlackEnv = make_env(clock=clock)
    run_id = env.start()
    pool = WorkerPool(env.hazel, threads=1)
    while pool.drain():
        pass
    with env.hazel.store.transaction() as tx:  # the dying process claimed the message (attempt 1) ...
        [claimed] = [m for m in tx.outbox.claim_due(now=clock(), lease_sec=60)
                     if m.kind == OutboxKind.REQUEST_OPENED.value]
    env.channel.open_request(env.hazel.outbox_view(message=claimed))  # ... posted it, and died before recording
    assert env.pending(run_id).message_ref is None and len(top_level(env)) == 1

    clock.advance(120)  # its lease ran out
    after = SlackEnv(db_url, [example()], env.fake, clock=clock)  # a new process: nothing remembered
    try:
        after.hazel.deliverer.deliver_due()
        [message] = top_level(after)
        assert after.pending(run_id).message_ref["ts"] == message.ts
        assert len(env.fake.calls_to("chat.postMessage")) == 1
    finally:
        after.close()
