"""An edit of a model inside the state (a shown ``cfg: Cfg``, a whole-state point's ``cfg``) follows a dotted
path into it (``--set cfg.leaf.a=7``, ``cfg.maybe.a=3`` making ``maybe``), and a key no model there declares is
refused, on an edit and a rewind, from the CLI and the engine (a fresh-user finding, s33 F1 HIGH: ``leaf.a`` was
taken as a key of ``cfg``, a typo ``cfg.limt`` and a REST edit's extra key were dropped by pydantic without a
word, and the edit was recorded as made while the run went on with the old value; F8: ``--set cfg.limit=9`` at a
whole-state point was refused); SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest
from pydantic import BaseModel

from bot.engine import InvalidDecisionError
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person

WORKFLOWS = '''
from typing import Optional
from pydantic import BaseModel, ConfigDict, Field
from hazel import Workflow

class Leaf(BaseModel):
    a: int = 0
    b: str = "x"

class Cfg(BaseModel):
    name: str = "c"
    limit: int = 5
    leaf: Leaf = Leaf()
    maybe: Optional[Leaf] = None
    leaves: dict[str, Leaf] = {}

class Named(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    full_name: str = Field("fn", alias="fullName")
    inner: Leaf = Field(default_factory=Leaf, alias="innerLeaf")

class S(BaseModel):
    cfg: Cfg = Cfg()
    n: int = 0
    opt: Optional[Cfg] = None
    named: Named = Named()

shown = Workflow("shown", version=1, state=S)

@shown.step
def make(state, ctx):
    return {"cfg": Cfg(leaves={"k": Leaf(a=1, b="custom")}, leaf=Leaf(a=5, b="custom"), limit=7)}

shown.steer("check", show="cfg", actions=["approve", "edit", "rewind"])
shown.steer("names", show="named", actions=["approve", "edit", "rewind"])

whole = Workflow("whole", version=1, state=S)
whole.step(make, name="make")
whole.steer("check", show=None, actions=["approve", "edit", "rewind"])
'''


@pytest.fixture
def cli(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    (tmp_path / "nested.py").write_text(WORKFLOWS)
    return in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=str(tmp_path / "nested.py"))


def _run(cli, name: str = "shown") -> str:  # noqa: ANN001
    return json.loads(cli("run", name, "--json").stdout)["run"]["id"]


def _cfg(cli, run_id: str) -> dict:  # noqa: ANN001
    return json.loads(cli("show", run_id, "--json").stdout)["state"]["cfg"]


@pytest.mark.parametrize(("pair", "changed"), [
    ("cfg.limit=9", {"limit": 9}),
    ("cfg.leaf.a=7", {"leaf": {"a": 7, "b": "custom"}}),
    ("cfg.maybe.a=3", {"maybe": {"a": 3, "b": "x"}}),  # (None: made)
    ("cfg.leaves.k={\"a\": 9, \"b\": \"y\"}", {"leaves": {"k": {"a": 9, "b": "y"}}}),
])
def test_a_dotted_path_into_a_shown_model_is_followed(cli, pair: str, changed: dict) -> None:  # noqa: ANN001
    run_id = _run(cli)
    before = _cfg(cli, run_id)
    cli("edit", run_id, "--set", pair)
    assert _cfg(cli, run_id) == {**before, **changed}


@pytest.mark.parametrize(("pair", "said"), [
    ("cfg.limt=9", "no field cfg.limt (Cfg's fields: name, limit, leaf, maybe, leaves)"),
    ("cfg.leaf.zz=1", "no field cfg.leaf.zz (Leaf's fields: a, b)"),
    ("cfg.maybe.c=3", "no field cfg.maybe.c (Leaf's fields: a, b)"),
    ('cfg={"name": "c", "limit": 5, "leaf": {"a": 0}, "maybe": null, "leaves": {}, "limt": 9}',
     "no field cfg.limt (Cfg's fields"),
    ('cfg.leaves.k={"a": 1, "typo": 2}', "no field cfg.leaves.k.typo (Leaf's fields: a, b)"),
])
def test_a_key_no_model_declares_is_refused_and_nothing_is_recorded(cli, pair: str, said: str) -> None:  # noqa: ANN001
    run_id = _run(cli)
    before = _cfg(cli, run_id)
    refused = cli("edit", run_id, "--set", pair, code=1)
    assert f"invalid edit: {said}" in refused.stderr, refused.stderr
    assert _cfg(cli, run_id) == before
    assert [d["action"] for d in json.loads(cli("history", run_id, "--json").stdout).get("decisions", [])] == []


def test_a_rewind_follows_the_path_and_refuses_an_undeclared_key(cli) -> None:  # noqa: ANN001
    run_id = _run(cli)
    cli("rewind", run_id, "--to", "check", "--set", "cfg.maybe.a=5")
    assert _cfg(cli, run_id)["maybe"] == {"a": 5, "b": "x"}
    refused = cli("rewind", run_id, "--to", "check", "--set", "cfg.leaf.typo=5", code=1)
    assert "invalid edit: no field cfg.leaf.typo (Leaf's fields: a, b)" in refused.stderr, refused.stderr


def test_a_whole_state_point_takes_a_path_into_a_field(cli) -> None:  # noqa: ANN001
    run_id = _run(cli, "whole")
    cli("edit", run_id, "--set", "cfg.name=x", "--set", "n=3")
    state = json.loads(cli("show", run_id, "--json").stdout)["state"]
    assert state["cfg"]["name"] == "x" and state["cfg"]["leaves"] == {"k": {"a": 1, "b": "custom"}} and state["n"] == 3
    refused = cli("edit", _run(cli, "whole"), "--set", "cfg.nme=x", code=1)
    assert "invalid edit: no field cfg.nme (Cfg's fields: name, limit, leaf, maybe, leaves)" in refused.stderr


def test_the_engine_refuses_an_undeclared_key_from_any_channel(db_url: str) -> None:
    """A REST edit (``{"value": …}``) and a rewind's edits with a key the model does not declare."""

    class Leaf(BaseModel):
        a: int = 0

    class Cfg(BaseModel):
        limit: int = 5
        maybe: Optional[Leaf] = None

    class S(BaseModel):
        cfg: Cfg = Cfg()

    from hazel import Workflow

    wf = Workflow("engine-nested", version=1, state=S)
    wf.steer("check", show="cfg", actions=["approve", "edit", "rewind"])
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="engine-nested", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    with pytest.raises(InvalidDecisionError, match=r"no field cfg\.limt \(Cfg's fields: limit, maybe\)"):
        hz.decide(run_id=run.id, action="edit", actor=person("olga"), payload={"value": {"limit": 5, "limt": 9}})
    with pytest.raises(InvalidDecisionError, match=r"no field cfg\.maybe\.typo \(Leaf's fields: a\)"):
        hz.rewind(run_id=run.id, actor=person("olga"), to=0, edits={"cfg": {"limit": 5, "maybe": {"typo": 2}}})
    assert hz.decisions(run_id=run.id) == [] and hz.get(run_id=run.id).status.value == "waiting"


