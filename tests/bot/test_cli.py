"""The console channel: every CLI command, its --json output, and one-line errors with a non-zero exit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bot.engine.registry import module_name
from tests.bot.conftest import SAMPLE



def test_run_steer_and_inspect(cli) -> None:  # noqa: ANN001
    started = cli.json("run", "doc-review", "--input", '{"topic": "caching"}')
    run_id = started["run"]["id"]
    assert started["run"]["status"] == "waiting" and started["steps"] == ["write_draft"]
    assert started["pending_request"]["point"] == "review"

    table = cli("runs").stdout
    assert run_id in table and "waiting" in table and "review (console)" in table
    assert [r["id"] for r in cli.json("runs", "--status", "waiting")] == [run_id]
    assert cli.json("runs", "--status", "completed") == []

    shown = cli("show", run_id[:6]).stdout
    assert "About caching (v1)" in shown and "waiting at 'review'" in shown

    fed = cli.json("feedback", run_id, "more depth", "--as", "sue")
    assert fed["decision"]["action"] == "feedback" and fed["steps"] == ["write_draft"]
    assert cli.json("show", run_id)["state"]["notes"] == ["first draft", "feedback from sue: more depth"]

    edited = cli.json("edit", run_id, "--set", "draft=Hand-written draft", "--as", "sue")
    assert edited["run"]["status"] == "completed" and edited["steps"] == ["publish"]
    assert cli.json("show", run_id)["state"]["draft"] == "Hand-written draft"

    history = cli("history", run_id).stdout
    assert "#2 review feedback by operator olga for sue" in history and "#5 publish → end" in history and "◀ head" in history
    hist = cli.json("history", run_id)
    assert [c["seq"] for c in hist["checkpoints"]] == [0, 1, 2, 3, 4, 5]

    rewound = cli.json("rewind", run_id, "--to", "write_draft", "--feedback", "shorter")
    assert rewound["run"]["status"] == "waiting" and rewound["steps"] == ["write_draft"]
    tree = cli("history", run_id).stdout
    assert "fork from #2" in tree and "rewind to #2 by olga" in tree  # the latest time write_draft was next
    said = cli("rewind", run_id, "--to", "1", "--set", "topic=Caching, again").stdout
    assert "✓ rewind recorded for 'Review the draft', forked from checkpoint #1" in said, said  # which checkpoint
    tree = " ".join(cli("history", run_id).stdout.split())  # (the tree wraps long lines)
    assert "rewind to #1 by olga set topic → " in tree, tree  # which fields a rewind's --set changed

    audit = cli.json("audit", run_id)
    assert [e["action"] for e in audit if e["action"].startswith("decision")] == [
        "decision.feedback", "decision.edit", "decision.rewind", "decision.rewind"]
    proxied = [e for e in audit if e["action"] in ("decision.feedback", "decision.edit")]
    assert {(e["actor_id"], e["person"], e["detail"]["acting_for"]) for e in proxied} == {("olga", "sue", "sue")}
    assert "decision.rewind" in cli("audit", run_id).stdout


def test_a_rewind_of_a_run_that_waited_on_no_one_says_where_it_forked_from(cli) -> None:  # noqa: ANN001
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "caching"}')["run"]["id"]
    assert cli.json("approve", run_id)["run"]["status"] == "completed"
    said = cli("rewind", run_id, "--to", "1", "--detach").stdout
    assert "✓ rewind recorded: forked from checkpoint #1" in said, said  # not "for 'checkpoint #1'"


def test_edit_file_reject_and_validation(cli, tmp_path: Path) -> None:  # noqa: ANN001
    run_id = cli.json("run", "budget", "--input", '{"purpose": "laptops"}')["run"]["id"]
    bad = cli("edit", run_id, "--set", "amount=-5", code=1)
    assert bad.exit_code == 1
    assert "invalid edit: amount: Input should be greater than or equal to 0" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert cli.json("show", run_id)["run"]["status"] == "waiting"
    wrong_field = cli("edit", run_id, "--set", "purpose=phones", code=1)
    assert wrong_field.exit_code == 1 and "edit 'amount' only" in wrong_field.stderr
    (tmp_path / "amount.txt").write_text("75\n")
    sys.modules[module_name(SAMPLE)].FAIL["spend"] = 0
    done = cli.json("edit", run_id, "--file", str(tmp_path / "amount.txt"))
    assert done["run"]["status"] == "completed"
    assert cli.json("show", run_id)["state"]["amount"] == 75

    second = cli.json("run", "budget", "--input", '{"purpose": "desks"}')["run"]["id"]
    no_reason = cli("reject", second, "--reason", " ", code=1)
    assert no_reason.exit_code == 1 and "needs a reason" in no_reason.stderr
    rejected = cli.json("reject", second, "--reason", "too much")
    assert rejected["run"]["status"] == "rejected"
    again = cli("approve", second, code=1)
    assert again.exit_code == 1 and "not waiting on a steering request" in again.stderr


def test_failed_run_retry_and_cancel(cli) -> None:  # noqa: ANN001
    cli("workflows")  # loads the module
    module = sys.modules[module_name(SAMPLE)]
    module.FAIL["spend"] = 1
    run_id = cli.json("run", "budget", "--input", '{"purpose": "chairs"}')["run"]["id"]
    result = cli("approve", run_id, "--json", code=1)
    assert result.exit_code == 1, "a run that the command drove into failure exits non-zero"
    failed = json.loads(result.stdout)
    assert failed["run"]["status"] == "failed" and "payment provider down" in failed["run"]["error"]
    assert "Traceback" in cli("show", run_id, "--full").stdout
    again = cli("approve", run_id, code=1)  # a decision on the failed run says what resumes it
    assert "failed, not waiting on a steering request; its last request was 'Approve the budget'; it failed: " \
           "retry it to resume it from its last good checkpoint)" in " ".join(again.stderr.split()), again.stderr
    assert cli("show", run_id, "--raw", "--json", code=2).exit_code == 2
    retried = cli.json("retry", run_id)
    assert retried["run"]["status"] == "completed" and retried["steps"] == ["spend"]

    other = cli.json("run", "budget", "--input", '{"purpose": "lamps"}')["run"]["id"]
    cancelled = cli.json("cancel", other, "--reason", "duplicate")
    assert cancelled["run"]["status"] == "cancelled"
    assert cli("cancel", other, code=1).exit_code == 1


def test_errors_are_one_line_and_json_errors_are_objects(cli) -> None:  # noqa: ANN001
    missing = cli("show", "nosuchrun", code=1)
    assert missing.exit_code == 1 and missing.stderr.strip() == "error: no run 'nosuchrun' (see `hazel runs`)"
    as_json = cli("approve", "nosuchrun", "--json", code=1)
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["error"]["type"] == "RunNotFoundError"
    unknown = cli("run", "nope", code=1)
    assert unknown.exit_code == 1 and "unknown workflow 'nope'" in unknown.stderr
    bad_input = cli("run", "doc-review", "--input", "{not json", code=1)
    assert bad_input.exit_code == 1 and "--input is not valid JSON" in bad_input.stderr
    for constant in ("NaN", "Infinity", "-Infinity"):  # Python's JSON takes them; a state would store null
        nan = cli("run", "doc-review", "--input", f'{{"topic": "t", "n": {constant}}}', code=1)
        assert f"--input is not valid JSON: {constant} is not JSON: a number must be finite" in nan.stderr
    invalid = cli("run", "doc-review", "--input", '{"topic": ""}', code=1)
    assert invalid.exit_code == 1 and "invalid input for doc-review v1: topic" in invalid.stderr
    bad_status = cli("runs", "--status", "sleeping", code=2)
    assert "'sleeping' is not a run status" in bad_status.stderr
    assert cli.json("runs") == []


def test_a_filter_value_no_run_can_have_is_a_usage_error(cli) -> None:  # noqa: ANN001
    """Like Click's own usage errors (``--limit 0``): one line naming the valid values, exit status 2."""
    for argv, words in ((["runs", "--status", "bogus"], ["'bogus' is not a run status", "waiting", "cancelled"]),
                        (["runs", "--status", "waiting", "-s", "sleeping", "--json"], ["'sleeping'"]),
                        (["outbox", "--status", "lost"], ["'lost' is not an outbox status", "pending, sent, dead"]),
                        (["prune", "--older-than", "-1"], ["--older-than", "0 or more days"]),
                        (["prune", "--older-than", "99999999999"], ["(not 99,999,999,999)"]),  # not "1e+11"
                        (["runs", "--limit", "0"], ["--limit"]),
                        (["runs", "--workflow", ""], ["--workflow", "needs a workflow name"]),  # not every run
                        (["runs", "--version", "--workflow", "", "--json"], ["--workflow"])):
        result = cli(*argv, code=2)
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1 and line.startswith("error: Invalid value for '"), (argv, line)
        assert all(w in line for w in words), (argv, line)
        assert result.stdout == "", argv
    # a workflow filter matching nothing is no error (runs of a workflow no longer deployed are listed), but
    # says which filter matched nothing, and that the name is not a registered workflow
    assert cli("runs", "--workflow", "budgte").stdout.split() == (
        "no runs of workflow 'budgte' ('budgte' is not a registered workflow; registered: budget, "
        "doc-review)").split()
    assert cli("runs", "--workflow", "budget", "--status", "failed").stdout.strip() == \
        "no runs of workflow 'budget' with status failed"


