"""Routing: the end target ``END`` (from a branch, a reject, a feedback, ``ctx.goto``) and branches (reject /
feedback targets declared after their steering point) that the happy path must never fall into."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from hazel import END, StepContext, Workflow, WorkflowDefinitionError
from bot.engine.registry import Registry
from bot.ops.scheduler import Scheduler
from store.models import RunStatus
from tests.support.clock import FakeClock
from tests.support.engine import make_hazel, person


class Doc(BaseModel):
    text: str = "draft"
    trail: list[str] = Field(default_factory=list)


def visit(name: str, **update):  # noqa: ANN003, ANN201
    """A step that appends its name to the trail (so a test sees exactly which steps ran)."""
    def fn(state: Doc, ctx: StepContext) -> Doc:
        return state.model_copy(update={"trail": [*state.trail, name], **update})
    return fn


def branchy() -> Workflow:
    """draft -> review; approve -> publish (then END); reject -> notify_rejected (then END)."""
    wf = Workflow("branchy", version=1, state=Doc)
    wf.step(visit("draft"), name="draft")
    wf.steer("review", show="text", on_reject="notify_rejected", next="publish")
    wf.step(visit("notify_rejected"), name="notify_rejected", next=END)
    wf.step(visit("publish"), name="publish")
    return wf


def waiting(hazel, workflow: str) -> str:  # noqa: ANN001
    run = hazel.start(workflow=workflow, input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    return run.id


def test_next_end_from_a_branch_completes_the_run(db_url: str) -> None:
    hazel = make_hazel(db_url, branchy())
    run_id = waiting(hazel, "branchy")
    hazel.decide(run_id=run_id, action="reject", actor=person("sme"), payload={"reason": "no"})
    result = hazel.drive(run_id=run_id)
    assert result.steps == ["notify_rejected"] and result.run.status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=run_id).trail == ["draft", "notify_rejected"]  # publish never ran
    assert hazel.checkpoints(run_id=run_id)[-1].next_step is None  # END is never stored as a node


def test_approve_skips_the_reject_branch(db_url: str) -> None:
    hazel = make_hazel(db_url, branchy())
    run_id = waiting(hazel, "branchy")
    hazel.decide(run_id=run_id, action="approve", actor=person("sme"))
    result = hazel.drive(run_id=run_id)
    assert result.steps == ["publish"] and result.run.status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=run_id).trail == ["draft", "publish"]


def test_a_reject_only_step_declared_last_is_refused_at_load() -> None:
    """The reported workflow: the on_reject step declared last ran on the approve path too."""
    wf = Workflow("w", version=1, state=Doc)
    wf.step(visit("draft"), name="draft")
    wf.steer("review", on_reject="notify_rejected")
    wf.step(visit("notify_rejected"), name="notify_rejected")
    with pytest.raises(WorkflowDefinitionError) as info:
        Registry().add(wf)
    message = str(info.value)
    assert "step 'notify_rejected' is the on_reject target of steering point 'review'" in message
    assert "would also run when 'review' is approved" in message and "explicit next=" in message
    assert "next=END" in message


def test_a_branch_fallen_into_from_another_node_is_refused_naming_it() -> None:
    wf = Workflow("w", version=1, state=Doc)
    wf.step(visit("draft"), name="draft")
    wf.steer("review", on_feedback="rework", on_reject="notify", next="publish")
    wf.step(visit("notify"), name="notify")  # falls through into the feedback branch
    wf.step(visit("rework"), name="rework", next="review")
    wf.step(visit("publish"), name="publish")
    with pytest.raises(WorkflowDefinitionError,
                       match="step 'rework' is the on_feedback target of steering point 'review' and would also "
                             "run after step 'notify', declared right before it; give 'notify' an explicit next="):
        wf.validate()
    fixed = Workflow("w", version=1, state=Doc)
    fixed.step(visit("draft"), name="draft")
    fixed.steer("review", on_feedback="rework", on_reject="notify", next="publish")
    fixed.step(visit("notify"), name="notify", next=END)
    fixed.step(visit("rework"), name="rework", next="review")
    fixed.step(visit("publish"), name="publish")
    fixed.validate()


def test_loops_back_are_not_branches() -> None:
    wf = Workflow("w", version=1, state=Doc)
    wf.step(visit("gather"), name="gather")
    wf.step(visit("draft"), name="draft")  # falls through from gather: the main path
    wf.steer("review", on_feedback="draft", on_reject="draft")
    wf.step(visit("publish"), name="publish")
    wf.validate()


def test_end_as_reject_feedback_and_goto(db_url: str) -> None:
    wf = Workflow("ends", version=1, state=Doc)
    wf.step(visit("draft"), name="draft")
    wf.steer("review", on_reject=END, on_feedback=END)
    wf.step(visit("publish"), name="publish")

    def shortcut(state: Doc, ctx: StepContext) -> Doc:
        ctx.goto(END)
        return state.model_copy(update={"trail": [*state.trail, "shortcut"]})

    quick = Workflow("quick", version=1, state=Doc)
    quick.step(shortcut, name="shortcut")
    quick.step(visit("never"), name="never")
    assert wf.point("review").on_reject is None  # on_reject=END is the default: the run ends rejected
    hazel = make_hazel(db_url, wf, quick)

    rejected = waiting(hazel, "ends")
    outcome = hazel.decide(run_id=rejected, action="reject", actor=person("sme"), payload={"reason": "no"})
    assert outcome.run_status is RunStatus.REJECTED
    assert hazel.get(run_id=rejected).status is RunStatus.REJECTED

    fed_back = waiting(hazel, "ends")
    outcome = hazel.decide(run_id=fed_back, action="feedback", actor=person("sme"), payload={"text": "enough"})
    assert outcome.run_status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=fed_back).trail == ["draft"]

    run = hazel.start(workflow="quick", input={}, actor=person("author"))
    result = hazel.drive(run_id=run.id)
    assert result.steps == ["shortcut"] and result.run.status is RunStatus.COMPLETED


def test_end_is_not_a_node_name() -> None:
    wf = Workflow("w", version=1, state=Doc)
    wf.step(visit("x"), name=END)
    with pytest.raises(WorkflowDefinitionError, match="node name '__end__' is not a valid name"):
        wf.validate()


def test_a_timeout_that_rejects_takes_the_reject_branch_and_ends_there(db_url: str) -> None:
    wf = Workflow("timed", version=1, state=Doc)
    wf.step(visit("draft"), name="draft")
    wf.steer("review", on_reject="chase", next=END, timeout_sec=60, on_timeout="reject")
    wf.step(visit("chase"), name="chase", next=END)
    wf.step(visit("never"), name="never")  # reached by nothing: the point and the branch both end the run
    clock = FakeClock()
    hazel = make_hazel(db_url, wf, clock=clock)
    run_id = waiting(hazel, "timed")
    clock.advance(60)
    assert Scheduler(hazel).tick().timeouts
    result = hazel.drive(run_id=run_id)
    assert result.steps == ["chase"] and result.run.status is RunStatus.COMPLETED
    assert hazel.state_at(run_id=run_id).trail == ["draft", "chase"]
