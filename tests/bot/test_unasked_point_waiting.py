"""A point the run has not reached, named on a run that waits elsewhere: the refusal is the one line the README
quotes, without the ``(see `hazel retry RUN`)`` hint, which only a ``ready`` run that no process continues gets
(retrying a waiting run does nothing); the run is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bot.test_unasked_point import WORKFLOW


def test_an_unreached_point_on_a_waiting_run(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    (tmp_path / "steered.py").write_text(WORKFLOW)
    monkeypatch.setenv("HAZEL_WORKFLOWS", str(tmp_path / "steered.py"))
    run_id = cli.json("run", "steered", "--input", "{}")["run"]["id"]
    refused = cli("approve", run_id, "--at", "sign_off", code=1)
    assert refused.stderr.strip() == f"error: run {run_id} has never asked anything at 'sign_off'", refused.output
    assert cli.json("show", run_id)["run"]["status"] == "waiting" and not cli.json("history", run_id)["decisions"]
