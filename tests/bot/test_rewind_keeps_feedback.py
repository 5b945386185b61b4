"""A rewind to a checkpoint that a feedback (or a rejection) routed to a step gives that step the SME's words
again, as ``hazel retry`` from there does; a rewind that brings its own feedback gives its own. Finding 4 of
session 14: the redraft ran with ``ctx.feedback=None`` and looked like the first draft. Native workflows
through the engine and the CLI (the example's ``#6 ↩ rewind to #1 … "shorter" → draft_plan``); on SQLite and
PostgreSQL. (A LangGraph run keeps the words in its graph state: ``tests/langgraph/test_rewind_keeps_feedback``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from bot.cli import app as cli_app
from hazel import StepContext, Workflow
from store.models import REWIND_NODE
from tests.support.engine import make_hazel, person


class F(BaseModel):
    draft: str = ""


def fb() -> Workflow:
    wf = Workflow("fb", version=1, state=F)

    @wf.step
    def write(state: F, ctx: StepContext) -> F:
        return F(draft=f"feedback={ctx.feedback!r} by={ctx.feedback_by!r} rejection={ctx.rejection!r}")

    wf.steer("review", show="draft", on_feedback="write", on_reject="write")

    @wf.step
    def publish(state: F, ctx: StepContext) -> F:
        return state

    return wf


def test_a_rewind_to_a_feedback_checkpoint_gives_the_step_that_feedback(db_url: str) -> None:
    hz = make_hazel(db_url, fb())
    run = hz.start(workflow="fb", input={}, actor=person("sam"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="feedback", actor=person("priya"), payload={"text": "make it about whales"})
    hz.drive(run_id=run.id)
    whales = "feedback='make it about whales' by='priya' rejection=None"
    assert hz.state_at(run_id=run.id).draft == whales
    routed = next(c for c in hz.checkpoints(run_id=run.id) if c.step == "review")  # #2 review feedback → write

    for to in (routed.seq, "write"):  # by number, and by the step (which picks the latest such checkpoint)
        hz.rewind(run_id=run.id, actor=person("sam"), to=to)
        hz.drive(run_id=run.id)
        assert hz.state_at(run_id=run.id).draft == whales, to
    fork = [c for c in hz.checkpoints(run_id=run.id) if c.step == REWIND_NODE]
    assert fork[-1].parent_seq == fork[0].seq  # "write" picked the first fork's checkpoint, which carried it on
    assert [c.handoff for c in fork] == [routed.handoff] * 2

    hz.rewind(run_id=run.id, actor=person("sam"), to=routed.seq, edits={"draft": "x"})  # edits alone: kept
    hz.drive(run_id=run.id)
    assert hz.state_at(run_id=run.id).draft == whales
    hz.rewind(run_id=run.id, actor=person("sam"), to=routed.seq, feedback="sharks instead")  # its own wins
    hz.drive(run_id=run.id)
    assert hz.state_at(run_id=run.id).draft == "feedback='sharks instead' by='sam' rejection=None"

    hz.decide(run_id=run.id, action="reject", actor=person("priya"), payload={"reason": "off topic"})
    hz.drive(run_id=run.id)
    rejected = hz.checkpoints(run_id=run.id)[-2]
    assert rejected.handoff == {"rejection": "off topic", "by": "priya"}
    hz.rewind(run_id=run.id, actor=person("sam"), to=rejected.seq)
    hz.drive(run_id=run.id)
    assert hz.state_at(run_id=run.id).draft == "feedback=None by='priya' rejection='off topic'"
    hz.rewind(run_id=run.id, actor=person("sam"), to=0)  # a checkpoint no decision routed: nothing handed on
    hz.drive(run_id=run.id)
    assert hz.state_at(run_id=run.id).draft == "feedback=None by=None rejection=None"


@pytest.mark.usefixtures("offline_example", "wide_cli")
def test_cli_rewind_to_the_examples_feedback_rewind_redrafts_with_it(db_url: str, tmp_path: Path) -> None:
    """The example: ``#N ↩ rewind to #1 by olga: "shorter" → draft_plan``; a rewind to #N drafts the
    "shorter" revision again (plan_revisions 1), as the first did, not the first draft."""
    runner = CliRunner()
    env = {"HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": "examples.migration_plan", "HAZEL_OPERATOR": "olga",
           "HAZEL_OUTPUT_DIR": str(tmp_path / "out")}

    def hazel(*args: str) -> str:
        result = runner.invoke(cli_app, list(args), env=env)
        assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
        return result.stdout

    run_id = json.loads(hazel("run", "migration-plan", "--input", '{"request": "add index on orders"}',
                              "--json"))["run"]["id"]
    hazel("rewind", run_id, "--to", "1", "--feedback", "shorter")
    history = json.loads(hazel("history", run_id, "--json"))["checkpoints"]
    [mark] = [c["seq"] for c in history if c["step"] == REWIND_NODE]
    first = json.loads(hazel("show", run_id, "--json"))["state"]
    assert first["plan_revisions"] == 1 and "shorter" in first["plan"]
    hazel("rewind", run_id, "--to", str(mark))
    again = json.loads(hazel("show", run_id, "--json"))["state"]
    assert again["plan_revisions"] == 1 and again["plan"] == first["plan"]
