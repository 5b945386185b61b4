"""``hazel approve`` after another person's approval came first: the run is continued (nobody else does), but
the command says who decided and exits 1, as any "already decided" refusal does; only the same person's earlier
approval (a re-run after a crash) stands and exits 0."""

from __future__ import annotations

import json

import pytest

from store.models import Actor, RunStatus


def approved_elsewhere(run_id: str, who: str, action: str = "approve", payload: dict | None = None) -> None:
    """``who`` approves ``run_id`` (or takes ``action``) through the engine without continuing it (a process
    that stopped after)."""
    from bot.server.app import HazelApp

    hazel = HazelApp()
    try:
        outcome = hazel.decide(run_id=run_id, action=action, actor=Actor(id=who, channel="console", name=who,
                                                                         person=who), payload=payload)
        assert outcome.run_status is RunStatus.READY
    finally:
        hazel.close()


@pytest.mark.parametrize("at", [["--at", "review"], []], ids=["at-point", "pending"])
def test_another_persons_approval_that_came_first_exits_1_naming_them(cli, at: list[str]) -> None:  # noqa: ANN001
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "t"}')["run"]["id"]
    approved_elsewhere(run_id, "sme")
    lost = cli("approve", run_id, *at, code=1)  # HAZEL_OPERATOR is olga
    assert "error:" in lost.stderr and "approved by sme" in lost.stderr
    assert "continuing it here" in lost.output  # the run still goes on
    assert cli.json("show", run_id)["run"]["status"] == "completed"


def test_ones_own_earlier_approval_stands(cli) -> None:  # noqa: ANN001
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "t"}')["run"]["id"]
    approved_elsewhere(run_id, "olga")
    again = cli("approve", run_id, "--at", "review")
    assert "approved by olga" in again.stdout and "error:" not in again.output
    assert json.loads(cli("show", run_id, "--json").stdout)["run"]["status"] == "completed"


def test_a_detached_approve_after_another_persons_prints_one_hint(cli) -> None:  # noqa: ANN001
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "t"}')["run"]["id"]
    approved_elsewhere(run_id, "sme")
    lost = cli("approve", run_id, "--at", "review", "--detach", code=1)
    assert "approved by sme" in lost.stderr
    assert lost.stdout == (f"run {run_id} is ready and no process is continuing it: `hazel retry {run_id}` "
                           "continues it here (or start `hazel worker`)\n"), lost.stdout
    assert cli.json("show", run_id)["run"]["status"] == "ready"


def test_ones_own_feedback_with_other_words_is_not_taken(cli) -> None:  # noqa: ANN001
    """A killed ``hazel feedback`` run again with other text: the text recorded first is the one the run
    got; the words typed now were not taken (exit 1, the refusal, and the request the run asks now)."""
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "t"}')["run"]["id"]
    approved_elsewhere(run_id, "olga", "feedback", {"text": "shorter"})
    other = cli("feedback", run_id, "--at", "review", "longer", code=1)
    assert "error: already answered with feedback by olga" in other.stderr, other.output
    assert "continuing it here" in other.output
    pending = cli.json("show", run_id)["pending_request"]
    assert f"your feedback was not taken: run {run_id} now waits at 'review' (request {pending['id']}, " \
           f"'Review the draft'); answer that request if you mean it: `hazel feedback {run_id} --at review " \
           f"--request {pending['id']} …`" in " ".join(other.stderr.split()), other.stderr
    assert cli.json("show", run_id)["state"]["notes"] == ["first draft", "feedback from olga: shorter"]


def test_ones_own_feedback_with_the_same_words_stands(cli) -> None:  # noqa: ANN001
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "t"}')["run"]["id"]
    approved_elsewhere(run_id, "olga", "feedback", {"text": "shorter"})
    again = cli("feedback", run_id, "--at", "review", " shorter ")
    assert "already answered with feedback by olga" in again.stdout and "error:" not in again.output
    assert "not taken" not in again.output


@pytest.mark.parametrize(("workflow", "point", "first", "again", "field"), [
    ("doc-review", "review", {"text": "AAA"}, "draft=BBB", "draft"),  # a text field
    ("budget", "approve_budget", {"value": 70}, "amount=80", "amount"),  # a number, typed as JSON
])
def test_ones_own_edit_with_another_value_is_not_taken(cli, workflow: str, point: str, first: dict, again: str,  # noqa: ANN001
                                                       field: str) -> None:
    """A stranded run's edit sent again with another value: the value recorded first is the one the run got;
    the one typed now was not taken (exit 1; a fresh-user finding: it exited 0 and said nothing of it)."""
    inputs = {"doc-review": {"topic": "t"}, "budget": {"purpose": "p"}}[workflow]
    run_id = cli.json("run", workflow, "--input", json.dumps(inputs))["run"]["id"]
    approved_elsewhere(run_id, "olga", "edit", first)
    other = cli("edit", run_id, "--at", point, "--set", again, code=1)
    assert "error: already edited by olga" in other.stderr, other.output
    recorded = first.get("text", first.get("value"))
    assert cli.json("show", run_id)["state"][field] == recorded
    same = "{}={}".format(field, recorded)
    rerun = cli.json("run", workflow, "--input", json.dumps(inputs))["run"]["id"]
    approved_elsewhere(rerun, "olga", "edit", first)
    stands = cli("edit", rerun, "--at", point, "--set", same)  # the same value: it stands (exit 0)
    assert "already edited by olga" in stands.stdout and "error:" not in stands.output


def test_ones_own_rewind_to_another_checkpoint_is_not_taken(cli) -> None:  # noqa: ANN001
    """A stranded run's rewind of a request sent again to another checkpoint (or with other edits): the first
    one is the one the run got; this one was not taken (exit 1; it exited 0 when the feedback matched)."""
    run_id = cli.json("run", "doc-review", "--input", '{"topic": "t"}')["run"]["id"]
    request = cli.json("show", run_id)["pending_request"]["id"]
    cli("rewind", run_id, "--to", "0", "--request", str(request), "--detach")  # recorded; nothing continues it
    other = cli("rewind", run_id, "--to", "1", "--request", str(request), "--detach", code=1)
    assert "error: already rewound by olga" in other.stderr, other.output
    edited = cli("rewind", run_id, "--to", "0", "--request", str(request), "--set", "topic=zzz", "--detach",
                 code=1)
    assert "error: already rewound by olga" in edited.stderr, edited.output
    same = cli("rewind", run_id, "--to", "0", "--request", str(request), "--detach")  # the same one: it stands
    assert "already rewound by olga" in same.stdout and "error:" not in same.output
