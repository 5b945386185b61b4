"""The outbox retries a steering request whose post Slack carried out but never answered (the client timed out;
or the process died mid-post) and exactly one message exists afterwards, the one the request tracks."""

from __future__ import annotations

from tests.bot.slack.conftest import (MIGRATIONS, SlackEnv, claim_request_post, driven_to_its_request, example,
                                     post_answer_lost)


def top_level(env: SlackEnv) -> list:
    return env.fake.channel_messages(MIGRATIONS, top_level=True)


def test_a_post_that_timed_out_is_retried_without_a_second_message(make_env) -> None:  # noqa: ANN001
    env, clock, run_id = post_answer_lost(make_env)  # the post times out after Slack made the message
    assert env.pending(run_id).message_ref is None and len(top_level(env)) == 1
    for _ in range(3):
        clock.advance(3600)
        env.hazel.deliverer.deliver_due()
    [message] = top_level(env)
    ref = env.pending(run_id).message_ref
    assert ref["ts"] == message.ts and ref["channel"] == MIGRATIONS
    assert len(env.fake.calls_to("chat.postMessage")) == 1


def test_a_post_cut_short_by_a_crash_is_adopted_by_the_next_process(make_env, db_url: str) -> None:  # noqa: ANN001
    env, clock, run_id, _ = driven_to_its_request(make_env)
    claimed = claim_request_post(env, clock)  # the dying process claimed the message (attempt 1) ...
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
