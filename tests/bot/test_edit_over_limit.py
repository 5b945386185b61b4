"""A step may write a state larger than ``HAZEL_MAX_STATE_BYTES`` (the limit is on what people give); an edit
of that state, however small, cannot be stored. The refusal said "the edited state is 2,000,050 bytes", as if
the reviewer's edit were the cause; it now says the state was that large already and how to go on (rewind to
an earlier, smaller checkpoint, or raise the limit). Nothing is recorded."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from bot.engine.errors import InvalidDecisionError
from hazel import StepContext, Workflow
from tests.support.engine import make_hazel, person

LIMIT = 2_000


class Notes(BaseModel):
    title: str = "t"
    notes: list[str] = []


def _workflow() -> Workflow:
    wf = Workflow("notes", version=1, state=Notes)

    @wf.step
    def grow(state: Notes, ctx: StepContext) -> Notes:
        return state.model_copy(update={"notes": [*state.notes, "n" * 3 * LIMIT]})  # over the limit

    wf.steer("check", title="Check", show="title", actions=["approve", "edit", "rewind"])

    @wf.step
    def done(state: Notes, ctx: StepContext) -> Notes:
        return state

    return wf


def test_an_edit_of_a_state_already_over_the_limit_says_so(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_MAX_STATE_BYTES", str(LIMIT))
    hazel = make_hazel(db_url, _workflow())
    run = hazel.start(workflow="notes", input={}, actor=person("ana"))
    hazel.drive(run_id=run.id)
    with pytest.raises(InvalidDecisionError) as edit:
        hazel.decide(run_id=run.id, action="edit", actor=person("ana"), payload={"value": "u"})
    with pytest.raises(InvalidDecisionError) as rewind:
        hazel.decide(run_id=run.id, action="rewind", actor=person("ana"), payload={"to": 1, "edits": {"title": "u"}})
    for refused in (edit.value, rewind.value):
        message = str(refused)
        assert message.startswith("the edited state is ") and f"the limit is {LIMIT:,}" in message
        assert "the state it edits was already" in message and "rewind to an earlier, smaller checkpoint" in message
        assert "nnnn" not in message
    assert hazel.decisions(run_id=run.id) == []
    # the way out it names: the checkpoint before the step that grew the state takes the edit
    hazel.decide(run_id=run.id, action="rewind", actor=person("ana"), payload={"to": 0, "edits": {"title": "u"}})
    assert hazel.state_at(run_id=run.id, seq=hazel.get(run_id=run.id).head_seq).title == "u"


def test_an_edit_that_makes_the_state_too_large_is_told_only_that(db_url: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAZEL_MAX_STATE_BYTES", str(LIMIT))
    hazel = make_hazel(db_url, _workflow())
    run = hazel.start(workflow="notes", input={}, actor=person("ana"))
    with pytest.raises(InvalidDecisionError) as rewind:
        hazel.decide(run_id=run.id, action="rewind", actor=person("ana"),
                     payload={"to": 0, "edits": {"title": "x" * 2 * LIMIT}})
    assert "was already" not in str(rewind.value) and f"the limit is {LIMIT:,}" in str(rewind.value)
