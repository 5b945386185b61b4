"""Slack settings that turn Socket Mode on without what it needs are refused up front, in one line naming what
is missing, exit status 1, before anything starts (no database opened, no worker started).

Found: ``hazel serve --socket-mode`` with ``SLACK_APP_TOKEN`` but no ``SLACK_BOT_TOKEN`` started its workers,
delivery and scheduler, then built the Slack app, which needs the bot token, and stopped them all again with
``error: unexpected ValueError: Slack needs SLACK_BOT_TOKEN``.

Each command runs in a process of its own, in an empty directory (no ``.env``), with only the settings given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[2]
APP_TOKEN = "xapp-1-A0000000001-0123456789-abcdef"
BOT_TOKEN = "xoxb-0000000001-0123456789-abcdef"


def _hazel(tmp_path: Path, args: list[str], settings: dict[str, str]) -> subprocess.CompletedProcess:
    """``hazel ARGS`` in ``tmp_path`` with ``settings`` and no other Hazel, Slack or Jira setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HAZEL_", "SLACK_", "JIRA_"))}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               HAZEL_DATABASE_URL=f"sqlite:///{tmp_path / 'hazel.db'}", HAZEL_PORT=str(free_port()),
               HAZEL_OPERATOR="tester", **settings)
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("settings", "line"), [
    ({"SLACK_APP_TOKEN": APP_TOKEN}, "error: --socket-mode needs SLACK_BOT_TOKEN (the bot token, xoxb-…)"),
    ({"SLACK_BOT_TOKEN": BOT_TOKEN}, "error: --socket-mode needs SLACK_APP_TOKEN (an app-level token, xapp-…)"),
    ({}, "error: --socket-mode needs SLACK_APP_TOKEN (an app-level token, xapp-…) and SLACK_BOT_TOKEN (the bot "
         "token, xoxb-…)"),
], ids=["no-bot-token", "no-app-token", "neither"])
def test_socket_mode_without_a_slack_token_is_refused_before_anything_starts(
        tmp_path: Path, settings: dict[str, str], line: str) -> None:
    done = _hazel(tmp_path, ["serve", "--socket-mode"], settings)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [line], done.stderr  # one line: no worker started and stopped again
    assert done.stdout == ""
    assert not (tmp_path / "hazel.db").exists()  # the database was not even opened
    assert APP_TOKEN not in done.stderr and BOT_TOKEN not in done.stderr
