"""Defects a fresh user found in the CLI: a command delivers only its own runs' notifications, a step's error
never controls the terminal, usage errors exit 2, ``--reason @file`` reads the file everywhere."""

from __future__ import annotations

import json

import pytest

from store import Store
from store.models import OutboxStatus


def _outbox(db_url: str, run_id: str) -> dict[int, tuple[str, int]]:
    store = Store(db_url)
    try:
        with store.transaction() as tx:
            return {m.id: (OutboxStatus(m.status).value, m.attempts) for m in tx.outbox.list(run_id=run_id)}
    finally:
        store.dispose()


def test_a_command_delivers_only_the_notifications_of_its_own_runs(cli, db_url: str,  # noqa: ANN001
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_HOOK_URLS", "http://127.0.0.1:9/x")
    monkeypatch.setenv("HAZEL_HOOK_SECRET", "s3cret-value")
    other = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    cli("approve", other, "--at", "review", "--detach")  # its hook rows tried once (nothing listens): due again
    monkeypatch.delenv("HAZEL_HOOK_URLS")
    monkeypatch.delenv("HAZEL_HOOK_SECRET")
    before = _outbox(db_url, other)
    assert "pending" in {status for status, _ in before.values()}, before
    mine = json.loads(cli("run", "doc-review", "--input", '{"topic": "u"}', "--json").stdout)["run"]["id"]
    cli("cancel", mine)
    assert _outbox(db_url, other) == before  # not attempted by commands about another run
    assert {status for status, _ in _outbox(db_url, mine).values()} == {"sent"}


def test_a_decision_that_ends_the_run_or_leaves_it_to_a_worker_delivers_its_notifications(
        cli, db_url: str) -> None:  # noqa: ANN001
    ended = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    cli("reject", ended, "--at", "review", "--reason", "no")  # the run ends in the decision: no step to drive
    left = json.loads(cli("run", "doc-review", "--input", '{"topic": "u"}', "--json").stdout)["run"]["id"]
    cli("approve", left, "--at", "review", "--detach")
    for run_id in (ended, left):
        sent = _outbox(db_url, run_id)
        assert sent and {status for status, _ in sent.values()} == {"sent"}, sent


FAILING = '''
from pydantic import BaseModel

from hazel import StepContext, Workflow


class S(BaseModel):
    n: int = 0


wf = Workflow("two-tries", version=1, state=S)


@wf.step
def one(state: S, ctx: StepContext) -> S:
    return state


@wf.step(max_attempts=2, backoff_sec=0.01, max_backoff_sec=0.01)
def two(state: S, ctx: StepContext) -> S:
    raise RuntimeError("boom \\x1b[31mred\\x1b[0m \\x1b]0;PWNED\\x07")
'''


def test_a_steps_error_on_stderr_never_controls_the_terminal(cli, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    workflows = tmp_path / "failing.py"
    workflows.write_text(FAILING)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(workflows))
    failed = cli("run", "two-tries", code=1)
    assert "\x1b" not in failed.stderr and "\x07" not in failed.stderr, failed.stderr
    assert "step two attempt 1/2 failed: RuntimeError: boom \\x1b[31mred\\x1b[0m \\x1b]0;PWNED\\x07" \
        in failed.stderr, failed.stderr


def test_a_usage_errors_echo_of_what_was_typed_never_controls_the_terminal(cli) -> None:  # noqa: ANN001
    bad = cli("runs", "--bogus\x1b[2J\u202e", code=2)
    assert "\x1b" not in bad.stderr and "\u202e" not in bad.stderr
    assert "No such option: --bogus\\x1b[2J\\u202e" in bad.stderr, bad.stderr


def test_usage_errors_exit_2_with_one_line(cli, tmp_path) -> None:  # noqa: ANN001
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    expected = {
        ("edit", run_id): "error: give either --file F or --set FIELD=VALUE (see `hazel edit --help`)",
        ("edit", run_id, "--set", "x", "--file", "f"):
            "error: give either --file F or --set FIELD=VALUE (see `hazel edit --help`)",
        ("edit", run_id, "--set", "scripts"):
            "error: Invalid value for '--set': needs FIELD=VALUE, got 'scripts' (see `hazel edit --help`)",
        ("rewind", run_id, "--to", "1", "--set", "=x"):
            "error: Invalid value for '--set': needs FIELD=VALUE, got '=x' (see `hazel rewind --help`)",
        ("rewind", run_id, "--to", "2147483648"):
            "error: Invalid value for '--to': 2147483648 is out of range: a checkpoint number is at most 2147483647 "
            "(see `hazel rewind --help`)",
        ("approve", run_id, "--as", ""): "error: Invalid value for '--as': needs a name (see `hazel approve --help`)",
        ("link", run_id, "--for", " "): "error: Invalid value for '--for': needs a name (see `hazel link --help`)",
        ("approve", run_id, "--as", "eve\nFORGED"): "error: Invalid value for '--as': must be one line of printable "
                                                   "text (no line break or control character: the audit log and "
                                                   "the CLI's tables show it) (see `hazel approve --help`)",
        ("link", run_id, "--for", "eve\x1b[2J"): "error: Invalid value for '--for': must be one line of printable "
                                               "text (no line break or control character: the audit log and the "
                                               "CLI's tables show it) (see `hazel link --help`)",
        # a person's decision may not read as a timeout's, nor a name outgrow the database's 200 characters
        ("approve", run_id, "--as", "timeout"): "error: Invalid value for '--as': is the name of Hazel's own actor "
                                                "('timeout'); choose another name (see `hazel approve --help`)",
        ("feedback", run_id, "ok", "--as", "a" * 300): "error: Invalid value for '--as': is 300 characters long: at "
                                                      "most 200 (see `hazel feedback --help`)",
        ("link", run_id, "--for", "Hazel"): "error: Invalid value for '--for': is the name of Hazel's own actor "
                                            "('Hazel'); choose another name (see `hazel link --help`)",
    }
    for args, line in expected.items():
        assert cli(*args, code=2).stderr == line + "\n", args
    assert cli.json("show", run_id)["run"]["status"] == "waiting"  # nothing was decided


def test_feedback_starting_with_at_is_written_with_two(cli) -> None:  # noqa: ANN001
    """A fresh-user finding: ``hazel feedback RUN "@sam please shorten"`` could not be typed (it read the file
    ``sam please shorten``), and the error did not say why."""
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    refused = cli("feedback", run_id, "@sam please shorten", code=1).stderr
    assert refused == ("error: cannot read sam please shorten: No such file or directory (text starting with @ "
                       "names a file to read: write @@ for a literal @)\n"), refused
    cli("feedback", run_id, "@@sam please shorten")
    decisions = cli.json("history", run_id)
    assert "@sam please shorten" in json.dumps(decisions) and "@@sam" not in json.dumps(decisions), decisions


def test_cancel_reason_at_file_reads_the_file_as_reject_does(cli, tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "why.txt").write_text("superseded by\nthe new plan\n")
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9")
    (tmp_path / "nul.txt").write_bytes(b"a\x00b")
    assert cli("cancel", run_id, "--reason", "@nowhere.txt", code=1).stderr == \
        "error: cannot read nowhere.txt: No such file or directory (text starting with @ names a file to read: " \
        "write @@ for a literal @)\n"
    assert "cannot read bad.txt: not UTF-8 text (byte 0xe9 at offset 3)" in \
        cli("cancel", run_id, "--reason", "@bad.txt", code=1).stderr
    assert "cannot read nul.txt: it holds a NUL byte" in cli("cancel", run_id, "--reason", "@nul.txt", code=1).stderr
    cli("cancel", run_id, "--reason", "@why.txt")
    dumped = json.dumps(cli.json("audit", run_id))
    assert "superseded by\\nthe new plan" in dumped and "@why.txt" not in dumped, dumped


def test_url_settings_are_refused_at_start_naming_the_value_as_given(cli, monkeypatch) -> None:  # noqa: ANN001
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    monkeypatch.setenv("HAZEL_WEB_SECRET", "a-long-random-web-secret-of-40-characters")
    monkeypatch.setenv("HAZEL_BASE_URL", "notaurl")
    assert cli("link", run_id, code=1).stderr == ("error: invalid settings: HAZEL_BASE_URL: must be an http(s) URL "
                                                  "such as https://hazel.example.com, not 'notaurl'\n")
    for unusable in ("https://exa mple.com", "https://a<b>.com", "https://example.com\\evil"):  # (s32 F9)
        monkeypatch.setenv("HAZEL_BASE_URL", unusable)
        assert cli("link", run_id, code=1).stderr == ("error: invalid settings: HAZEL_BASE_URL: must be an http(s) "
                                                      f"URL such as https://hazel.example.com, not {unusable!r}\n")
    monkeypatch.setenv("HAZEL_BASE_URL", "https://hazel.example.com/")
    assert "https://hazel.example.com/runs/" in cli("link", run_id).stdout
    monkeypatch.setenv("HAZEL_HOOK_URLS", "hello")
    assert cli("runs", code=1).stderr == "error: invalid settings: HAZEL_HOOK_URLS: 'hello' is not an http(s) URL\n"
    monkeypatch.setenv("HAZEL_HOOK_URLS", "https://hooks.example.com/h,ftp://me:pw@files.example.com/x?key=k")
    assert cli("runs", code=1).stderr == \
        "error: invalid settings: HAZEL_HOOK_URLS: 'ftp://files.example.com/x?…' is not an http(s) URL\n"
    monkeypatch.setenv("HAZEL_HOOK_URLS", "https://hooks.example.com/h, https://hooks.example.com/h")  # (s32 F8)
    assert cli("runs", code=1).stderr == ("error: invalid settings: HAZEL_HOOK_URLS: 'https://hooks.example.com/h' "
                                          "is listed twice: each URL must appear once\n")
    secret = "https://hooks.slack.com/services/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"  # (its token: a path's)
    monkeypatch.setenv("HAZEL_HOOK_URLS", f"{secret},{secret}")
    assert cli("runs", code=1).stderr == ("error: invalid settings: HAZEL_HOOK_URLS: 'https://hooks.slack.com/"
                                          "services/T0A1B2C3D/B0A1B2C3D/…' is listed twice: each URL must appear "
                                          "once\n")
    monkeypatch.delenv("HAZEL_HOOK_URLS")
    monkeypatch.setenv("HAZEL_BASE_URL", "https://hazel.example.com/#access_token=t0ken")
    assert cli("runs", code=1).stderr == ("error: invalid settings: HAZEL_BASE_URL: must be the site's URL without a "
                                          "query or fragment, not 'https://hazel.example.com/#…'\n")


def test_input_at_dash_reads_standard_input(cli) -> None:  # noqa: ANN001
    from typer.testing import CliRunner

    from bot.cli import app

    runner = CliRunner()
    started = runner.invoke(app, ["run", "doc-review", "--input", "@-", "--json"], input='{"topic": "piped"}\n')
    assert started.exit_code == 0, started.output
    run_id = json.loads(started.stdout)["run"]["id"]
    assert cli("show", run_id, "--raw").stdout == "About piped (v1)\n"
    fed = runner.invoke(app, ["feedback", run_id, "@-"], input="shorter,\nplease\n")
    assert fed.exit_code == 0, fed.output
    assert "shorter,\nplease" in json.dumps(cli.json("history", run_id)).replace("\\n", "\n")
    bad = runner.invoke(app, ["run", "doc-review", "--input", "@-"], input=b"caf\xe9")
    assert (bad.exit_code, bad.stderr) == (1, "error: cannot read standard input: not UTF-8 text (byte 0xe9 at "
                                              "offset 3)\n")


def test_a_second_at_dash_is_refused_not_read_as_empty(cli) -> None:  # noqa: ANN001
    """Standard input is read once: a second ``@-`` of the same command would have taken "" as its value."""
    from typer.testing import CliRunner

    from bot.cli import app

    run_id = cli.json("run", "doc-review", "--input", '{"topic": "t"}')["run"]["id"]
    before = cli.json("history", run_id)
    runner = CliRunner()
    both = runner.invoke(app, ["rewind", run_id, "--to", "0", "--feedback", "@-", "--set", "topic=@-"],
                         input="piped once\n")
    assert (both.exit_code, both.stderr) == (1, "error: standard input was read already by another `@-` or "
                                                "`--file -` of this command; only one argument can read it (give "
                                                "the others as @FILE)\n")
    assert cli.json("history", run_id) == before  # nothing rewound
    again = runner.invoke(app, ["feedback", run_id, "@-"], input="the next command reads it again\n")
    assert again.exit_code == 0, again.output


def test_a_misspelled_setting_is_named_on_stderr_and_the_command_goes_on(cli, monkeypatch) -> None:  # noqa: ANN001
    from pathlib import Path

    monkeypatch.setenv("HAZEL_PROT", "9000")
    monkeypatch.setenv("HAZEL_TEST_ANYTHING", "1")  # the suite's own names are no typo
    Path(".env").write_text("HAZEL_WORKFLWS=flows.py\n")
    listed = cli("runs")
    assert listed.stdout.strip() == "no runs"
    lines = listed.stderr.splitlines()  # (a handler an earlier test of this process installed may repeat them)
    for expected in ("HAZEL_PROT is not a Hazel setting: it is ignored (did you mean HAZEL_PORT?)",
                     "HAZEL_WORKFLWS is not a Hazel setting: it is ignored (did you mean HAZEL_WORKFLOWS?)"):
        assert expected in lines, lines  # the command's own line, as it is
    assert "HAZEL_TEST_ANYTHING" not in listed.stderr


def test_an_option_typed_before_its_command_says_where_it_goes(cli) -> None:  # noqa: ANN001
    """``hazel --json runs`` said only "No such option: --json": an option of the command typed before the
    command's name says to put it after (a usage error, exit 2); one no command there has is still unknown."""
    expected = {
        ("--json", "runs"): "error: --json goes after the command: `hazel runs --json` (see `hazel runs --help`)",
        ("--status", "waiting", "runs"):
            "error: --status goes after the command: `hazel runs --status …` (see `hazel runs --help`)",
        ("--json", "db", "current"):
            "error: --json goes after the command: `hazel db current --json` (see `hazel db current --help`)",
        ("--json",): "error: No such option: --json (see `hazel --help`)",
        ("--bogus", "runs"): "error: No such option: --bogus (see `hazel --help`)",
    }
    for args, line in expected.items():
        assert cli(*args, code=2).stderr == line + "\n", args
    assert isinstance(cli.json("runs"), (list, dict))  # after the command it is taken


def test_hazel_db_alone_prints_its_help_and_exits_0(cli) -> None:  # noqa: ANN001
    """``hazel db`` exited 2 (Click's ``no_args_is_help`` is a usage error): it prints its help and exits 0, as
    ``git remote`` does; a subcommand still runs, an unknown option is still a usage error."""
    shown = cli("db", code=0)
    assert shown.stdout.startswith("Usage: hazel db [OPTIONS] COMMAND"), shown.stdout
    assert all(name in shown.stdout for name in ("upgrade", "downgrade", "current")), shown.stdout
    assert cli("db", "--help").stdout == shown.stdout
    assert cli("db", "current").stdout.startswith("current ")
    assert cli("db", "--bogus", code=2).stderr == "error: No such option: --bogus (see `hazel db --help`)\n"
