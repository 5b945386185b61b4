"""An edit that would empty the shown field (empty or blank text) is refused unless it allows it: the check is
the engine's (``bot.engine.steering.edits``), so the CLI's ``--allow-empty`` and the REST API's ``allow_empty``
are one rule; a refused edit changes nothing."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import httpx
import pytest
from pydantic import BaseModel, Field

from hazel import StepContext, Workflow
from bot.engine.errors import InvalidDecisionError
from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from store.models import RunStatus
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer

TOKEN = "tok-olga-0123456789"


class Note(BaseModel):
    text: str = ""
    parts: dict[str, str] = Field(default_factory=dict)


def noted(show: str = "text") -> Workflow:
    wf = Workflow(f"noted-{show}", version=1, state=Note)

    @wf.step
    def draft(state: Note, ctx: StepContext) -> Note:
        return state.model_copy(update={"text": "the plan", "parts": {"a": "one", "b": "two"}})

    wf.steer("review", show=show)
    return wf


def waiting(hazel, workflow: str) -> str:  # noqa: ANN001
    run = hazel.start(workflow=workflow, input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    return run.id


@pytest.mark.parametrize("payload, what", [
    ({"value": ""}, "^the edit leaves field 'text' empty: "),
    ({"value": " \n"}, r"^the edit leaves field 'text' blank \(only whitespace\): "),
    ({"text": ""}, "^the edit leaves field 'text' empty: "), ({"text": "\t"}, "^the edit leaves field 'text' blank")])
def test_the_engine_refuses_an_empty_edit_without_allow_empty(db_url: str, payload: dict, what: str) -> None:
    hazel = make_hazel(db_url, noted())
    run_id = waiting(hazel, "noted-text")
    with pytest.raises(InvalidDecisionError, match=what):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={**payload, "allow_empty": False})
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING and hazel.decisions(run_id=run_id) == []
    hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={**payload, "allow_empty": True})
    assert hazel.state_at(run_id=run_id).text == next(iter(payload.values()))  # stored as it is


def test_an_emptied_entry_is_named(db_url: str) -> None:
    hazel = make_hazel(db_url, noted("parts"))
    run_id = waiting(hazel, "noted-parts")
    with pytest.raises(InvalidDecisionError, match="^the edit leaves entry 'b' of field 'parts' empty: "):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"),
                     payload={"entries": {"a": "uno", "b": ""}, "allow_empty": False})
    hazel.decide(run_id=run_id, action="edit", actor=person("sme"),
                 payload={"entries": {"a": "uno", "b": ""}, "allow_empty": True})
    assert hazel.state_at(run_id=run_id).parts == {"a": "uno", "b": ""}


def test_edit_messages_name_the_field_as_a_field(db_url: str) -> None:
    """Every channel shows the engine's text: the field (or entry) is named as one, never pasted into the
    sentence ("the new text is empty", "an edit needs the new parts")."""
    from bot.engine.steering.edits import edited_value

    hazel = make_hazel(db_url, noted("parts"))
    run_id = waiting(hazel, "noted-parts")
    for payload, message in (
            ({"text": ""}, "an edit needs a new value for field 'parts'"),  # a Slack modal, a Jira /edit
            ({"text": "  "}, "the edit leaves field 'parts' blank (only whitespace): that would replace the value "
                             "with nothing, and the state model needs a value there"),  # spaces: no mapping (s20 L3)
            ({"text": "", "allow_empty": False}, "the edit leaves field 'parts' empty: that would replace the value "
                                                 "with nothing, and the state model needs a value there"),
            ({"text": "{not json"}, "invalid edit: field 'parts' must be given as JSON here ("),
            ({}, "an edit needs a new value for field 'parts'"),  # (in no channel's terms: the REST API adds its own)
            ({"entries": {"b": " "}, "allow_empty": False}, "the edit leaves entry 'b' of field 'parts' blank")):
        with pytest.raises(InvalidDecisionError) as refused:
            hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload=payload)
        assert refused.value.message.startswith(message), (payload, refused.value.message)
    assert hazel.decisions(run_id=run_id) == []
    with pytest.raises(InvalidDecisionError, match="^invalid edit: field 'text' is not a mapping: it has no "
                                                   "entries to set"):
        edited_value("the plan", "text", {"entries": {"a": "x"}})
    with pytest.raises(InvalidDecisionError, match="^the edit leaves field 'b' empty"):  # the whole state shown
        edited_value({"b": "x"}, None, {"entries": {"b": ""}, "allow_empty": False})
    with pytest.raises(InvalidDecisionError, match="^an edit needs a new value for the state$"):
        edited_value({"b": "x"}, None, {"text": ""})


@contextmanager
def noted_api(db_url: str) -> Iterator[tuple[Any, httpx.Client]]:
    """Hazel with the ``noted`` workflows and the REST API on a live server: ``(hazel, client as olga)``."""
    hazel = make_hazel(db_url, noted())
    app = create_app(hazel, routers=[api_router(hazel, Settings(HAZEL_API_TOKENS=f"olga={TOKEN}"))])
    with LiveServer(app) as server:
        yield hazel, httpx.Client(base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"})
    hazel.close()


@pytest.fixture
def api(db_url: str) -> Iterator[tuple[Any, httpx.Client]]:
    with noted_api(db_url) as both:
        yield both


def test_rest_refuses_an_empty_edit_with_422_unless_allow_empty(api) -> None:  # noqa: ANN001
    hazel, http = api
    run_id = waiting(hazel, "noted-text")
    for payload in ({"value": ""}, {"value": "   "}, {"text": ""}, {"value": "", "allow_empty": False}):
        response = http.post(f"/api/runs/{run_id}/decisions", json={"action": "edit", "payload": payload})
        assert response.status_code == 422, (payload, response.text)
        error = response.json()["error"]
        assert error["type"] == "InvalidDecisionError" and "allow_empty" in error["message"], error
        assert error["message"].startswith("the edit leaves field 'text' "), error
        assert "hazel edit" not in error["message"]  # (the console's hint is the CLI's)
    assert hazel.state_at(run_id=run_id).text == "the plan" and hazel.decisions(run_id=run_id) == []
    not_bool = http.post(f"/api/runs/{run_id}/decisions",
                         json={"action": "edit", "payload": {"value": "", "allow_empty": "sure"}})
    assert not_bool.status_code == 422 and not_bool.json()["error"]["type"] == "InvalidRequestError"
    allowed = http.post(f"/api/runs/{run_id}/decisions",
                        json={"action": "edit", "payload": {"value": "", "allow_empty": True}})
    assert allowed.status_code == 201, allowed.text
    assert hazel.state_at(run_id=run_id).text == ""


class Config(BaseModel):
    limits: dict[str, list[int]] = Field(default_factory=dict)


def configured() -> Workflow:
    wf = Workflow("configured", version=1, state=Config)

    @wf.step
    def draft(state: Config, ctx: StepContext) -> Config:
        return state.model_copy(update={"limits": {"cpu": [1, 2]}})

    wf.steer("review", show="limits")
    return wf


@pytest.mark.parametrize("payload, what", [
    ({"value": {}}, r"^the edit leaves field 'parts' empty \(\{\}\): "),
    ({"text": "{}"}, r"^the edit leaves field 'parts' empty \(\{\}\): "),  # hazel edit --set 'parts={}'
    ({"text": " [ ] "}, r"^invalid edit: parts: Input should be a valid dictionary$")])
def test_an_empty_mapping_or_list_is_an_empty_edit(db_url: str, payload: dict, what: str) -> None:
    """``{}`` (or ``[]``) replaces the field with nothing, as ``""`` does: refused the same way; allowed, it is
    taken. ``[]`` is no mapping: refused in the state model's words at once (allowing it would not help)."""
    hazel = make_hazel(db_url, noted("parts"))
    run_id = waiting(hazel, "noted-parts")
    with pytest.raises(InvalidDecisionError, match=what):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={**payload, "allow_empty": False})
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING and hazel.decisions(run_id=run_id) == []
    if payload != {"text": " [ ] "}:
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={**payload, "allow_empty": True})
        assert hazel.state_at(run_id=run_id).parts == {}


