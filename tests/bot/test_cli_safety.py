"""What a person types or stores is shown as it is, decisions land only where they were meant, and every
failure is one line with a non-zero exit (found by trying the CLI as a new user)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bot.engine.registry import module_name
from tests.bot.conftest import SAMPLE

TRICKY = "DROP TABLE [users] and - [x] confirm [/bold] [/]"


def test_stored_text_is_shown_verbatim_never_as_markup(cli) -> None:  # noqa: ANN001
    started = json.loads(cli("run", "doc-review", "--input", json.dumps({"topic": TRICKY}), "--json").stdout)
    run_id = started["run"]["id"]
    shown = cli("show", run_id).stdout
    assert f"About {TRICKY} (v1)" in shown
    assert cli("show", run_id, "--raw").stdout == f"About {TRICKY} (v1)\n"
    cli("feedback", run_id, "--at", "review", f"close {TRICKY}", "--as", "[b]x[/b]")
    history = cli("history", run_id).stdout
    assert f"close {TRICKY}" in history and "[b]x[/b]" in history
    audit = cli("audit", run_id).stdout
    assert "[/bold] [/]" in audit and "[b]x[/b]" in audit


def test_a_repeated_decision_never_lands_on_the_next_request(cli) -> None:  # noqa: ANN001
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    cli("feedback", run_id, "--at", "review", "again")  # the draft is written again: a new request at 'review'
    cli("approve", run_id, "--at", "review")
    again = cli("approve", run_id, "--at", "review", code=1)
    assert again.stderr.startswith("error: already approved by olga at ")
    never = cli("approve", run_id, "--at", "nowhere", code=1)
    assert "workflow doc-review v1 has no steering point 'nowhere' (its steering points: review)" in never.stderr
    plain = cli("approve", run_id, code=1)
    assert plain.stderr.startswith("error: already approved by olga at ")  # as with --at, naming the request
    assert "is completed, not waiting on a steering request; its last request was 'Review the draft')" in plain.stderr


def test_a_run_that_fails_exits_non_zero(cli) -> None:  # noqa: ANN001
    cli("workflows")
    sys.modules[module_name(SAMPLE)].FAIL["spend"] = 1
    run_id = json.loads(cli("run", "budget", "--input", '{"purpose": "x"}', "--json").stdout)["run"]["id"]
    failed = cli("approve", run_id, "--at", "approve_budget", "--json", code=1)
    assert json.loads(failed.stdout)["run"]["status"] == "failed"
    assert cli("retry", run_id).exit_code == 0


def test_show_seq_shows_the_whole_state_at_that_checkpoint(cli) -> None:  # noqa: ANN001
    run_id = json.loads(cli("run", "doc-review", "--input", '{"topic": "t"}', "--json").stdout)["run"]["id"]
    at_zero = cli("show", run_id, "--seq", "0").stdout
    assert "state at #0" in at_zero and '"topic": "t"' in at_zero and '"drafts": 0' in at_zero
    assert json.loads(cli("show", run_id, "--seq", "0", "--raw").stdout)["drafts"] == 0


def test_bad_input_is_one_line(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    assert cli("approve", "abc", code=1).stderr.strip() == \
        "error: no run 'abc': a shortened run id needs at least 4 characters"
    assert "error: Invalid value for '--as': needs a name (see `hazel run --help`)" in cli(
        "run", "doc-review", "--input", '{"topic": "t"}', "--as", " ", code=2).stderr
    assert "'bogus' is not an outbox status" in cli("outbox", "--status", "bogus", code=2).stderr
    assert "no dead outbox message 999" in cli("outbox", "retry", "999", code=1).stderr
    monkeypatch.setenv("HAZEL_DATABASE_URL", "postgresql+psycopg://someone:s3cret@127.0.0.1:1/none")
    down = cli("runs", code=1)
    assert down.stderr.startswith("error: database postgresql+psycopg://someone:**********@127.0.0.1:1/none: ")
    assert len(down.stderr.strip().splitlines()) == 1 and "s3cret" not in down.stderr
    monkeypatch.delenv("HAZEL_DATABASE_URL")  # the URL from .env is the one named, not the default
    Path(".env").write_text("HAZEL_DATABASE_URL=postgresql+psycopg://someone:s3cret@127.0.0.1:1/in_env\n")
    down = cli("runs", code=1)
    assert down.stderr.startswith("error: database postgresql+psycopg://someone:**********@127.0.0.1:1/in_env: "), down.stderr
    Path(".env").unlink()
    monkeypatch.setenv("HAZEL_DATABASE_URL", "mysql://x")
    assert "unsupported database 'mysql'" in cli("runs", code=1).stderr
    # a URL SQLAlchemy takes but Hazel cannot keep runs in: one line naming the fix, not "unexpected"
    for url, says in (("sqlite://", "in-memory SQLite"), ("sqlite:///:memory:", "in-memory SQLite"),
                      ("postgresql+psycopg2://someone:s3cret@127.0.0.1:1/none", "driver 'psycopg2'")):
        monkeypatch.setenv("HAZEL_DATABASE_URL", url)
        refused = cli("runs", code=1).stderr
        assert refused.startswith("error: HAZEL_DATABASE_URL: ") and says in refused, refused
        assert len(refused.strip().splitlines()) == 1 and "unexpected" not in refused and "s3cret" not in refused