def test_quick_commands(cli) -> None:  # noqa: ANN001
    assert {w["name"] for w in cli.json("workflows")} == {"doc-review", "budget"}
    assert cli.json("db", "current")["current"] == cli.json("db", "current")["head"]
    assert cli.json("db", "upgrade")["to"] is not None
    detached = cli.json("run", "doc-review", "--input", '{"topic": "x"}', "--detach")
    assert detached["run"]["status"] == "ready" and detached["steps"] == []
    drained = cli.json("worker", "--until-idle")
    assert drained["drives"] == 1
    assert cli.json("show", detached["run"]["id"])["run"]["status"] == "waiting"
    assert cli.json("runs", "--version") == [
        {"workflow": "doc-review", "version": 1, "status": "waiting", "runs": 1, "deployed": True}]
    cli("cancel", detached["run"]["id"])  # --version counts what --status and --workflow let through
    assert cli.json("runs", "--version", "--status", "cancelled") == [
        {"workflow": "doc-review", "version": 1, "status": "cancelled", "runs": 1, "deployed": True}]
    assert cli.json("runs", "--version", "--workflow", "budget") == []
    assert cli("runs", "--version", "--status", "waiting").stdout.strip() == "no runs with status waiting"
    assert cli.json("outbox")["backlog"].get("pending", 0) == 0
    sent = cli.json("outbox")["backlog"]["sent"]
    assert cli("outbox").stdout.splitlines()[0] == f"backlog: empty (sent {sent:,})"  # sent is not backlog


