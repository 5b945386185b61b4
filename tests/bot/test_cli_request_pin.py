"""``--request N`` pins the version of a request a CLI user reviewed. ``hazel approve RUN --at POINT`` answered the
point's latest request: after someone's feedback through REST the point asked again (a redraft), and the operator's
``--at`` command approved the new draft, which they never saw. ``--request N`` (the request id, shown by ``hazel
show`` and in the console panel's commands) is refused once that request was settled, with who decided and when
(exit status 1), on every decision command; ``--at`` alone still names the point (its latest request). A negative
``--to`` is a usage error."""

from __future__ import annotations

import re

import pytest

from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from tests.bot.test_api import ALICE, TOKENS, Api
from tests.support.engine import make_hazel
from tests.support.live import LiveServer
from tests.workflows.sample import docs

FEEDBACK_FIRST = [("approve",), ("reject", "--reason", "no"), ("feedback", "again"), ("edit", "--set", "draft=x")]


def _started(cli) -> tuple[str, int]:  # noqa: ANN001
    shown = cli.json("run", "doc-review", "--input", '{"topic": "t"}')
    return shown["run"]["id"], shown["pending_request"]["id"]


def test_the_printed_commands_and_show_name_the_request(cli) -> None:  # noqa: ANN001
    started = cli("run", "doc-review", "--input", '{"topic": "t"}')
    run_id = re.search(r"run ([0-9a-f]{6,})", started.stdout).group(1)
    request_id = cli.json("show", run_id)["pending_request"]["id"]
    assert f"hazel approve {run_id} --at review --request {request_id}\n" in started.stdout, started.stdout
    assert f"hazel feedback {run_id} --at review --request {request_id} 'what to change'" in started.stdout
    assert f"hazel show {run_id} --raw --at review > draft.txt" in started.stdout
    assert f"--request {request_id} [--feedback TEXT]" in started.stdout
    shown = cli("show", run_id)
    assert f"waiting at 'review': Review the draft · console · request {request_id}" in shown.stdout, shown.stdout


@pytest.mark.parametrize("command", FEEDBACK_FIRST, ids=lambda c: c[0])
def test_a_redraft_after_rest_feedback_is_not_answered_by_the_pinned_command(db_url: str, cli, command) -> None:  # noqa: ANN001
    run_id, seen = _started(cli)
    hazel = make_hazel(db_url, docs)
    with LiveServer(create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])) as server:
        api = Api(server.url)
        answer = api.decide(run_id, {"action": "feedback", "payload": {"text": "shorter"}}, token=ALICE)
        assert answer.status_code == 201, answer.text
        api.wait_status(run_id, "waiting")
    redraft = cli.json("show", run_id)
    assert redraft["pending_request"]["id"] != seen and redraft["state"]["drafts"] == 2

    refused = cli(command[0], run_id, *command[1:], "--at", "review", "--request", str(seen), code=1)
    line = refused.stderr.strip()
    now = redraft["pending_request"]["id"]  # where the run waits now, said after who settled the one named
    assert re.fullmatch(r"error: already answered with feedback by alice at \d{4}-\d\d-\d\d \d\d:\d\d UTC; "
                        rf"run {run_id} now waits at 'review' \(request {now}\)", line), refused.output
    after = cli.json("show", run_id)
    assert after["run"]["status"] == "waiting" and after["pending_request"]["id"] == redraft["pending_request"]["id"]
    assert not [d for d in cli.json("history", run_id)["decisions"] if d["actor_id"] == "olga"]

    cli("approve", run_id, "--at", "review", "--request", str(redraft["pending_request"]["id"]))  # the version seen
    assert cli.json("show", run_id)["run"]["status"] == "completed"


def test_at_alone_names_the_point_and_answers_its_latest_request(cli) -> None:  # noqa: ANN001
    run_id, seen = _started(cli)
    cli("feedback", run_id, "--at", "review", "--request", str(seen), "more")
    cli("approve", run_id, "--at", "review")  # the point's latest request: the redraft (documented)
    assert cli.json("show", run_id)["state"]["drafts"] == 2


def test_rewind_with_a_settled_request_is_refused(cli) -> None:  # noqa: ANN001
    run_id, seen = _started(cli)
    cli("feedback", run_id, "--request", str(seen), "more")
    refused = cli("rewind", run_id, "--to", "write_draft", "--request", str(seen), code=1)
    assert refused.stderr.startswith("error: already ") and " by olga at " in refused.stderr, refused.output
    assert cli.json("show", run_id)["state"]["drafts"] == 2


def test_request_must_be_the_runs_and_at_its_point(cli) -> None:  # noqa: ANN001
    run_id, seen = _started(cli)
    other, _ = _started(cli)
    foreign = cli("approve", other, "--request", str(seen), code=1)
    assert foreign.stderr.strip() == f"error: run {other} has no steering request {seen} (see `hazel show {other}`)"
    mismatch = cli("approve", run_id, "--at", "nopoint", "--request", str(seen), code=1)
    assert mismatch.stderr.strip() == f"error: request {seen} of run {run_id} was asked at 'review', not at 'nopoint'"
    assert cli.json("show", run_id)["run"]["status"] == "waiting"


@pytest.mark.parametrize("value", ["0", "-1", "2147483648", "abc", "41_0", "1.0", " 41", "+41"])
def test_request_out_of_range_is_a_usage_error(cli, value: str) -> None:  # noqa: ANN001
    run_id, _ = _started(cli)
    for command in (("approve",), ("feedback", "x"), ("reject", "--reason", "r"), ("rewind", "--to", "0")):
        result = cli(command[0], run_id, *command[1:], "--request", value, code=2)
        assert "--request" in result.output, result.output


@pytest.mark.parametrize("to", ["-5", "#-5", " -1"])
def test_a_negative_rewind_target_is_a_usage_error(cli, to: str) -> None:  # noqa: ANN001
    run_id, _ = _started(cli)
    result = cli("rewind", run_id, f"--to={to}", code=2)
    assert "is out of range: a checkpoint number is 0 or more" in result.output, result.output
    assert cli.json("show", run_id)["run"]["status"] == "waiting"
