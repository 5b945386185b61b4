"""A Slack request leaves Hazel's log levels as the embedding application set them. Bolt gives each request's
listeners a logger named after the app (``slack_bolt.logger.get_bolt_app_logger``) and sets that logger's level to
the root logger's on every request; Hazel's Bolt app was named ``hazel``, so each click reset the ``hazel`` logger
to the root's level: an application that logs Hazel at INFO under a root at WARNING lost Hazel's lines after its
first Slack click (found by a full-suite run: the bench's Slack measurement left the logger at WARNING)."""

from __future__ import annotations

import logging

from tests.bot.slack.conftest import PRIYA, SlackEnv


def test_a_click_leaves_the_hazel_logger_at_its_level(make_env) -> None:  # noqa: ANN001
    env: SlackEnv = make_env()
    run_id = env.start()
    env.settle()
    message = env.request_message(run_id)
    hazel_log, root = logging.getLogger("hazel"), logging.getLogger()
    was, root_was = hazel_log.level, root.level
    hazel_log.setLevel(logging.INFO)
    root.setLevel(logging.WARNING)
    try:
        assert env.sender.click(PRIYA, "approve", message, name="priya").status_code == 200
        env.wait(lambda: env.hazel.decisions(run_id=run_id), "the approval")
        assert hazel_log.level == logging.INFO, logging.getLevelName(hazel_log.level)
    finally:
        hazel_log.setLevel(was)
        root.setLevel(root_was)
