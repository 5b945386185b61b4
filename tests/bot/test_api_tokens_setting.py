"""``HAZEL_API_TOKENS`` is checked where every setting is, when any command starts (``hazel runs`` as ``hazel
serve``), with one message that names the entry and never a token."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.bot.test_cli_malformed import hostile, one_line_error  # noqa: F401 (a fixture)


T1, T2, T0 = "tok1-0123456789abcdef", "tok2-0123456789abcdef", "tok0-0123456789abcdef"
UNSENDABLE = ("holds a character an HTTP header cannot carry (printable ASCII only, no spaces): no client could "
              "present it; make one with: openssl rand -hex 24")
SHORT = "is shorter than 16 characters: a short token can be guessed; make one with: openssl rand -hex 24"


@pytest.mark.parametrize(("token", "tokens", "message"), [
    (None, "noequals", "HAZEL_API_TOKENS: entry 1 is not name=token"),
    (None, f"alice={T1},{T2}", "HAZEL_API_TOKENS: entry 2 is not name=token"),
    (None, f"a={T1},b={T1}", "HAZEL_API_TOKENS: each token must appear once (a name may have several"),
    (None, f"a={T1},a={T1}", "HAZEL_API_TOKENS: each token must appear once (a name may have several"),
    (T1, f"b={T1}", "HAZEL_API_TOKENS: each token must appear once (a name may have several: name=old,"
                    "name=new) (HAZEL_API_TOKEN's included"),
    # s24 F2: a one-character token was taken, and with it every run's decisions by anyone who tried them all
    (None, f"alice={T1},bob=tok2", f"HAZEL_API_TOKENS: entry 2 (bob): its token {SHORT}"),
    (None, f"alice={T1}, bob = {'x' * 15} ", f"HAZEL_API_TOKENS: entry 2 (bob): its token {SHORT}"),
    ("tok1", None, "HAZEL_API_TOKEN: must be at least 16 characters: a short token can be guessed; make one with: "
                   "openssl rand -hex 24"),
    # s26 F1: a token no HTTP header can carry was taken, and every call with it answered 401
    (None, f"alice={T1},bob={'é' * 15}€", f"HAZEL_API_TOKENS: entry 2 (bob): its token {UNSENDABLE}"),
    (None, f"alice={'x' * 8} {'y' * 8}", f"HAZEL_API_TOKENS: entry 1 (alice): its token {UNSENDABLE}"),
    ("tok1\x01-0123456789abcdef", None, f"HAZEL_API_TOKEN: {UNSENDABLE}"),
])
def test_a_malformed_tokens_setting_stops_every_command(hostile: Callable[..., Any],  # noqa: F811
                                                        monkeypatch: pytest.MonkeyPatch, token: str | None,
                                                        tokens: str | None, message: str) -> None:
    if token is not None:
        monkeypatch.setenv("HAZEL_API_TOKEN", token)
    if tokens is not None:
        monkeypatch.setenv("HAZEL_API_TOKENS", tokens)
    for argv in (["runs"], ["serve"]):
        result = hostile(*argv)
        one_line_error(result, [message], argv)
        for secret in ("tok1", "tok2", "xxxxx", "noequals", "15"):
            assert secret not in result.stderr + result.stdout, (argv, result.stderr)


def test_well_formed_tokens_let_commands_run(hostile: Callable[..., Any],  # noqa: F811
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_API_TOKEN", T0)
    monkeypatch.setenv("HAZEL_API_TOKENS", f" alice={T1}, ,bob = {T2},")
    result = hostile("runs")
    assert result.exit_code == 0, result.stderr
