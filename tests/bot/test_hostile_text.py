"""Hostile stored text on the command line: terminal escapes, bidi overrides and rich markup are shown, never
obeyed; ``--raw`` and ``--json`` keep the text exact (issue 11, item 1). See tests/integrations for the
same text in Slack's mrkdwn and Jira's wiki markup."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from rich.text import Text

from integrations.terminal import SafeConsole, for_terminal

FEEDBACK = "fb \033]0;PWNED\007 \033[2J end"
RED = "\u001b[31mred\u001b[0m"
BIDI = "admin\u202egnp.exe"
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def _clean(text: str) -> None:
    for ch in CONTROLS:
        assert ch not in text, (ch, text)


def test_for_terminal_shows_every_control_and_keeps_the_rest() -> None:
    assert for_terminal(FEEDBACK) == "fb \\x1b]0;PWNED\\x07 \\x1b[2J end"
    assert for_terminal("a\tb\nc\rd\x9be\x7f\u202a\u2066\u2069") == "a\tb\nc\\x0dd\\x9be\\x7f\\u202a\\u2066\\u2069"
    assert for_terminal("line 1\nline 2\tx", one_line=True) == "line 1\\x0aline 2\\x09x"
    assert for_terminal("plain [bold]é ✓ 日本") == "plain [bold]é ✓ 日本"
    assert for_terminal(for_terminal(FEEDBACK)) == for_terminal(FEEDBACK)


def test_safe_console_keeps_its_own_styles_and_layout() -> None:
    buf = io.StringIO()
    console = SafeConsole(file=buf, force_terminal=True, color_system="standard", width=60)
    console.print(f"[red]error:[/red] {FEEDBACK}", Text(RED, style="bold"))
    out = buf.getvalue()
    assert "\x1b[31merror:" in out  # rich's own colour
    assert "\\x1b]0;PWNED\\x07 \\x1b[2J end" in out and "\\x1b[31mred\\x1b[0m" in out
    assert out.count("\x1b") == out.count("\x1b[") and "\x1b]" not in out and "\x07" not in out
    plain = io.StringIO()
    Console(file=plain, force_terminal=True, width=60).print(Text(RED))
    assert "\x1b[31mred" in plain.getvalue()  # what a plain rich Console does with the same Text


def _decide_as(run_id: str, name: str, action: str, payload: dict) -> None:
    """Decide at the run's pending request as the operator acting for ``name``, through the engine: the CLI
    refuses a name with control characters (``--as``), but other channels carry such names (a Slack or Jira
    display name), and every view must show them safely."""
    from bot.server.app import HazelApp
    from bot.settings import Settings

    hazel = HazelApp(Settings())  # (the cli fixture's database and workflows)
    try:
        hazel.prepare()
        hazel.decide(run_id=run_id, action=action, actor=hazel.operator(acting_for=name), payload=payload,
                     claim=True)
        hazel.drive(run_id=run_id)
    finally:
        hazel.close()


def _feedback_run(cli) -> str:  # noqa: ANN001
    run_id = json.loads(cli("run", "doc-review", "--input", json.dumps({"topic": RED}), "--json").stdout)["run"]["id"]
    _decide_as(run_id, f"eve{BIDI}", "feedback", {"text": FEEDBACK})
    return run_id


def test_history_audit_show_and_runs_never_write_stored_escapes(cli) -> None:  # noqa: ANN001
    run_id = _feedback_run(cli)
    history = cli("history", run_id).stdout
    _clean(history)
    assert "fb \\x1b]0;PWNED\\x07 \\x1b[2J end" in history and "eveadmin\\u202egnp.exe" in history
    audit = cli("audit", run_id).stdout
    _clean(audit)
    assert "\\x1b]0;PWNED\\x07" in audit and "\\u202e" in audit
    shown = cli("show", run_id).stdout
    _clean(shown)
    assert "About \\x1b[31mred\\x1b[0m (v2)" in shown
    for args in (("show", run_id, "--full"), ("show", run_id, "--seq", "0"), ("runs",)):
        _clean(cli(*args).stdout)


def test_raw_and_json_keep_the_stored_text_exact(cli) -> None:  # noqa: ANN001
    run_id = _feedback_run(cli)
    assert cli("show", run_id, "--raw").stdout == f"About {RED} (v2)\n"
    state = cli.json("show", run_id)["state"]
    assert state["draft"] == f"About {RED} (v2)" and f"feedback from eve{BIDI}: {FEEDBACK}" in state["notes"][-1]
    history = cli("history", run_id, "--json").stdout
    _clean(history)  # JSON escapes them (\u001b)
    decision = json.loads(history)["decisions"][0]
    assert decision["payload"]["text"] == FEEDBACK


def test_the_console_channel_prints_a_hostile_request_safely(cli) -> None:  # noqa: ANN001
    started = cli("run", "doc-review", "--input", json.dumps({"topic": f"{RED} {BIDI}"}))
    _clean(started.stdout + started.stderr)
    assert "About \\x1b[31mred\\x1b[0m admin\\u202egnp.exe (v1)" in started.stdout


@pytest.mark.parametrize("markup", ["[bold red]loud[/bold red]", "[link=http://evil.example]click[/link]",
                                    "[/]", ":warning: \\[x]"])
def test_rich_markup_in_stored_text_prints_literally(cli, markup: str) -> None:  # noqa: ANN001
    run_id = cli.json("run", "doc-review", "--input", json.dumps({"topic": markup}))["run"]["id"]
    assert f"About {markup} (v1)" in cli("show", run_id).stdout
    cli("reject", run_id, "--at", "review", "--reason", f"no {markup}", "--as", markup)  # (printable: taken)
    assert f"no {markup}" in cli("history", run_id).stdout
    audit = cli("audit", run_id).stdout
    assert markup in audit and "⚠" not in audit


def test_an_error_that_quotes_stored_text_is_one_safe_line(cli) -> None:  # noqa: ANN001
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    _decide_as(run_id, FEEDBACK, "reject", {"reason": "no"})
    late = cli("approve", run_id, "--at", "review", code=1)  # "already rejected by operator olga for <name>"
    _clean(late.stderr)
    assert for_terminal(FEEDBACK) in late.stderr and late.stderr.startswith("error: already rejected by ")
    assert len(late.stderr.strip().splitlines()) == 1
    as_json = cli("approve", run_id, "--at", "review", "--json", code=1).stdout
    assert FEEDBACK in json.loads(as_json)["error"]["message"]  # JSON keeps the text, escaped as JSON


def test_text_logs_show_stored_escapes() -> None:
    import logging

    from bot.ops.logs import TextFormatter

    record = logging.LogRecord("hazel.runner", logging.ERROR, __file__, 1, "step failed: %s", (FEEDBACK,), None)
    line = TextFormatter().format(record)
    _clean(line)
    assert line.endswith("step failed: fb \\x1b]0;PWNED\\x07 \\x1b[2J end")
