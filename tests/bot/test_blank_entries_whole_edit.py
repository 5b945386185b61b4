"""A whole-field edit of a mapping (or a list) that leaves one of its entries empty or blank is refused unless
it allows it, as an entry edit is (``bot.engine.steering.edits``): the REST API (``{"value": {...}}``, 422),
JSON text (a Jira ``/edit``, ``hazel edit --file``), a Slack edit modal (tested in
``tests/bot/slack/test_slack_people_named.py``) and a rewind's edits alike; an entry that was blank already is
left as it is, and a refused edit changes nothing."""

from __future__ import annotations

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


class Files(BaseModel):
    scripts: dict[str, str] = Field(default_factory=dict)
    steps: list[str] = Field(default_factory=list)


def files(show: str = "scripts", *, blank: bool = False) -> Workflow:
    wf = Workflow(f"files-{show}", version=1, state=Files)

    @wf.step
    def draft(state: Files, ctx: StepContext) -> Files:
        scripts = {"a.sql": "SELECT 1;", "b.sql": "SELECT 2;", **({"c.sql": "  "} if blank else {})}
        return state.model_copy(update={"scripts": scripts, "steps": ["backup", "migrate"]})

    wf.steer("review", show=show, actions=["approve", "edit", "rewind"])
    return wf


def waiting(hazel, workflow: str) -> str:  # noqa: ANN001
    run = hazel.start(workflow=workflow, input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    return run.id


def test_rest_refuses_a_mapping_value_with_a_blank_entry_with_422_unless_allow_empty(db_url: str) -> None:
    hazel = make_hazel(db_url, files())
    app = create_app(hazel, routers=[api_router(hazel, Settings(HAZEL_API_TOKENS=f"olga={TOKEN}"))])
    with LiveServer(app) as server:
        http = httpx.Client(base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"})
        run_id = waiting(hazel, "files-scripts")
        for blank, how in (("   ", "blank (only whitespace)"), ("", "empty")):
            refused = http.post(f"/api/runs/{run_id}/decisions", json={"action": "edit", "payload": {
                "value": {"a.sql": "SELECT 10;", "b.sql": blank}}})
            assert refused.status_code == 422, refused.text
            error = refused.json()["error"]
            assert error["type"] == "InvalidDecisionError", error
            assert error["message"].startswith(f"the edit leaves entry 'b.sql' of field 'scripts' {how}: "), error
            assert "hazel edit" not in error["message"]
        new = http.post(f"/api/runs/{run_id}/decisions", json={"action": "edit", "payload": {
            "value": {"a.sql": "SELECT 1;", "b.sql": "SELECT 2;", "new.sql": " \n"}}})
        assert new.status_code == 422 and "entry 'new.sql' of field 'scripts' blank" in new.text, new.text
        assert hazel.state_at(run_id=run_id).scripts == {"a.sql": "SELECT 1;", "b.sql": "SELECT 2;"}
        assert hazel.decisions(run_id=run_id) == [] and hazel.get(run_id=run_id).status is RunStatus.WAITING
        allowed = http.post(f"/api/runs/{run_id}/decisions", json={"action": "edit", "payload": {
            "value": {"a.sql": "SELECT 1;", "b.sql": "  "}, "allow_empty": True}})
        assert allowed.status_code == 201, allowed.text
        assert hazel.state_at(run_id=run_id).scripts == {"a.sql": "SELECT 1;", "b.sql": "  "}
    hazel.close()


@pytest.mark.parametrize("allow_empty", [False, None])  # the CLI and REST send False; Slack and Jira nothing
def test_json_text_with_a_blank_entry_is_refused_and_one_blank_already_is_kept(db_url: str, allow_empty) -> None:  # noqa: ANN001
    hazel = make_hazel(db_url, files(blank=True))
    run_id = waiting(hazel, "files-scripts")
    flag = {} if allow_empty is None else {"allow_empty": allow_empty}
    with pytest.raises(InvalidDecisionError, match=r"^the edit leaves entry 'a.sql' of field 'scripts' blank"):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"),
                     payload={"text": '{"a.sql": "\\t", "b.sql": "SELECT 2;", "c.sql": "  "}', **flag})
    assert hazel.decisions(run_id=run_id) == []
    # c.sql was blank already: editing another entry leaves it as it is
    hazel.decide(run_id=run_id, action="edit", actor=person("sme"),
                 payload={"value": {"a.sql": "SELECT 3;", "b.sql": "SELECT 2;", "c.sql": "  "}, **flag})
    assert hazel.state_at(run_id=run_id).scripts == {"a.sql": "SELECT 3;", "b.sql": "SELECT 2;", "c.sql": "  "}


def test_a_list_value_with_a_blank_item_is_refused(db_url: str) -> None:
    hazel = make_hazel(db_url, files("steps"))
    run_id = waiting(hazel, "files-steps")
    with pytest.raises(InvalidDecisionError, match=r"^the edit leaves entry '1' of field 'steps' blank"):
        hazel.decide(run_id=run_id, action="edit", actor=person("sme"),
                     payload={"value": ["backup", "   "], "allow_empty": False})
    assert hazel.state_at(run_id=run_id).steps == ["backup", "migrate"]


def test_a_rewind_edit_with_a_blank_list_item_is_refused(db_url: str) -> None:
    hazel = make_hazel(db_url, files())
    run_id = waiting(hazel, "files-scripts")
    with pytest.raises(InvalidDecisionError, match=r"^the edit leaves entry '0' of field 'steps' empty"):
        hazel.rewind(run_id=run_id, actor=person("author"), to="review", edits={"steps": ["", "migrate"]})
    assert len(hazel.checkpoints(run_id=run_id)) == 2 and hazel.decisions(run_id=run_id) == []
