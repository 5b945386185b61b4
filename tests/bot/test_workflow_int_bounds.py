"""The numbers a workflow definition gives that the database stores in integer columns (its version, a step's
``max_attempts``, a steering point's ``approvals_required``) are refused when the workflow is defined if they
do not fit PostgreSQL's ``integer`` (1..2,147,483,647), natively and through LangGraph's ``register`` and
``steer``. A date-stamped version (202612061530) used to pass ``Workflow(...)``, ``hazel workflows`` and a run
on SQLite, and then fail every start on PostgreSQL ("integer out of range"; REST: 500). The largest number
that is taken works on both databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from bot.engine.errors import WorkflowDefinitionError
from bot.engine.registry import Registry
from hazel import StepContext, Workflow
from store.models import DB_INT_MAX, RunStatus
from tests.support.engine import make_hazel, person

BOUND = "from 1 to 2,147,483,647 (what the database's integer columns hold)"


class S(BaseModel):
    plan: str = ""


def _draft(state: S, ctx: StepContext) -> S:
    return state.model_copy(update={"plan": "p"})


@pytest.mark.parametrize("version", [202612061530, DB_INT_MAX + 1, 0, -1, True, "3", 2.0])
def test_a_version_the_database_cannot_hold_is_refused_when_the_workflow_is_defined(version: object) -> None:
    with pytest.raises(WorkflowDefinitionError) as refused:
        Workflow("dated", version=version, state=S)  # type: ignore[arg-type]
    assert str(refused.value) == f"workflow 'dated': version must be a whole number {BOUND}, not {version!r}"


@pytest.mark.parametrize(("build", "said"), [
    (lambda wf: wf.step(_draft, name="x", max_attempts=DB_INT_MAX + 1),
     f"step 'x': max_attempts must be at most 2,147,483,647 (what the database's integer columns hold), "
     f"not {DB_INT_MAX + 1}"),
    (lambda wf: wf.steer("review", approvals_required=2**40),
     f"steering point 'review': approvals_required must be at most 2,147,483,647 (what the database's integer "
     f"columns hold), not {2**40}"),
])
def test_a_count_the_database_cannot_hold_is_refused_when_the_workflow_loads(build, said: str) -> None:  # noqa: ANN001
    wf = Workflow("w", version=1, state=S)
    wf.step(_draft, name="draft")
    build(wf)
    with pytest.raises(WorkflowDefinitionError) as refused:
        Registry().add(wf)
    assert str(refused.value) == f"workflow w v1 is invalid: {said}"


def test_hazel_workflows_refuses_a_date_stamped_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The finding's module: ``hazel workflows`` listed it (``dated v202612061530``); now one error line."""
    from bot.cli import app

    flows = tmp_path / "big.py"
    flows.write_text("from pydantic import BaseModel\nfrom hazel import Workflow\n"
                     "class S(BaseModel):\n    plan: str = ''\n"
                     "wf = Workflow('dated', version=202612061530, state=S)\n"
                     "@wf.step\ndef draft(state, ctx): return {'plan': 'p'}\n"
                     "wf.steer('review', show='plan')\n")
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(flows))
    monkeypatch.setenv("HAZEL_DATABASE_URL", f"sqlite:///{tmp_path / 'unused.db'}")
    result = CliRunner().invoke(app, ["workflows"])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == (f"error: workflow 'dated': version must be a whole number {BOUND}, "
                                     "not 202612061530")


def test_the_largest_numbers_taken_work_on_the_database(db_url: str) -> None:
    """Version, ``max_attempts`` and ``approvals_required`` at 2,147,483,647: a run starts, its step runs and
    it waits at the point (PostgreSQL's integer columns hold them)."""
    wf = Workflow("edge", version=DB_INT_MAX, state=S)
    wf.step(_draft, name="draft", max_attempts=DB_INT_MAX)
    wf.steer("review", show="plan", approvals_required=DB_INT_MAX)  # (anyone may approve: no quorum check)
    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="edge", input={}, actor=person("olga"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    assert hazel.get(run_id=run.id).workflow_version == DB_INT_MAX
    assert hazel.pending_request(run_id=run.id).approvals_required == DB_INT_MAX


def test_langgraph_register_and_steer_refuse_them_too() -> None:
    from tests.langgraph.graphs import review_graph, workflow
    from hazel.langgraph import steer

    with pytest.raises(WorkflowDefinitionError) as refused:
        workflow(review_graph(), name="lg-dated", version=202612061530)
    assert str(refused.value) == f"workflow 'lg-dated': version must be a whole number {BOUND}, not 202612061530"
    with pytest.raises(WorkflowDefinitionError, match="max_attempts must be at most 2,147,483,647"):
        Registry().add(workflow(review_graph(), name="lg-tries", max_attempts=DB_INT_MAX + 1))
    with pytest.raises(WorkflowDefinitionError, match="approvals_required must be at most 2,147,483,647"):
        workflow(review_graph(), name="lg-quorum", approvals_required=DB_INT_MAX + 1)
    with pytest.raises(WorkflowDefinitionError,
                       match="steering point 'steer': approvals_required must be at most 2,147,483,647"):
        steer(approvals_required=DB_INT_MAX + 1)