def test_a_rewinds_edits_leaving_out_fields_of_a_model_are_refused(cli) -> None:  # noqa: ANN001
    """s34 F1 (HIGH): ``hazel rewind --set 'cfg.leaf={"a": 1}'`` (and a REST rewind's ``edits``) reset ``b`` and
    ``limit`` to their defaults, unseen, where the same value as an edit was refused."""
    run_id = _run(cli)
    before = _cfg(cli, run_id)
    for pair, said in (('cfg.leaf={"a": 1}', "field 'b' of 'cfg.leaf'"),
                       ('cfg={"name": "zz"}', "fields 'limit' of 'cfg', 'leaf' of 'cfg', 'leaves' of 'cfg'")):
        refused = " ".join(cli("rewind", run_id, "--to", "check", "--set", pair, code=1).stderr.split())
        assert f"the edit leaves out {said}" in refused and "add --allow-empty" in refused, refused
    assert _cfg(cli, run_id) == before
    cli("rewind", run_id, "--to", "check", "--set", 'cfg.leaf={"a": 1}', "--allow-empty")  # (meant: taken)
    assert _cfg(cli, run_id)["leaf"] == {"a": 1, "b": "x"}


@pytest.mark.parametrize(("pair", "said"), [
    ('cfg.leaves.k={"a": 2}', "field 'b' of 'cfg.leaves.k'"),  # (s34 F4: a mapping's entry given again)
])
def test_fields_left_out_of_a_model_inside_a_mapping_are_refused(cli, pair: str, said: str) -> None:  # noqa: ANN001
    run_id = _run(cli)
    refused = " ".join(cli("edit", run_id, "--set", pair, code=1).stderr.split())
    assert f"the edit leaves out {said}" in refused, refused


