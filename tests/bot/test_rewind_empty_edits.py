"""A rewind's edits follow the edit's empty-value rule (``bot.engine.steering.edits``): an edit that leaves a
field (or an entry of a mapping field) empty or blank is refused unless it allows it, on the engine, the REST
API (``"allow_empty": true`` in the rewind's payload) and the CLI (``hazel rewind --allow-empty``); a refused
rewind changes nothing. They were stored as they were, while ``hazel edit --set text=`` was refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from bot.engine.errors import InvalidDecisionError
from store.models import RunStatus
from tests.bot.test_empty_edits import noted, noted_api, waiting
from tests.support.engine import make_hazel, person

NOTED = '''
from pydantic import BaseModel, Field

from hazel import StepContext, Workflow


class Note(BaseModel):
    text: str = ""
    parts: dict[str, str] = Field(default_factory=dict)


noted = Workflow("noted-text", version=1, state=Note)


@noted.step
def draft(state: Note, ctx: StepContext) -> Note:
    return state.model_copy(update={"text": "the plan", "parts": {"a": "one", "b": "two", "c": ""}})


noted.steer("review", show="text")
'''


def counts(hazel: Any, run_id: str) -> tuple:
    run = hazel.get(run_id=run_id)
    return run.status, run.last_seq, len(hazel.decisions(run_id=run_id))


@pytest.mark.parametrize("edits, what", [
    ({"text": ""}, "^the edit leaves field 'text' empty: "),
    ({"text": "  \n"}, r"^the edit leaves field 'text' blank \(only whitespace\): "),
    ({"parts": {"a": "one", "b": " "}}, "^the edit leaves entry 'b' of field 'parts' blank")])
def test_the_engine_refuses_an_empty_rewind_edit_unless_allowed(db_url: str, edits: dict, what: str) -> None:
    hazel = make_hazel(db_url, noted())
    run_id = waiting(hazel, "noted-text")
    before = counts(hazel, run_id)
    with pytest.raises(InvalidDecisionError, match=what):
        hazel.rewind(run_id=run_id, actor=person("sme"), to=1, edits=edits)
    with pytest.raises(InvalidDecisionError, match=what):  # the same rule through decide (REST, CLI)
        hazel.decide(run_id=run_id, action="rewind", actor=person("sme"), payload={"to": 1, "edits": edits})
    assert counts(hazel, run_id) == before
    hazel.rewind(run_id=run_id, actor=person("sme"), to=1, edits=edits, allow_empty=True)
    assert len(hazel.decisions(run_id=run_id)) == 1


def test_an_entry_left_as_it_was_is_not_an_empty_edit(db_url: str) -> None:
    """``--set parts.a=uno`` hands the whole mapping, with an entry that was blank already: that is taken."""
    hazel = make_hazel(db_url, noted())
    run_id = waiting(hazel, "noted-text")
    hazel.rewind(run_id=run_id, actor=person("sme"), to=1, edits={"parts": {"a": "one", "b": ""}},
                 allow_empty=True)
    assert hazel.drive(run_id=run_id).run.status is RunStatus.WAITING
    fork = hazel.checkpoints(run_id=run_id)[-1].seq
    assert hazel.state_tree_at(run_id=run_id, seq=fork)["parts"] == {"a": "one", "b": ""}
    hazel.rewind(run_id=run_id, actor=person("sme"), to=fork, edits={"parts": {"a": "uno", "b": ""}})
    with pytest.raises(InvalidDecisionError, match="^the edit leaves entry 'a' of field 'parts' empty"):
        hazel.rewind(run_id=run_id, actor=person("sme"), to=fork, edits={"parts": {"a": "", "b": ""}})
    assert len(hazel.decisions(run_id=run_id)) == 2


@pytest.fixture
def api(db_url: str) -> Iterator[tuple[Any, httpx.Client]]:
    with noted_api(db_url) as both:
        yield both


def test_rest_refuses_an_empty_rewind_edit_with_422_unless_allow_empty(api) -> None:  # noqa: ANN001
    hazel, http = api
    run_id = waiting(hazel, "noted-text")
    before = counts(hazel, run_id)
    path = f"/api/runs/{run_id}/decisions"
    for payload in ({"to": 1, "edits": {"text": "   "}}, {"to": 1, "edits": {"text": ""}, "allow_empty": False}):
        response = http.post(path, json={"action": "rewind", "payload": payload})
        assert response.status_code == 422, (payload, response.text)
        error = response.json()["error"]
        assert error["type"] == "InvalidDecisionError" and "allow_empty" in error["message"], error
        assert error["message"].startswith("the edit leaves field 'text' "), error
    assert counts(hazel, run_id) == before
    not_bool = http.post(path, json={"action": "rewind", "payload": {"to": 1, "edits": {"text": ""},
                                                                     "allow_empty": "sure"}})
    assert not_bool.status_code == 422 and not_bool.json()["error"]["type"] == "InvalidRequestError"
    allowed = http.post(path, json={"action": "rewind", "payload": {"to": 1, "edits": {"text": "  "},
                                                                    "allow_empty": True}})
    assert allowed.status_code == 201, allowed.text
    fork = hazel.checkpoints(run_id=run_id)[-1]
    assert hazel.state_tree_at(run_id=run_id, seq=fork.seq)["text"] == "  "


def test_the_cli_rewind_refuses_an_empty_set_unless_allow_empty(cli, tmp_path: Path,  # noqa: ANN001
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "noted_rewind.py"
    path.write_text(NOTED)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(path))
    run_id = cli.json("run", "noted-text", "--input", json.dumps({}))["run"]["id"]
    before = cli("history", run_id).output
    for sets in (["--set", "text="], ["--set", "text=   "], ["--set", "parts.b="]):
        refused = cli("rewind", run_id, "--to", "1", *sets, "--detach", code=1)
        assert "the edit leaves" in refused.output and "--allow-empty" in refused.output, refused.output
    assert cli("history", run_id).output == before
    cli("rewind", run_id, "--to", "1", "--set", "text=", "--allow-empty", "--detach")
    assert cli("history", run_id).output != before


@pytest.mark.parametrize("edits, what", [
    ({"parts": {}}, r"^the edit leaves field 'parts' empty \(\{\}\): "),
    ({"parts": []}, r"^invalid edit: parts: Input should be a valid dictionary$")])  # (no mapping: the model's words)
def test_a_rewind_edit_to_an_empty_mapping_or_list_is_refused_unless_allowed(db_url: str, edits: dict,
                                                                               what: str) -> None:
    hazel = make_hazel(db_url, noted())
    run_id = waiting(hazel, "noted-text")
    before = counts(hazel, run_id)
    with pytest.raises(InvalidDecisionError, match=what):
        hazel.decide(run_id=run_id, action="rewind", actor=person("sme"), payload={"to": 1, "edits": edits})
    assert counts(hazel, run_id) == before
    if edits == {"parts": {}}:
        hazel.rewind(run_id=run_id, actor=person("sme"), to=1, edits=edits, allow_empty=True)
        assert hazel.state_tree_at(run_id=run_id, seq=hazel.checkpoints(run_id=run_id)[-1].seq)["parts"] == {}
