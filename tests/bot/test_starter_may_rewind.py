"""Who started a run may rewind it, as they may retry or cancel it (README: "`/hazel rewind`, `retry` and
`cancel` need who started the run or an approver"): one engine rule (``permissions.refusal``), so the console,
the REST API (and Slack: ``tests/bot/slack/test_slack_people_named.py``) agree; someone else who is no approver
is refused, naming both rules, and a point that does not allow rewinding refuses the starter too."""

from __future__ import annotations

import time

import httpx
import pytest
from pydantic import BaseModel

from hazel import StepContext, Workflow
from bot.engine.errors import InvalidDecisionError, NotAllowedError
from bot.inbound.api import api_router
from bot.server.http import create_app
from bot.settings import Settings
from store.models import Approvers, RunStatus
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer


class Doc(BaseModel):
    text: str = ""


def reviewed(actions: tuple[str, ...] = ("approve", "feedback", "rewind")) -> Workflow:
    wf = Workflow("reviewed", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> Doc:
        return state.model_copy(update={"text": f"draft {ctx.feedback or ''}".strip()})

    wf.steer("review", title="Review it", show="text", actions=list(actions),
             approvers=Approvers(people=["priya"]))
    return wf


def test_the_starter_may_rewind_at_the_console_and_others_are_told_who_may(db_url: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    run = hazel.start(workflow="reviewed", input={}, actor=person("sam"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    with pytest.raises(NotAllowedError, match="^carl may not rewind at 'Review it': only priya may, or who "
                                              "started the run$"):
        hazel.rewind(run_id=run.id, actor=person("carl"), to="draft")
    outcome = hazel.rewind(run_id=run.id, actor=person("sam"), to="draft", feedback="shorter")
    assert outcome.decision.person == "sam" and outcome.next_node == "draft"
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    assert hazel.state_at(run_id=run.id).text == "draft shorter"
    hazel.decide(run_id=run.id, action="approve", actor=person("priya"))
    hazel.drive(run_id=run.id)
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    hazel.rewind(run_id=run.id, actor=person("sam"), to="review")  # an ended run: the workflow's points decide
    with pytest.raises(NotAllowedError, match="^carl may not rewind run "):
        hazel.rewind(run_id=run.id, actor=person("carl"), to="review")


def test_a_point_without_rewind_refuses_the_starter_too(db_url: str) -> None:
    hazel = make_hazel(db_url, reviewed(("approve", "feedback")))
    run = hazel.start(workflow="reviewed", input={}, actor=person("sam"))
    hazel.drive(run_id=run.id)
    with pytest.raises(InvalidDecisionError, match="'rewind' is not allowed at 'Review it'"):
        hazel.rewind(run_id=run.id, actor=person("sam"), to="draft")


def test_the_starter_may_rewind_through_the_rest_api(db_url: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    tokens = Settings(HAZEL_API_TOKENS="sam=tok-sam-0123456789,carl=tok-carl-0123456789")
    app = create_app(hazel, routers=[api_router(hazel, tokens)])
    with LiveServer(app) as server:
        def as_(who: str) -> httpx.Client:
            return httpx.Client(base_url=server.url, timeout=30,
                                headers={"Authorization": f"Bearer tok-{who}-0123456789"})

        started = as_("sam").post("/api/runs", json={"workflow": "reviewed", "input": {}})
        assert started.status_code in (200, 201, 202), started.text
        run_id = started.json()["id"]
        deadline = time.monotonic() + 15  # (the API runs the steps in a background thread)
        while hazel.get(run_id=run_id).status is not RunStatus.WAITING and time.monotonic() < deadline:
            time.sleep(0.02)
        assert hazel.get(run_id=run_id).status is RunStatus.WAITING
        body = {"action": "rewind", "payload": {"to": "draft", "feedback": "again"}}
        refused = as_("carl").post(f"/api/runs/{run_id}/decisions", json=body)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["message"] == ("carl may not rewind at 'Review it': only priya may, or who "
                                                      "started the run")
        allowed = as_("sam").post(f"/api/runs/{run_id}/decisions", json=body)
        assert allowed.status_code == 201, allowed.text
        assert hazel.decisions(run_id=run_id)[-1].person == "sam"


def test_with_nothing_pending_a_refused_rewind_names_who_may(db_url: str) -> None:
    """A completed run: the refusal names the approvers of the points that allow rewinding, and the starter
    (it said "no steering point of W lets them")."""
    hazel = make_hazel(db_url, reviewed())
    run = hazel.start(workflow="reviewed", input={}, actor=person("sam"))
    hazel.drive(run_id=run.id)
    hazel.decide(run_id=run.id, action="approve", actor=person("priya"), claim=True)
    assert hazel.drive(run_id=run.id).run.status is RunStatus.COMPLETED
    with pytest.raises(NotAllowedError, match=f"^carl may not rewind run {run.id}: only priya may, or who "
                                              "started the run$"):
        hazel.rewind(run_id=run.id, actor=person("carl"), to="draft")
    assert hazel.rewind(run_id=run.id, actor=person("sam"), to="draft").decision.person == "sam"