def test_an_entry_given_an_empty_list_is_an_empty_edit(db_url: str) -> None:
    hazel = make_hazel(db_url, configured())
    run_id = waiting(hazel, "configured")
    with pytest.raises(InvalidDecisionError, match=r"^the edit leaves entry 'cpu' of field 'limits' empty \(\[\]\)"):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"),
                     payload={"entries": {"cpu": "[]"}, "allow_empty": False})
    assert hazel.decisions(run_id=run_id) == []
    hazel.decide(run_id=run_id, action="edit", actor=person("sme"),
                 payload={"entries": {"cpu": "[]"}, "allow_empty": True})
    assert hazel.state_at(run_id=run_id).limits == {"cpu": []}


def test_rest_refuses_an_empty_mapping_with_422_unless_allow_empty(db_url: str) -> None:
    hazel = make_hazel(db_url, noted("parts"))
    app = create_app(hazel, routers=[api_router(hazel, Settings(HAZEL_API_TOKENS=f"olga={TOKEN}"))])
    with LiveServer(app) as server:
        http = httpx.Client(base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"})
        run_id = waiting(hazel, "noted-parts")
        refused = http.post(f"/api/runs/{run_id}/decisions", json={"action": "edit", "payload": {"value": {}}})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["message"].startswith("the edit leaves field 'parts' empty ({}): ")
        assert hazel.state_at(run_id=run_id).parts == {"a": "one", "b": "two"}
        allowed = http.post(f"/api/runs/{run_id}/decisions",
                            json={"action": "edit", "payload": {"value": {}, "allow_empty": True}})
        assert allowed.status_code == 201, allowed.text
    hazel.close()


class Limits(BaseModel):
    limits: dict[str, int] | None = None


def limited() -> Workflow:
    wf = Workflow("limited", version=1, state=Limits)

    @wf.step
    def draft(state: Limits, ctx: StepContext) -> Limits:
        return state.model_copy(update={"limits": {"cpu": 2, "mem": 4}})

    wf.steer("review", show="limits")
    return wf


ENTRY_NEEDED = (r"^the edit leaves entry 'cpu' of field 'limits' empty: that would replace the value with nothing, "
                r"and the state model needs a value there$")
"""A null entry the state model refuses anyway: said in its words, with no advice to allow it."""


@pytest.mark.parametrize("payload, what", [
    ({"text": "null"}, r"^the edit leaves field 'limits' empty \(null\): "),
    ({"value": None}, r"^the edit leaves field 'limits' empty \(null\): "),
    ({"entries": {"cpu": "null"}}, ENTRY_NEEDED),  # (dict[str, int]: the state model refuses null there)
    ({"entries": {"cpu": None}}, ENTRY_NEEDED)])
def test_null_clears_only_with_allow_empty_as_an_empty_mapping_does(db_url: str, payload: dict, what: str) -> None:
    """``--set limits=null`` (a fresh-user finding) cleared an optional mapping that ``--set limits={}`` could not
    empty without ``--allow-empty``; null now replaces a value with nothing under the same rule."""
    hazel = make_hazel(db_url, limited())
    run_id = waiting(hazel, "limited")
    with pytest.raises(InvalidDecisionError, match=what):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={**payload, "allow_empty": False})
    assert hazel.state_at(run_id=run_id).limits == {"cpu": 2, "mem": 4} and hazel.decisions(run_id=run_id) == []
    if "entries" not in payload:  # (an entry of dict[str, int] cannot be null: the state model refuses it)
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"), payload={**payload, "allow_empty": True})
        assert hazel.state_at(run_id=run_id).limits is None


def test_a_new_entry_or_an_unset_field_given_null_is_no_emptying(db_url: str) -> None:
    """Null replaces nothing where there was nothing: an edit setting it there is not refused as emptying (the
    state model decides whether it may be null)."""
    from bot.engine.steering.edits import edited_value

    assert edited_value(None, "limits", {"text": "null", "allow_empty": False}) is None
    assert edited_value({"cpu": 2}, "limits", {"entries": {"gpu": "null"}, "allow_empty": False}) == {
        "cpu": 2, "gpu": None}


def test_a_rewinds_edit_to_null_is_refused_as_emptying_where_the_target_had_a_value() -> None:
    from bot.engine.steering.edits import refuse_empty_edits

    with pytest.raises(InvalidDecisionError, match=r"^the edit leaves field 'limits' empty \(null\): "):
        refuse_empty_edits({"limits": None}, {"limits": {"cpu": 2}})
    refuse_empty_edits({"limits": None}, {"limits": None})  # null already: nothing emptied
    refuse_empty_edits({"limits": None}, None)  # the target's fields not at hand (a LangGraph graph's)
