"""A new entry of a mapping of texts is text, as its other entries are: ``--set field.KEY=text`` (or ``@file``)
on ``hazel edit`` (the engine's ``entries`` payload) and on ``hazel rewind`` (the CLI's ``apply_sets``)."""

from __future__ import annotations

import pytest

from bot.cli.common import apply_sets
from bot.engine import InvalidDecisionError
from bot.engine.steering.edits import edited_value


def test_a_new_entry_of_a_mapping_of_texts_is_text() -> None:
    scripts = {"001.sql": "CREATE TABLE t (id int);"}
    edited = edited_value(scripts, "scripts", {"entries": {"002.sql": "DROP TABLE t;"}})
    assert edited == {**scripts, "002.sql": "DROP TABLE t;"}
    assert apply_sets(["scripts.002.sql=hello"], {"scripts": scripts}) == {"scripts": {**scripts, "002.sql": "hello"}}


def test_a_new_entry_of_a_mixed_mapping_is_json_as_before() -> None:
    plan = {"title": "Move", "steps": 1}
    assert edited_value(plan, "plan", {"entries": {"owner": '"bob"'}}) == {**plan, "owner": "bob"}
    with pytest.raises(InvalidDecisionError, match="must be given as JSON"):
        edited_value(plan, "plan", {"entries": {"owner": "bob"}})
    with pytest.raises(InvalidDecisionError, match="must be given as JSON"):
        apply_sets(["plan.owner=bob"], {"plan": plan})


def test_a_first_entry_of_an_empty_mapping_follows_the_declared_entry_type(db_url: str) -> None:
    """An empty ``dict[str, str]`` takes a new entry as text (its type says so); a ``dict[str, int]`` as JSON."""
    from pydantic import BaseModel, Field

    from hazel import Workflow
    from tests.support.engine import make_hazel, person

    class S(BaseModel):
        parts: dict[str, str] = Field(default_factory=dict)
        counts: dict[str, int] | None = None
        title: str = ""

    wf = Workflow("parts", version=1, state=S)
    wf.steer("sign", show="parts", actions=["approve", "edit"])
    assert wf.declared_entries() == {"parts": "", "counts": None}

    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="parts", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="edit", actor=person("ana"), payload={"entries": {"a.sql": "hello"}})
    assert hz.state_tree_at(run_id=run.id)["parts"] == {"a.sql": "hello"}
    assert hz.declared_entries(run_id=run.id) == {"parts": "", "counts": None}
    assert apply_sets(["parts.b=plain text", "counts.n=3"], {"parts": {}, "counts": {}},
                      hz.declared_entries(run_id=run.id)) == {"parts": {"b": "plain text"}, "counts": {"n": 3}}
    with pytest.raises(InvalidDecisionError, match="entry 'n' of field 'counts' must be given as JSON"):
        apply_sets(["counts.n=three"], {"counts": {}}, {"counts": None})


def test_an_entry_with_an_empty_or_blank_key_is_refused() -> None:
    for key in ("", "  "):
        with pytest.raises(InvalidDecisionError, match="needs a key"):
            edited_value({"a": "x"}, "parts", {"entries": {key: "y"}})


def test_the_first_entry_of_an_unset_optional_mapping_makes_it() -> None:
    """``counts: dict[str, int] | None = None``: ``--set counts.n=3`` (rewind) and an ``entries`` edit make the
    mapping; a field not declared as a mapping is still refused."""
    assert apply_sets(["counts.n=3"], {"counts": None}, {"counts": None}) == {"counts": {"n": 3}}
    assert edited_value(None, "counts", {"entries": {"n": "3"}}, entry_blank=None) == {"n": 3}
    from bot.cli.common import CliError

    # a null field not declared as a mapping may be a model (``opt: Cfg | None``, s34 F2): made, and the state
    # model refuses it where it is neither (the engine's validation)
    assert apply_sets(["counts.n=3"], {"counts": None}, {}) == {"counts": {"n": 3}}
    with pytest.raises(CliError, match="counts is not a mapping"):
        apply_sets(["counts.n=3"], {"counts": "text"}, {})
    with pytest.raises(InvalidDecisionError, match="is not a mapping"):
        edited_value(None, "counts", {"entries": {"n": "3"}})


def test_an_entries_edit_of_an_unset_optional_mapping_through_the_engine(db_url: str) -> None:
    from pydantic import BaseModel

    from hazel import Workflow
    from tests.support.engine import make_hazel, person

    class S(BaseModel):
        counts: dict[str, int] | None = None

    wf = Workflow("counts", version=1, state=S)
    wf.steer("sign", show="counts", actions=["approve", "edit"])
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="counts", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="edit", actor=person("ana"), payload={"entries": {"n": "3"}})
    assert hz.state_tree_at(run_id=run.id)["counts"] == {"n": 3}
