"""NaN and ±Infinity are not JSON (RFC 8259), but Python's parser takes them, so a REST body could carry them
into a run's input, an edit or a rewind's edits (the CLI refused them at its parser): the state stored them,
``hazel show`` printed ``NaN`` where the REST API answered ``null``. The engine refuses them wherever a person
gives a state (``bot.engine.limits.state_tree``), so every channel does, and nothing is recorded."""

from __future__ import annotations

import math

import pytest
from pydantic import BaseModel

from bot.engine.errors import InvalidDecisionError, InvalidInputError
from hazel import StepContext, Workflow
from tests.support.engine import make_hazel, person


class Reading(BaseModel):
    value: float = 1.0


def _workflow() -> Workflow:
    wf = Workflow("reading", version=1, state=Reading)

    @wf.step
    def measure(state: Reading, ctx: StepContext) -> Reading:
        return state

    wf.steer("check", title="Check the reading", show="value", actions=["approve", "edit", "rewind"])

    @wf.step
    def record(state: Reading, ctx: StepContext) -> Reading:
        return state

    return wf


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_number_that_is_not_finite_is_refused_and_nothing_recorded(db_url: str, bad: float) -> None:
    hazel = make_hazel(db_url, _workflow())
    with pytest.raises(InvalidInputError, match="not finite"):
        hazel.start(workflow="reading", input={"value": bad}, actor=person("ana"))
    assert hazel.runs() == []

    run = hazel.start(workflow="reading", input={"value": 2.5}, actor=person("ana"))
    hazel.drive(run_id=run.id)
    before = (hazel.get(run_id=run.id), hazel.checkpoints(run_id=run.id))
    with pytest.raises(InvalidDecisionError, match="the edit holds a number that is not finite"):
        hazel.decide(run_id=run.id, action="edit", actor=person("ana"), payload={"value": bad})
    with pytest.raises(InvalidDecisionError, match="not finite"):
        hazel.decide(run_id=run.id, action="rewind", actor=person("ana"),
                     payload={"to": 0, "edits": {"value": bad}})
    assert (hazel.get(run_id=run.id), hazel.checkpoints(run_id=run.id)) == before
    assert hazel.decisions(run_id=run.id) == []
    assert hazel.state_at(run_id=run.id).value == 2.5
