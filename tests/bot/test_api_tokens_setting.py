"""``HAZEL_API_TOKENS`` is checked where every setting is, when any command starts (``hazel runs`` as ``hazel
serve``), with one message that names the entry and never a token."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.bot.test_cli_malformed import hostile, one_line_error  # noqa: F401 (a fixture)


@pytest.mark.parametrize(("token", "tokens", "message"), [
    (None, "noequals", "HAZEL_API_TOKENS: entry 1 is not name=token"),
    (None, "alice=tok-one,tok-two", "HAZEL_API_TOKENS: entry 2 is not name=token"),
    (None, "a=tok1,b=tok1", "HAZEL_API_TOKENS: each token must appear once (a name may have several"),
    (None, "a=tok1,a=tok1", "HAZEL_API_TOKENS: each token must appear once (a name may have several"),
    ("tok1", "b=tok1", "HAZEL_API_TOKENS: each token must appear once (a name may have several: name=old,"
                       "name=new) (HAZEL_API_TOKEN's included"),
])
def test_a_malformed_tokens_setting_stops_every_command(hostile: Callable[..., Any],  # noqa: F811
                                                        monkeypatch: pytest.MonkeyPatch, token: str | None,
                                                        tokens: str, message: str) -> None:
    if token is not None:
        monkeypatch.setenv("HAZEL_API_TOKEN", token)
    monkeypatch.setenv("HAZEL_API_TOKENS", tokens)
    for argv in (["runs"], ["serve"]):
        result = hostile(*argv)
        one_line_error(result, [message], argv)
        for secret in ("tok1", "tok2", "tok-one", "tok-two", "noequals"):
            assert secret not in result.stderr + result.stdout, (argv, result.stderr)


def test_well_formed_tokens_let_commands_run(hostile: Callable[..., Any],  # noqa: F811
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_API_TOKEN", "tok0")
    monkeypatch.setenv("HAZEL_API_TOKENS", " alice=tok1, ,bob = tok2,")
    result = hostile("runs")
    assert result.exit_code == 0, result.stderr