def test_a_model_given_by_its_aliases_leaves_nothing_out(cli) -> None:  # noqa: ANN001
    """s34 F3: ``{"fullName": …, "innerLeaf": …}`` was refused as leaving out ``full_name`` and ``inner``."""
    run_id = _run(cli)
    cli("approve", run_id, "--at", "check")
    cli("edit", run_id, "--at", "names", "--set", 'named={"fullName": "X", "innerLeaf": {"a": 1, "b": "y"}}')
    state = json.loads(cli("show", run_id, "--json").stdout)["state"]
    assert state["named"] == {"full_name": "X", "inner": {"a": 1, "b": "y"}}


def test_a_rewind_makes_a_null_model_by_a_dotted_path_and_a_typo_is_named(cli) -> None:  # noqa: ANN001
    """s34 F2: ``hazel rewind --set opt.limit=4`` on a null ``Optional[Cfg]`` was "opt is not a mapping"; F5: a
    typo given a text value at a whole-state point was "must be given as JSON here"."""
    run_id = _run(cli, "whole")
    cli("rewind", run_id, "--to", "check", "--set", "opt.limit=4")
    assert json.loads(cli("show", run_id, "--json").stdout)["state"]["opt"]["limit"] == 4
    refused = cli("edit", run_id, "--set", "nn=hello", code=1).stderr
    assert "invalid edit: S has no field nn (fields: cfg, n, opt, named)" in refused, refused


def test_a_text_field_of_a_null_model_takes_text(cli) -> None:  # noqa: ANN001
    """s35 F1: ``--set cfg.maybe.b=Q`` (``maybe`` null, ``b`` a text field) was "must be given as JSON here"."""
    run_id = _run(cli)
    cli("edit", run_id, "--set", "cfg.maybe.b=Q")
    assert _cfg(cli, run_id)["maybe"] == {"a": 0, "b": "Q"}


def test_a_whole_state_edit_may_name_a_field_by_its_alias(db_url: str) -> None:
    """s35 F3: a top-level field given by its alias was "S2 has no field topAl" in a whole-state edit."""
    from pydantic import ConfigDict, Field

    from hazel import Workflow

    class S2(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        top: str = Field("t", alias="topAl")
        n: int = 0

    wf = Workflow("aliased-top", version=1, state=S2)
    wf.steer("check", show=None, actions=["approve", "edit"])
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="aliased-top", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="edit", actor=person("olga"), payload={"value": {"topAl": "X", "n": 2}})
    hz.drive(run_id=run.id)
    assert hz.state_at(run_id=run.id).top == "X"


def test_an_edit_follows_a_path_into_a_mappings_model_as_a_rewind_does(cli) -> None:  # noqa: ANN001
    """s35 F2: ``hazel edit --set cfg.leaves.k.a=9`` was refused where ``hazel rewind --set`` took it."""
    run_id = _run(cli)
    cli("edit", run_id, "--set", "cfg.leaves.k.a=9")
    assert _cfg(cli, run_id)["leaves"] == {"k": {"a": 9, "b": "custom"}}
