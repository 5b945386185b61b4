"""A decision naming a steering point the run never asked at (one the workflow does not declare, or one the run
has not reached) is refused before anything runs: ``hazel approve RUN --at nopoint`` on a ``ready`` run
executed the run's next steps (their side effects included), then refused. A refusal that the request was
decided (the documented re-run after a crash) still continues the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.engine import NoPendingRequestError, UnaskedPointError
from store.models import RunStatus
from tests.bot.test_empty_edits import noted, waiting
from tests.support.engine import make_hazel, person

WORKFLOW = '''
import os
from pathlib import Path
from pydantic import BaseModel, Field
from hazel import StepContext, Workflow


class Trail(BaseModel):
    trail: list[str] = Field(default_factory=list)


def _step(name):
    def fn(state: Trail, ctx: StepContext) -> Trail:
        with open(Path(os.environ["HAZEL_OUTPUT_DIR"]).parent / "effects.log", "a") as fh:
            fh.write(name + "\\n")
        return state.model_copy(update={"trail": [*state.trail, name]})
    return fn


steered = Workflow("steered", version=1, state=Trail)
steered.step(_step("draft"), name="draft")
steered.steer("review")
steered.step(_step("deploy"), name="deploy")
steered.steer("sign_off", actions=["approve", "reject"])
steered.step(_step("publish"), name="publish")
'''


def test_the_engine_names_the_declared_points(db_url: str) -> None:
    hazel = make_hazel(db_url, noted())
    run_id = waiting(hazel, "noted-text")
    with pytest.raises(UnaskedPointError) as refused:
        hazel.decide(run_id=run_id, action="approve", actor=person("sme"), point="nopoint")
    assert refused.value.message == "workflow noted-text v1 has no steering point 'nopoint' (its steering points: review)"
    assert isinstance(refused.value, NoPendingRequestError)  # (REST and Slack answer it as before: 409)
    with pytest.raises(UnaskedPointError, match="no steering point 'nopoint'"):
        hazel.request_for(run_id=run_id, point="nopoint")
    assert hazel.get(run_id=run_id).status is RunStatus.WAITING and hazel.decisions(run_id=run_id) == []


def test_a_point_never_asked_at_does_not_drive_a_ready_run(cli, tmp_path: Path,  # noqa: ANN001
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "steered.py").write_text(WORKFLOW)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(tmp_path / "steered.py"))
    effects = tmp_path / "effects.log"
    run_id = cli.json("run", "steered", "--input", "{}")["run"]["id"]
    cli("approve", run_id, "--at", "review", "--detach")
    assert cli.json("show", run_id)["run"]["status"] == "ready" and effects.read_text() == "draft\n"

    undeclared = cli("approve", run_id, "--at", "nopoint", code=1)
    assert undeclared.stderr.strip() == ("error: workflow steered v1 has no steering point 'nopoint' (its steering "
                                         "points: review, sign_off)"), undeclared.output
    assert "continuing it here" not in undeclared.output
    unreached = cli("reject", run_id, "--at", "sign_off", "--reason", "no", code=1)
    assert unreached.stderr.strip() == (f"error: run {run_id} has never asked anything at 'sign_off' "
                                        f"(see `hazel retry {run_id}`)"), unreached.output
    edit = cli("edit", run_id, "--at", "nopoint", "--set", "trail=[]", code=1)
    assert "has no steering point 'nopoint'" in edit.stderr
    assert cli.json("show", run_id)["run"]["status"] == "ready" and effects.read_text() == "draft\n"

    again = cli("approve", run_id, "--at", "review")  # the documented re-run: decided, so it continues here
    assert "continuing it here" in again.output
    assert effects.read_text() == "draft\ndeploy\n"
    shown = cli.json("show", run_id)
    assert shown["run"]["status"] == "waiting", json.dumps(shown)[:500]
    cli("approve", run_id, "--at", "sign_off")
    assert effects.read_text() == "draft\ndeploy\npublish\n"
