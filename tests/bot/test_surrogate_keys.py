"""A lone surrogate in a mapping's KEY (an edit's value or entries, a rewind's edits, a run's input) is refused
as one in a value is, on every database, and nothing is written. A fresh-user finding: on SQLite the key was
stored changed (pydantic's JSON dump writes it as U+FFFD) and the REST API then answered 500 for a decision it
had committed; on PostgreSQL the database refused it (500, and the CLI blamed the database)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from bot.engine.errors import InvalidDecisionError, InvalidInputError
from hazel import Workflow
from store.models import RequestStatus
from tests.support.engine import make_hazel, person


class S(BaseModel):
    limits: dict[str, int] | None = None


def _flow() -> Workflow:
    wf = Workflow("keys", version=1, state=S)
    wf.steer("sign", show="limits", actions=["approve", "edit", "rewind"])
    return wf


@pytest.mark.parametrize("payload", [{"value": {"\ud800": 1}}, {"value": {"ok": 1, "\udc00\ud800": 2}},
                                     {"entries": {"\udcff": "1"}}])
def test_an_edit_whose_key_is_not_unicode_is_refused_and_writes_nothing(db_url: str, payload: dict) -> None:
    hz = make_hazel(db_url, _flow())
    run = hz.start(workflow="keys", input={"limits": {"ok": 1}}, actor=person("olga"))
    hz.drive(run_id=run.id)
    before = [c.seq for c in hz.checkpoints(run_id=run.id)]
    with pytest.raises(InvalidDecisionError, match="holds a character that is not Unicode text"):
        hz.decide(run_id=run.id, action="edit", actor=person("ana"), payload=payload)
    assert [c.seq for c in hz.checkpoints(run_id=run.id)] == before
    assert hz.pending_request(run_id=run.id).status is RequestStatus.PENDING
    with pytest.raises(InvalidDecisionError, match="holds a character that is not Unicode text"):
        hz.rewind(run_id=run.id, actor=person("ana"), to=0, edits={"limits": {"\ud800": 3}})
    assert [c.seq for c in hz.checkpoints(run_id=run.id)] == before
    assert hz.state_tree_at(run_id=run.id)["limits"] == {"ok": 1}


def test_an_input_whose_key_is_not_unicode_is_refused(db_url: str) -> None:
    hz = make_hazel(db_url, _flow())
    with pytest.raises(InvalidInputError, match="^the input of keys v1 holds a character that is not Unicode text"):
        hz.start(workflow="keys", input={"limits": {"\ud800": 1}}, actor=person("olga"))
    assert hz.runs() == []
