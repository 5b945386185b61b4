"""``HAZEL_WEB_SECRET`` shorter than 32 characters is refused at start with the one-line settings error, as any
malformed setting is: it alone signs the view links on every Slack card and Jira issue, ``hazel link --for``
proxy links and the session cookies, and one character (``x``) was taken silently. The message never shows the
secret."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
from pydantic import ValidationError

from bot.settings import Settings
from tests.bot.conftest import ROOT
from tests.support.live import free_port

REFUSED = ("error: invalid settings: HAZEL_WEB_SECRET: must be at least 32 characters: it alone signs the run "
           "pages' links and session cookies, and a short one can be guessed from any link; make one with: "
           "python -c 'import secrets; print(secrets.token_urlsafe(32))'\n")
SHORT = ["x", "abc", "Zq9" * 10 + "Z", " " * 10 + "Zq9" * 10 + "Z" + " " * 10]
"""Too short: one character, three, 31, and 31 with spaces around them (the signer leaves spaces out)."""


@pytest.mark.parametrize("secret", SHORT)
def test_a_short_web_secret_stops_every_command_at_start(cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
                                                         secret: str) -> None:
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "secrets"}')["run"]["id"]
    monkeypatch.setenv("HAZEL_BASE_URL", "https://hazel.example.com")
    monkeypatch.setenv("HAZEL_WEB_SECRET", secret)
    for command in (["link", run_id, "--for", "priya"], ["runs"], ["workflows"]):
        refused = cli(*command, code=1)
        assert refused.stderr == REFUSED and refused.stdout == "", refused.stderr  # (the secret: not shown)


def test_thirty_two_characters_are_taken(cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "secrets"}')["run"]["id"]
    monkeypatch.setenv("HAZEL_BASE_URL", "https://hazel.example.com")
    monkeypatch.setenv("HAZEL_WEB_SECRET", "k" * 32)
    assert cli("link", run_id).stdout.startswith(f"https://hazel.example.com/runs/{run_id}?t=")
    assert Settings(HAZEL_WEB_SECRET="k" * 32).web_secret is not None
    with pytest.raises(ValidationError):
        Settings(HAZEL_WEB_SECRET="k" * 31)
    assert Settings(HAZEL_WEB_SECRET="   ").web_secret is None  # blank: unset (the pages are off), as before


def test_hazel_serve_refuses_it_before_it_listens(tmp_path: Path) -> None:
    """The real command: one line on stderr, exit status 1, nothing served."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HAZEL_", "SLACK_", "JIRA_"))}
    env.update(HAZEL_DATABASE_URL=f"sqlite:///{tmp_path / 'hazel.db'}", HAZEL_WEB_SECRET="hunter2",
               HAZEL_PORT=str(free_port()), HAZEL_BASE_URL="https://hazel.example.com")
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "hazel"), "serve"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)  # (it served until killed, before)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr == REFUSED and "hunter2" not in done.stdout + done.stderr, done.stderr
    assert not (tmp_path / "hazel.db").exists()  # (refused before the database was opened)
