"""A ``.env`` line python-dotenv cannot parse (an unclosed quote) stops every command with one line naming the
file and the line, before any database is opened: pydantic-settings would skip the line (python-dotenv logging
a warning that names no file) and the setting would keep its default (``HAZEL_DATABASE_URL``: a new SQLite
file). ``serve`` / ``worker`` under ``HAZEL_LOG_FORMAT=json`` report it, and every malformed setting, as a JSON
record."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "pw-dotenv-7e7e7e7e"
UNCLOSED = (f'HAZEL_DATABASE_URL="postgresql+psycopg://postgres:{SECRET}@127.0.0.1:5432/x\n'
            "HAZEL_WORKFLOWS=../flows.py\n")
MESSAGE = "cannot read .env: line 1 is not NAME=VALUE (an unclosed quote?): fix or remove it"


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any setting of Hazel's, Slack's or Jira's, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("HAZEL_", "SLACK_", "JIRA_"))}
    return {**env, **extra}


def hazel(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_a_malformed_env_file_stops_a_command_before_any_database_is_made(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(UNCLOSED)
    done = hazel(["runs"], tmp_path, clean_env())
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"error: {MESSAGE}"], done.stderr  # (no python-dotenv warning)
    assert SECRET not in done.stderr
    assert not (tmp_path / "hazel.db").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env"]


def test_the_error_names_every_bad_line_never_its_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.settings import EnvFileError, Settings

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"# ok\nHAZEL_PORT=8001\n\n\nSLACK_BOT_TOKEN=\"{SECRET}\" tail\nFOO BAR {SECRET}\n"
                                   f"JIRA_PAT='{SECRET}\n")
    with pytest.raises(EnvFileError) as raised:
        Settings()
    assert str(raised.value) == ("cannot read .env: lines 5, 6 and 7 are not NAME=VALUE (an unclosed quote?): fix "
                                 "or remove them")
    (tmp_path / ".env").write_text("\n\nA=\"1\" 2\n")
    with pytest.raises(EnvFileError, match=r"^cannot read \.env: line 3 is not NAME=VALUE: fix or remove it$"):
        Settings()


def test_what_python_dotenv_accepts_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from bot.settings import Settings, env_value, unknown_settings

    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.upper().startswith("HAZEL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOST_PART", "db.example")
    (tmp_path / ".env").write_text(
        "# a comment\n\n"
        "export HAZEL_OPERATOR=olga  # trailing comment\n"
        "hazel_port='8123'\n"
        'HAZEL_BASE_URL="https://hazel.example.com"\n'
        "HAZEL_DATABASE_URL=postgresql+psycopg://u@${HOST_PART}:5432/h\n"
        'HAZEL_EXAMPLE_CHANNEL="multi\nline"\n'
        "HAZEL_PROT=1\n"
        "hazel_wrokers=3\n"
        "LONE_NAME\n")
    with caplog.at_level(logging.DEBUG):
        settings = Settings()
        assert (settings.operator, settings.port, settings.base_url) == ("olga", 8123, "https://hazel.example.com")
        assert settings.database_url == "postgresql+psycopg://u@db.example:5432/h"
        assert env_value("HAZEL_EXAMPLE_CHANNEL") == "multi\nline"
        assert unknown_settings({}) == [  # a lower-case typo too (s24 F3: hazel_port is read, hazel_wrokers not)
            "HAZEL_PROT is not a Hazel setting: it is ignored (did you mean HAZEL_PORT?)",
            "hazel_wrokers is not a Hazel setting: it is ignored (did you mean HAZEL_WORKERS?)"]
        assert unknown_settings({"hazel_prot": "1", "Hazel_Port": "8"}, env_file=None) == [
            "hazel_prot is not a Hazel setting: it is ignored (did you mean HAZEL_PORT?)"]
    assert not [r for r in caplog.records if r.name.startswith("dotenv")]


def test_env_and_unknown_settings_read_a_malformed_file_without_warnings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """``hazel.env()`` refuses it as ``Settings`` does (the value asked for may be on the bad line);
    ``unknown_settings`` names the typos of the other lines (``Settings`` reports the bad one)."""
    from bot.settings import EnvFileError, env_value, unknown_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HAZEL_EXAMPLE_CHANNEL", raising=False)
    (tmp_path / ".env").write_text(f"HAZEL_EXAMPLE_CHANNEL='#ops\nHAZEL_PROT=1\nX=\"{SECRET}\n")
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(EnvFileError, match="lines 1 and 3 are not NAME=VALUE") as raised:
            env_value("HAZEL_EXAMPLE_CHANNEL", "console")
        assert SECRET not in str(raised.value)
        assert unknown_settings({}) == ["HAZEL_PROT is not a Hazel setting: it is ignored (did you mean HAZEL_PORT?)"]
    assert not [r for r in caplog.records if r.name.startswith("dotenv")]
    monkeypatch.setenv("HAZEL_EXAMPLE_CHANNEL", "#from-env")  # the environment first, as before
    assert env_value("HAZEL_EXAMPLE_CHANNEL") == "#from-env"


def one_record(done: subprocess.CompletedProcess) -> dict:
    """The one line ``done`` wrote (on stderr), a JSON record of ``hazel.server`` at ERROR."""
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    try:
        record = json.loads(lines[0])
    except ValueError:
        pytest.fail(f"not a JSON line: {lines[0]!r}")
    assert (record["level"], record["logger"]) == ("ERROR", "hazel.server"), record
    assert set(record) >= {"time", "level", "logger", "message"}, record
    return record


@pytest.mark.parametrize("command", [["serve"], ["worker", "--until-idle"]])
@pytest.mark.parametrize(("setting", "message"), [
    ("HAZEL_PORT=80.0", "invalid settings: HAZEL_PORT: must be a whole number, not '80.0'"),
    ("HAZEL_WORKERS=0", "invalid settings: HAZEL_WORKERS: must be more than 0"),
    ("HAZEL_SWEEP_SEC=nan", "invalid settings: HAZEL_SWEEP_SEC: must be a finite number"),
])
def test_invalid_settings_of_serve_and_worker_are_a_json_record(command: list[str], setting: str, message: str,
                                                                tmp_path: Path) -> None:
    name, _, value = setting.partition("=")
    env = clean_env(HAZEL_LOG_FORMAT="Json", HAZEL_DATABASE_URL=f"sqlite:///{tmp_path / 'h.db'}",
                    HAZEL_API_TOKEN=SECRET, **{name: value})
    record = one_record(hazel(command, tmp_path, env))
    assert record["message"] == message
    assert not (tmp_path / "h.db").exists()


@pytest.mark.parametrize("command", [["serve"], ["worker", "--until-idle"]])
def test_a_malformed_env_file_under_json_logs_is_a_record(command: list[str], tmp_path: Path) -> None:
    """The format read from ``.env`` itself (its good lines, any case)."""
    (tmp_path / ".env").write_text("hazel_log_format=JSON\n" + UNCLOSED)
    done = hazel(command, tmp_path, clean_env())
    record = one_record(done)
    assert record["message"] == MESSAGE.replace("line 1", "line 2")
    assert SECRET not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env"]


@pytest.mark.parametrize("malformed", [{"HAZEL_LOG_LEVEL": "loud"}, {"HAZEL_LOG_FORMAT": "xml"}])
def test_a_log_setting_too_malformed_for_the_log_stays_a_line_of_text(malformed: dict[str, str],
                                                                      tmp_path: Path) -> None:
    env = clean_env(**{"HAZEL_LOG_FORMAT": "json", "HAZEL_PORT": "80.0", **malformed})
    done = hazel(["serve"], tmp_path, env)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: invalid settings: "), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
