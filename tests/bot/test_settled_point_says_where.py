"""A decision naming a steering point (``--at``) or a request (``--request``, a button of an old message) that
was settled says, after who settled it, where the run waits now (fresh-user s17: after a rewind, ``approve --at
sign_off`` answered only "already approved", and the person had to find the point the run was rewound to)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import in_process_cli

ROOT = Path(__file__).resolve().parents[2]


def test_after_a_rewind_a_settled_point_names_where_the_run_waits(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cli = in_process_cli(monkeypatch, ROOT, db_url=f"sqlite:///{tmp_path / 'hazel.db'}",
                         workflows="examples.migration_plan")
    run_id = json.loads(cli("run", "migration-plan", "--input", '{"request": "move the db"}', "--json").stdout)[
        "run"]["id"]
    cli("approve", run_id, "--at", "review_plan")
    cli("approve", run_id, "--at", "review_artefacts")
    sign_off = json.loads(cli("show", run_id, "--json").stdout)["pending_request"]
    assert sign_off["point"] == "sign_off"
    cli("rewind", run_id, "--to", "review_plan", "--feedback", "smaller steps")
    now = json.loads(cli("show", run_id, "--json").stdout)["pending_request"]
    assert now["point"] == "review_plan" and now["id"] != sign_off["id"]
    for args in (("--at", "sign_off"), ("--at", "review_artefacts"), ("--request", str(sign_off["id"]))):
        refused = cli("approve", run_id, *args, code=1)
        assert refused.stderr.startswith("error: already "), refused.stderr
        assert refused.stderr.strip().endswith(f"; run {run_id} now waits at 'review_plan' (request {now['id']})"), \
            (args, refused.stderr)
    # nothing changed: the run still waits where the rewind left it
    assert json.loads(cli("show", run_id, "--json").stdout)["pending_request"]["id"] == now["id"]
    # a run that waits on nothing any more is told who settled it, as before
    cli("approve", run_id, "--at", "review_plan")
    cli("approve", run_id, "--at", "review_artefacts")
    cli("approve", run_id, "--at", "sign_off")
    done = cli("approve", run_id, "--at", "sign_off", code=1)
    assert "now waits" not in done.stderr and done.stderr.startswith("error: already approved by "), done.stderr
