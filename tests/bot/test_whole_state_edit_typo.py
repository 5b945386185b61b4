"""At a steering point that shows the whole state (``show=None``), an edit naming a field the state model does
not declare is refused, on every channel, and the request stays pending (s25 F10: pydantic dropped the key, so
``hazel edit R --set N=5``, a typo for ``n``, was recorded as an edit that changed nothing and approved the
state as it was; a whole-state JSON edit with the typo also reset ``n`` to its default)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from bot.engine import InvalidDecisionError
from hazel import StepContext, Workflow
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person


class S(BaseModel):
    text: str = ""
    n: int = 0
    notes: list[str] = Field(default_factory=list)


def _draft(state: S, ctx: StepContext) -> S:
    return state.model_copy(update={"text": "draft " + state.text, "n": 1})


whole = Workflow("whole", version=1, state=S)
whole.step(_draft, name="draft")
whole.steer("review", show=None, actions=["approve", "edit"])


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    text: str = ""


roomy = Workflow("roomy", version=1, state=Open)
roomy.steer("review", show=None, actions=["approve", "edit"])

REFUSED = "invalid edit: S has no field N (fields: text, n, notes)"


def _waiting(hz, name: str = "whole") -> str:  # noqa: ANN001
    run = hz.start(workflow=name, input={"text": "w"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    return run.id


@pytest.mark.parametrize("payload", [
    {"value": {"text": "draft w", "n": 1, "notes": [], "N": 5}},
    {"value": {"text": "typo", "N": 5, "notes": ["k"]}},
    {"text": json.dumps({"text": "typo", "N": 5, "notes": ["k"]})},
    {"entries": {"N": "5"}},
], ids=["value", "value-missing-n", "text", "entries"])
def test_an_undeclared_field_is_refused_and_the_request_stays(db_url: str, payload: dict) -> None:
    hz = make_hazel(db_url, whole)
    run_id = _waiting(hz)
    before = hz.state_tree_at(run_id=run_id)
    with pytest.raises(InvalidDecisionError) as refused:
        hz.decide(run_id=run_id, action="edit", actor=person("ana"), payload=payload)
    assert str(refused.value) == REFUSED
    assert hz.state_tree_at(run_id=run_id) == before == {"text": "draft w", "n": 1, "notes": []}
    assert hz.decisions(run_id=run_id) == []
    hz.decide(run_id=run_id, action="edit", actor=person("ana"), payload={"value": {**before, "n": 5}})
    assert hz.state_tree_at(run_id=run_id)["n"] == 5


def test_a_model_that_takes_extra_keys_keeps_them(db_url: str) -> None:
    hz = make_hazel(db_url, roomy)
    run_id = _waiting(hz, "roomy")
    hz.decide(run_id=run_id, action="edit", actor=person("ana"), payload={"value": {"text": "x", "extra": 2}})
    assert hz.state_tree_at(run_id=run_id) == {"text": "x", "extra": 2}


def test_the_cli_set_of_a_typo_is_refused(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=__file__)
    run_id = json.loads(hazel("run", "whole", "--input", '{"text": "w"}', "--json").stdout)["run"]["id"]
    refused = hazel("edit", run_id, "--set", "N=5", code=1)
    assert refused.stderr == f"error: {REFUSED}\n", refused.stderr
    shown = json.loads(hazel("show", run_id, "--json").stdout)
    assert shown["run"]["status"] == "waiting" and shown["state"]["n"] == 1


@pytest.mark.parametrize("payload", [{"value": {"text": "only the text"}},
                                     {"text": json.dumps({"text": "only the text"})}], ids=["value", "text"])
def test_a_whole_state_edit_that_leaves_out_fields_holding_values_is_refused(db_url: str, payload: dict) -> None:
    """A fresh-user finding (s30 F3): ``{"value": {"topic": "x"}}`` at a whole-state point reset every field it
    left out to its default (the draft, the counters, the lists), while the same fields given blank were
    refused. Left out, a field keeping its value anyway (``notes`` at its default) is not named; with
    ``allow_empty`` the reset is what the person means."""
    hz = make_hazel(db_url, whole)
    run_id = _waiting(hz)
    before = hz.state_tree_at(run_id=run_id)
    with pytest.raises(InvalidDecisionError) as refused:
        hz.decide(run_id=run_id, action="edit", actor=person("ana"), payload=payload)
    assert str(refused.value).startswith("the edit leaves out field 'n': a whole-state edit gives every field, "
                                         "and it would go back to its default"), str(refused.value)
    assert hz.state_tree_at(run_id=run_id) == before and hz.decisions(run_id=run_id) == []
    hz.decide(run_id=run_id, action="edit", actor=person("ana"), payload={**payload, "allow_empty": True})
    assert hz.state_tree_at(run_id=run_id) == {"text": "only the text", "n": 0, "notes": []}


def test_the_cli_file_edit_leaving_out_fields_is_refused(db_url: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=__file__)
    run_id = json.loads(hazel("run", "whole", "--input", '{"text": "w"}', "--json").stdout)["run"]["id"]
    (tmp_path / "part.json").write_text('{"text": "only the text", "notes": ["k"]}')
    refused = hazel("edit", run_id, "--file", str(tmp_path / "part.json"), code=1)
    assert refused.stderr == ("error: the edit leaves out field 'n': a whole-state edit gives every field, and it "
                              "would go back to its default; add --allow-empty if that is what you mean\n"), \
        refused.stderr
    assert json.loads(hazel("show", run_id, "--json").stdout)["state"]["n"] == 1


def test_the_printed_edit_commands_of_a_whole_state_point_work(db_url: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh-user finding (s30 F1): the request panel printed ``hazel edit R --at review --request N --set
    state=JSON (or --set state.KEY=@file)``, both refused (``S has no field state``, ``set state=JSON``)."""
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=__file__)
    printed = hazel("run", "whole", "--input", '{"text": "w"}').stdout
    lines = [" ".join(line.split()) for line in printed.splitlines()]
    [show] = [line for line in lines if " show " in line and "--raw" in line]
    [edit] = [line for line in lines if " edit " in line]
    run_id = show.split()[2]
    assert show == f"hazel show {run_id} --raw --at review > state.json # change it, then:", show
    assert edit.startswith(f"hazel edit {run_id} --at review --request ") and edit.endswith(
        " --file state.json (or --set FIELD=VALUE, field by field)"), edit
    state = json.loads(hazel(*show.split()[1:6]).stdout)
    (tmp_path / "state.json").write_text(json.dumps({**state, "n": 7}))
    hazel(*edit.split()[1:7], "--file", str(tmp_path / "state.json"))
    assert json.loads(hazel("show", run_id, "--json").stdout)["state"]["n"] == 7


