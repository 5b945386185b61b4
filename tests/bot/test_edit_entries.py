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