def test_rewind_to_a_step_sets_over_the_target_state_not_the_head(cli, monkeypatch) -> None:  # noqa: ANN001
    """``--set plan.title=…`` with ``--to STEP`` edits the plan as it was at that step's checkpoint: the fork
    does not carry what later steps added to the head's plan."""
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(Path(__file__).resolve().parents[1] / "workflows" / "plans.py"))
    run_id = cli.json("run", "plan-review", "--input", "{}")["run"]["id"]
    assert cli.json("approve", run_id)["run"]["status"] == "completed"
    assert cli.json("show", run_id)["state"]["plan"] == {"title": "Move the database", "steps": 5, "owner": "bob"}
    rewound = cli.json("rewind", run_id, "--to", "expand", "--set", "plan.title=Move it twice")
    assert rewound["run"]["status"] == "completed" and rewound["steps"] == ["expand"]
    assert cli.json("show", run_id)["state"]["plan"] == {"title": "Move it twice", "steps": 5, "owner": "bob"}


def test_the_retry_notice_says_a_short_backoff_in_milliseconds(capsys) -> None:  # noqa: ANN001
    """A backoff under a second is not rounded to "in 0.0s"; a longer one is in seconds."""
    from datetime import timedelta
    from types import SimpleNamespace

    from bot.cli.runs import retry_notice
    from bot.engine import utcnow

    retry_notice(SimpleNamespace(id="ab12cd34ef56", attempt=1, wake_at=utcnow() + timedelta(milliseconds=90)))
    retry_notice(SimpleNamespace(id="ab12cd34ef56", attempt=2, wake_at=utcnow() + timedelta(seconds=12.04)))
    first, second = capsys.readouterr().err.splitlines()
    assert first.startswith("run ab12cd34ef56: attempt 2 in ") and first.endswith(" ms"), first
    assert 0 < int(first.split(" in ")[1].removesuffix(" ms")) <= 90, first
    assert second in ("run ab12cd34ef56: attempt 3 in 12.0s", "run ab12cd34ef56: attempt 3 in 11.9s"), second


def test_an_error_line_is_cut_at_a_line_break_only() -> None:
    """``str.splitlines`` also breaks at U+2028, NEL, form feeds: an error quoting stored text with one of them lost
    the rest of its line (who decided, when, which run)."""
    from bot.cli.common import _one_line

    from bot.engine import RunStateError

    line = _one_line(RunStateError("already approved by x\u2028y at 12:00 (run r1)\nsecond"))
    assert "already approved by x\u2028y at 12:00 (run r1)" in line and "second" not in line, line
    line = _one_line(ValueError("a\x0cb\x85c\r\nd"))
    assert "a\x0cb\x85c (HAZEL_DEBUG=1 shows where)" in line, line


def test_a_failed_runs_error_line_is_cut_at_a_line_break_only() -> None:
    """The line a command that drove its run into ``failed`` ends with keeps the error's first line whole."""
    from types import SimpleNamespace

    from bot.cli.ended import failed_message

    hazel = SimpleNamespace(audit=lambda run_id: [])
    run = SimpleNamespace(id="r1", error="RuntimeError: boom\u2028quoted\x85text\nTraceback …")
    assert failed_message(hazel, run) == "run r1 failed: RuntimeError: boom\u2028quoted\x85text"


def test_an_empty_workflow_filter_lists_no_run_through_the_engine(db_url) -> None:  # noqa: ANN001
    """``Hazel.runs(workflow="")``: a name no workflow can have lists none (it listed every run)."""
    from store.models import Actor
    from tests.bot.test_api_limits import loose_workflow
    from tests.support.engine import make_hazel

    hazel = make_hazel(db_url, loose_workflow())
    try:
        hazel.start(workflow="loose", input={"data": {"k": "v"}}, actor=Actor(channel="api", id="alice"))
        assert hazel.runs(workflow="") == [] and len(hazel.runs()) == 1
    finally:
        hazel.close()
