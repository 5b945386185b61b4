"""Slack and Jira settings that turn a channel on without what it needs are refused up front, in one line naming
what is missing, exit status 1, before anything starts (no database opened, no worker started).

Found: ``hazel serve --socket-mode`` with ``SLACK_APP_TOKEN`` but no ``SLACK_BOT_TOKEN`` started its workers,
delivery and scheduler, then built the Slack app, which needs the bot token, and stopped them all again with
``error: unexpected ValueError: Slack needs SLACK_BOT_TOKEN``. ``JIRA_URL`` and ``JIRA_API_TOKEN`` without
``JIRA_USER`` (the API token is sent with the bot account's e-mail) ended every command, ``serve`` and
``worker`` included, with ``unexpected ValueError`` too.

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


JIRA_LINE = ("error: JIRA_API_TOKEN is set but JIRA_USER is not: Jira takes the API token with the bot account's "
             "e-mail (JIRA_USER); on Jira Server / Data Center set JIRA_PAT instead")


@pytest.mark.parametrize("args", [["serve"], ["worker"], ["worker", "--until-idle"], ["runs"]])
def test_a_jira_api_token_without_its_user_is_refused_in_one_line(tmp_path: Path, args: list[str]) -> None:
    done = _hazel(tmp_path, args, {"JIRA_URL": "https://example.atlassian.net", "JIRA_API_TOKEN": "jira-secret-1"})
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [JIRA_LINE], done.stderr
    assert not (tmp_path / "hazel.db").exists()
    assert "jira-secret-1" not in done.stderr


def test_a_jira_api_token_with_a_pat_needs_no_user(tmp_path: Path) -> None:
    """``JIRA_PAT`` is a credential of its own (Server / Data Center): with it, ``JIRA_USER`` is not needed."""
    done = _hazel(tmp_path, ["runs"], {"JIRA_URL": "https://jira.example.com", "JIRA_API_TOKEN": "jira-secret-1",
                                       "JIRA_PAT": "jira-pat-1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no runs"
