"""``Settings`` reads only the names README's Configuration lists (each field's aliases: ``HAZEL_PORT``,
``SLACK_BOT_TOKEN``, ``JIRA_API_TOKEN``/``JIRA_TOKEN`` …) from the environment and from ``.env``, never a variable
named like the field (``PORT``, ``DATABASE_URL``: a PaaS sets those for its own use), while code still builds
``Settings(port=…)`` by field name; and its messages for a non-finite duration and a blank number."""

from __future__ import annotations

import math
import typing
from pathlib import Path
from typing import Any, Callable

import pytest
from pydantic import ValidationError

from bot.settings import Settings, setting_names
from tests.bot.test_cli_malformed import hostile, one_line_error  # noqa: F401 (a fixture)

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


def _errors(**environ: str) -> list[tuple[str, str]]:
    """``(variable, message)`` of each error ``Settings()`` raises with ``environ`` set; ``[]`` when none."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in environ.items():
            mp.setenv(name, value)
        try:
            Settings()
        except ValidationError as exc:
            return [(".".join(map(str, e["loc"])), e["msg"].removeprefix("Value error, ")) for e in exc.errors()]
    return []


def _env_name(field: str) -> str:
    alias = Settings.model_fields[field].validation_alias
    assert isinstance(alias, str), field
    return alias


SEC_FIELDS = [name for name in Settings.model_fields if name.endswith("_sec")]
NUMBER_FIELDS = [name for name, f in Settings.model_fields.items() if f.annotation in (int, float)]


def test_these_lists_are_not_empty() -> None:
    assert {"lease_sec", "link_ttl_sec", "scheduler_tick_sec", "web_session_sec"} <= set(SEC_FIELDS)
    assert {"port", "workers", "db_pool_size", "lease_sec"} <= set(NUMBER_FIELDS)


@pytest.mark.parametrize("field", SEC_FIELDS)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e999"])
def test_every_duration_refuses_a_non_finite_number_alike(clean: Path, field: str, value: str) -> None:
    assert _errors(**{_env_name(field): value}) == [(_env_name(field), "must be a finite number")]


@pytest.mark.parametrize("field", SEC_FIELDS)
def test_every_duration_refuses_zero_alike(clean: Path, field: str) -> None:
    assert _errors(**{_env_name(field): "0"}) == [(_env_name(field), "must be more than 0")]


@pytest.mark.parametrize("field", NUMBER_FIELDS)
@pytest.mark.parametrize("value", ["", "  "])
def test_a_blank_number_says_so_and_names_the_default(clean: Path, field: str, value: str) -> None:
    default = Settings.model_fields[field].default
    shown = int(default) if math.isfinite(default) and float(default).is_integer() else default
    message = f"must be a number, not blank (default {shown})"
    assert _errors(**{_env_name(field): value}) == [(_env_name(field), message)]


def test_a_blank_flag_says_so(clean: Path) -> None:
    flags = [n for n, f in Settings.model_fields.items() if f.annotation is bool]
    assert flags
    for field in flags:
        message = "must be true or false, not blank (default false)"
        assert _errors(**{_env_name(field): ""}) == [(_env_name(field), message)]


def test_a_blank_optional_number_is_unset(clean: Path) -> None:
    optional = [n for n, f in Settings.model_fields.items()
                if type(None) in typing.get_args(f.annotation) and {int, float} & set(typing.get_args(f.annotation))]
    assert "metrics_port" in optional and "retention_days" in optional
    for field in optional:
        assert _errors(**{_env_name(field): ""}) == []


@pytest.mark.parametrize(("name", "value", "message"), [
    ("HAZEL_LINK_TTL_SEC", "nan", "HAZEL_LINK_TTL_SEC: must be a finite number"),
    ("HAZEL_SCHEDULER_TICK_SEC", "nan", "HAZEL_SCHEDULER_TICK_SEC: must be a finite number"),
    ("HAZEL_PORT", "", "HAZEL_PORT: must be a number, not blank (default 8000)"),
])
def test_a_command_names_the_setting_and_what_is_wrong(hostile: Callable[..., Any],  # noqa: F811
                                                       monkeypatch: pytest.MonkeyPatch, name: str, value: str,
                                                       message: str) -> None:
    monkeypatch.setenv(name, value)
    one_line_error(hostile("runs"), [f"error: invalid settings: {message}"], ["runs"])


INT_FIELDS = [n for n, f in Settings.model_fields.items()
              if f.annotation is int or int in typing.get_args(f.annotation)]


@pytest.mark.parametrize("field", INT_FIELDS)
@pytest.mark.parametrize("value", ["8_000", "80.0", "nan", "8e3", "0x50"])
def test_a_whole_number_setting_takes_only_digits(clean: Path, field: str, value: str) -> None:
    """``HAZEL_PORT=8_000`` and ``=80.0`` were taken as 8000 and 80 (pydantic's lax int), ``nan`` got pydantic's
    own words."""
    assert "port" in INT_FIELDS and "workers" in INT_FIELDS and "metrics_port" in INT_FIELDS
    assert _errors(**{_env_name(field): value}) == [(_env_name(field), f"must be a whole number, not {value!r}")]


@pytest.mark.parametrize("field", INT_FIELDS)
def test_a_whole_number_setting_takes_spaces_and_a_sign_around_its_digits(clean: Path, field: str) -> None:
    default = Settings.model_fields[field].default
    assert _errors(**{_env_name(field): f" +{9100 if default is None else default} "}) == []


def test_a_database_url_whose_port_is_not_a_number_says_so_without_echoing_it(clean: Path) -> None:
    url = "postgresql+psycopg://hazel:s3cret-pw@127.0.0.1:notaport/hazel"
    assert _errors(HAZEL_DATABASE_URL=url) == [
        ("HAZEL_DATABASE_URL", "the port in the URL must be a number from 0 to 65535")]


def test_a_prefixed_name_of_an_unprefixed_setting_is_pointed_at_it(clean: Path) -> None:
    from bot.settings import unknown_settings

    assert unknown_settings({"HAZEL_JIRA_URL": "https://x.atlassian.net", "HAZEL_SLACK_BOT_TOKEN": "x"}, None) == [
        "HAZEL_JIRA_URL is not a Hazel setting: it is ignored (did you mean JIRA_URL?)",
        "HAZEL_SLACK_BOT_TOKEN is not a Hazel setting: it is ignored (did you mean SLACK_BOT_TOKEN?)"]


@pytest.mark.parametrize("name", ["ops\nFORGED", "ops\x1b[2J", "ops\u202eevil", "ops\u2028FORGED", "ops\u2029x"])
def test_an_operator_name_is_one_line_of_printable_text(clean: Path, name: str) -> None:
    """A line break in ``HAZEL_OPERATOR`` started a row of its own in ``hazel audit`` and the tables; so did
    U+2028 and U+2029 (a line and a paragraph separator to ``str.splitlines`` and rich), which were accepted."""
    assert _errors(HAZEL_OPERATOR=name) == [("HAZEL_OPERATOR", "must be one line of printable text (no line break "
                                             "or control character: the audit log and the CLI's tables show it)")]


@pytest.mark.parametrize("name", ["b\u200bob", "bo\ufeffb", "b\u00adob", "bob\u2060", "b\u200eob", "bo\u034fb",
                                  "bob\ufe0f", "b\U000e0020ob", "bo\u115fb", "b\U0001d173ob"])
def test_a_name_with_an_invisible_character_is_refused(clean: Path, name: str) -> None:
    """``b\u200bob`` printed as ``bob``: refusals and the audit log read as another person's (a fresh-user
    round). The zero-width (non-)joiners stay allowed: names in Persian and Indic scripts need them."""
    [(variable, message)] = _errors(HAZEL_OPERATOR=name)
    assert variable == "HAZEL_OPERATOR" and message.startswith("holds an invisible character (U+"), message
    assert message.endswith("it would read as another name ('bob')"), message
    assert _errors(HAZEL_OPERATOR="\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645") == []  # ZWNJ


@pytest.mark.parametrize("variable, value, message", [
    ("HAZEL_API_TOKENS", "timeout=tok-timeout-1234567", "entry 1: its name is the name of Hazel's own actor "
                                                       "('timeout'); choose another name"),
    ("HAZEL_API_TOKENS", f"ok=tok-ok-123456789,{'n' * 300}=tok-long-0123456789", "entry 2: its name is 300 "
                                                                                 "characters long: at most 200"),
    ("HAZEL_OPERATOR", "x" * 201, "is 201 characters long: at most 200"),
    ("HAZEL_OPERATOR", "hazel", "is the name of Hazel's own actor ('hazel'); choose another name"),
])
def test_a_name_given_in_the_settings_is_refused_as_the_cli_refuses_it(clean: Path, variable: str, value: str,
                                                                      message: str) -> None:
    """A fresh-user finding: a token named ``timeout`` decided as if it were a timeout, and a name over 200
    characters failed on PostgreSQL with the database's own error (a 500 over REST)."""
    from pydantic import ValidationError

    from bot.settings import Settings

    with pytest.raises(ValidationError) as raised:
        Settings(**{variable: value})
    assert message in str(raised.value) and "tok-" not in str(raised.value), str(raised.value)
