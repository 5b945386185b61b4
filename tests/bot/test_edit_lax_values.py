"""Edits are validated by the state model as pydantic validates it (README, "Empty values"): lax unless the
model says strict. A fresh-user finding took ``--set n=true`` storing ``1`` for an ``int`` field as a defect;
it is pydantic's lax mode, as for a step's own output, and a model that must refuse it declares so."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, StrictInt

from bot.engine.errors import InvalidDecisionError
from bot.engine.workflow import Workflow
from hazel import StepContext
from tests.bot.test_empty_edits import waiting
from tests.support.engine import make_hazel, person


class Lax(BaseModel):
    n: int = 0


class Strict(BaseModel):
    n: StrictInt = 0


class StrictModel(BaseModel):
    model_config = ConfigDict(strict=True)
    n: int = 0


def counting(name: str, state: type[BaseModel]) -> Workflow:
    wf = Workflow(name, version=1, state=state)

    @wf.step
    def count(state: BaseModel, ctx: StepContext) -> BaseModel:
        return state.model_copy(update={"n": 11})

    wf.steer("check", show="n", actions=["approve", "edit"])
    return wf


@pytest.mark.parametrize("text, stored", [("true", 1), ('"5"', 5), ("1e3", 1000)])
def test_a_lax_model_takes_what_pydantic_takes(db_url: str, text: str, stored: int) -> None:
    hazel = make_hazel(db_url, counting("lax", Lax))
    run_id = waiting(hazel, "lax")
    hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={"text": text, "allow_empty": False})
    assert hazel.state_at(run_id=run_id).n == stored


@pytest.mark.parametrize("state", [Strict, StrictModel], ids=["StrictInt", "strict-model"])
@pytest.mark.parametrize("text", ["true", '"5"', "1e3"])
def test_a_strict_model_refuses_them(db_url: str, state: type[BaseModel], text: str) -> None:
    hazel = make_hazel(db_url, counting("strict", state))
    run_id = waiting(hazel, "strict")
    with pytest.raises(InvalidDecisionError, match="^invalid edit: n: Input should be a valid integer"):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={"text": text, "allow_empty": False})
    assert hazel.state_at(run_id=run_id).n == 11 and hazel.decisions(run_id=run_id) == []
