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
