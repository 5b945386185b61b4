"""``hazel worker --until-idle`` in a process that lacks a ready run's workflow version says it left that run,
rather than "none is ready now" (a fresh-user finding, s30 F6: a cron job relying on it would never finish
them, without a word)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from hazel import StepContext, Workflow
from tests.support.cli import in_process_cli


class S(BaseModel):
    text: str = ""


def _write(state: S, ctx: StepContext) -> S:
    return S(text=state.text + "!")


doc = Workflow("doc", version=1, state=S)
doc.step(_write, name="write")


def test_worker_until_idle_names_the_ready_runs_it_cannot_execute(db_url: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    hazel = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=__file__)
    run_id = json.loads(hazel("run", "doc", "--input", '{"text": "x"}', "--detach", "--json").stdout)["run"]["id"]
    other = tmp_path / "other_flows.py"
    other.write_text("from hazel import Workflow\nfrom pydantic import BaseModel\n\n\nclass T(BaseModel):\n"
                     "    n: int = 0\n\n\nbudget = Workflow('budget', version=1, state=T)\nbudget.step(lambda s, c: s, "
                     "name='noop')\n")
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(other))
    said = hazel("worker", "--until-idle").stdout
    assert " ".join(said.split()) == ("worked on 0 run(s); none is ready now that this process can execute: 1 "
                                      "ready run(s) of doc v1 left for a worker that has that version "
                                      "(HAZEL_WORKFLOWS)"), said
    assert json.loads(hazel("worker", "--until-idle", "--json").stdout) == {
        "drives": 0, "left": [{"workflow": "doc", "version": 1, "runs": 1}]}
    monkeypatch.setenv("HAZEL_WORKFLOWS", __file__)
    assert json.loads(hazel("worker", "--until-idle", "--json").stdout) == {"drives": 1, "left": []}
    assert json.loads(hazel("show", run_id, "--json").stdout)["run"]["status"] == "completed"