class Cfg(BaseModel):
    limit: int = 3
    name: str = "n"


class Typed(BaseModel):
    cfg: Cfg = Field(default_factory=Cfg)
    tags: dict[str, str] = Field(default_factory=dict)


def _configure(state: Typed, ctx: StepContext) -> Typed:
    return Typed(cfg=Cfg(limit=3, name="prod"), tags={"a": "x", "b": "y"})


typed = Workflow("typed", version=1, state=Typed)
typed.step(_configure, name="configure")
typed.steer("c", show="cfg", actions=["approve", "edit"])
typed.steer("t", show="tags", actions=["approve", "edit"])


def _limit_alone_refused_then_set(hz, run_id: str, field: str, limit: int, after: dict) -> None:  # noqa: ANN001
    """At a point showing ``field`` (a ``Cfg``): ``{"limit": N}`` alone is refused, naming ``name``, which it
    would reset; the entry set alone (``--set FIELD.limit=N``) is taken, ``name`` kept (``after``)."""
    with pytest.raises(InvalidDecisionError) as refused:
        hz.decide(run_id=run_id, action="edit", actor=person("ana"), payload={"text": json.dumps({"limit": limit})})
    assert str(refused.value).startswith(f"the edit leaves out field 'name' of {field!r}: an edit of {field!r} gives "
                                         "every field, and it would go back to its default"), str(refused.value)
    hz.decide(run_id=run_id, action="edit", actor=person("ana"), payload={"entries": {"limit": str(limit)}})
    hz.drive(run_id=run_id)
    assert hz.state_tree_at(run_id=run_id)[field] == after


def test_an_edit_of_a_nested_model_leaving_out_its_fields_is_refused_a_mappings_entries_may_go(db_url: str) -> None:
    """s30 F3's addendum: ``--set 'cfg={"limit": 9}'`` reset ``cfg.name`` to its default. A mapping's entry
    left out of a whole-field edit is how that edit removes it: taken."""
    hz = make_hazel(db_url, typed)
    run = hz.start(workflow="typed", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    _limit_alone_refused_then_set(hz, run.id, "cfg", 9, {"limit": 9, "name": "prod"})
    hz.decide(run_id=run.id, action="edit", actor=person("ana"), payload={"text": '{"a": "x"}'})
    assert hz.state_tree_at(run_id=run.id)["tags"] == {"a": "x"}


class Deep(BaseModel):
    text: str = ""
    cfg: Cfg = Field(default_factory=Cfg)
    opt: Cfg | None = None
    tags: dict[str, str] = Field(default_factory=dict)


def _deepen(state: Deep, ctx: StepContext) -> Deep:
    return Deep(text="t", cfg=Cfg(limit=7, name="prod"), opt=Cfg(limit=1, name="o"), tags={"a": "x"})


deep = Workflow("deep", version=1, state=Deep)
deep.step(_deepen, name="deepen")
deep.steer("whole", show=None, actions=["approve", "edit"])
deep.steer("opt", show="opt", actions=["approve", "edit"])


@pytest.mark.parametrize("payload, said", [
    ({"entries": {"cfg": '{"limit": 9}'}}, "field 'name' of 'cfg'"),  # (--set 'cfg={"limit": 9}' at this point)
    ({"value": {"text": "t", "cfg": {"limit": 9}, "opt": {"limit": 1, "name": "o"}, "tags": {"a": "x"}}},
     "field 'name' of 'cfg'"),
], ids=["set-entry", "value-nested"])
def test_a_whole_state_edit_leaving_out_fields_of_a_nested_model_is_refused(db_url: str, payload: dict,
                                                                            said: str) -> None:
    """Fresh-user findings (s31 F1, F2): ``--set 'cfg={"limit": 9}'`` at a whole-state point, and a whole state
    given with a nested model's field left out, reset those fields without a word."""
    hz = make_hazel(db_url, deep)
    run = hz.start(workflow="deep", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    before = hz.state_tree_at(run_id=run.id)
    with pytest.raises(InvalidDecisionError) as refused:
        hz.decide(run_id=run.id, action="edit", actor=person("ana"), payload=payload)
    assert str(refused.value).startswith(f"the edit leaves out {said}: a whole-state edit gives every field"), \
        str(refused.value)
    assert hz.state_tree_at(run_id=run.id) == before
    hz.decide(run_id=run.id, action="edit", actor=person("ana"), payload={"entries": {"text": "u"}})  # (merges)
    hz.drive(run_id=run.id)
    _limit_alone_refused_then_set(hz, run.id, "opt", 3, {"limit": 3, "name": "o"})  # (s31 F3: Cfg | None)
