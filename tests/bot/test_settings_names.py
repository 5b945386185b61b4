"""``Settings`` reads only the names README's Configuration lists (each field's aliases: ``HAZEL_PORT``,
``SLACK_BOT_TOKEN``, ``JIRA_API_TOKEN``/``JIRA_TOKEN`` …) from the environment and from ``.env``, never a variable
named like the field (``PORT``, ``DATABASE_URL``: a PaaS sets those for its own use), while code still builds
``Settings(port=…)`` by field name."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from bot.settings import Settings, setting_names
from tests.bot.test_cli_malformed import hostile  # noqa: F401 (a fixture)

FOREIGN = {"PORT": "1234", "DATABASE_URL": "postgres://x", "WORKERS": "0", "HOST": "0.0.0.0", "OPERATOR": "eve"}
"""Variables a platform or a shell sets for its own use, each named like a setting's field."""


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No setting in the environment, and nothing named like a field (so each test sets its own), the working
    directory an empty one (no ``.env`` unless the test writes it); returns it."""
    for name in setting_names() | {n.upper() for n in Settings.model_fields}:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _by_field_name() -> list[str]:
    """Fields whose name, as an environment variable, is none of their aliases (``port``: ``HAZEL_PORT``)."""
    aliases = {n.lower() for n in setting_names()}
    return [name for name in Settings.model_fields if name not in aliases]


def _shown(settings: Settings) -> tuple[Any, ...]:
    return settings.port, settings.database_url, settings.workers, settings.host, settings.operator


OURS = {"HAZEL_PORT": "8123", "HAZEL_DATABASE_URL": "sqlite:///mine.db", "HAZEL_WORKERS": "2",
        "HAZEL_HOST": "127.0.0.2", "HAZEL_OPERATOR": "ann"}
OURS_READ = (8123, "sqlite:///mine.db", 2, "127.0.0.2", "ann")


def test_some_fields_are_named_unlike_their_variable() -> None:
    assert {"port", "database_url", "workers", "host", "operator", "workflows", "output_dir"} <= set(_by_field_name())


def test_variables_named_like_fields_are_ignored_in_the_environment(clean: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = _shown(Settings())
    assert defaults[:4] == (8000, "sqlite:///hazel.db", 4, "127.0.0.1") and defaults[4] != "eve"
    for name, value in FOREIGN.items():
        monkeypatch.setenv(name, value)
        monkeypatch.setenv(name.lower(), value)
    assert _shown(Settings()) == defaults

    for name, value in OURS.items():
        monkeypatch.setenv(name, value)
    assert _shown(Settings()) == OURS_READ


def test_variables_named_like_fields_are_ignored_in_dotenv(clean: Path) -> None:
    defaults = _shown(Settings())
    lines = [f"{name}={value}" for name, value in FOREIGN.items()] + ["port=1235", "operator=eve"]
    (clean / ".env").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _shown(Settings()) == defaults

    lines += [f"{name}={value}" for name, value in OURS.items()]
    (clean / ".env").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _shown(Settings()) == OURS_READ


@pytest.mark.parametrize("where", ["environment", ".env"])
def test_no_field_is_read_by_its_name(clean: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Every field, present and future: its name set to ``0`` (malformed or unlike the default for each) changes
    nothing."""
    expected = Settings().model_dump()
    names = [n.upper() for n in _by_field_name()]
    if where == "environment":
        for name in names:
            monkeypatch.setenv(name, "0")
    else:
        (clean / ".env").write_text("".join(f"{n}=0\n{n.lower()}=0\n" for n in names), encoding="utf-8")
    assert Settings().model_dump() == expected


def test_code_still_builds_settings_by_field_name(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_PORT", "8123")
    (clean / ".env").write_text("HAZEL_WORKERS=3\n", encoding="utf-8")
    settings = Settings(database_url="sqlite:///code.db", port=9001, workers=5, jira_api_token="tok-code")
    assert (settings.database_url, settings.port, settings.workers) == ("sqlite:///code.db", 9001, 5)
    assert settings.jira_api_token is not None and settings.jira_api_token.get_secret_value() == "tok-code"


def test_both_jira_token_names_are_read(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JIRA_TOKEN", "tok-old-name")
    token = Settings().jira_api_token
    assert token is not None and token.get_secret_value() == "tok-old-name"
    monkeypatch.setenv("JIRA_API_TOKEN", "tok-new-name")
    token = Settings().jira_api_token
    assert token is not None and token.get_secret_value() == "tok-new-name"


def test_a_command_runs_whatever_the_platform_sets(hostile: Callable[..., Any],  # noqa: F811
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FOREIGN.items():
        monkeypatch.setenv(name, value)
    result = hostile("runs")
    assert result.exit_code == 0, result.stderr

