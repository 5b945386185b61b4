"""``hazel show RUN --raw`` with two requests pending at once (parallel LangGraph nodes) and no ``--at`` refuses
(exit status 1, as the command's other refusals), naming the points to choose from; with ``--at``, or once only
one is pending, it prints that value. SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support.cli import in_process_cli


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Any]:
    return in_process_cli(monkeypatch, tmp_path, db_url=db_url,
                          workflows="tests.langgraph.workflows.parallel_graphs")


def test_raw_with_two_pending_and_no_at_refuses_naming_the_points(cli: Callable[..., Any]) -> None:
    started = json.loads(cli("run", "lg-pair", "--input", '{"topic": "tides"}', "--json").stdout)
    run_id = started["run"]["id"] if "run" in started else started["id"]
    shown = json.loads(cli("show", run_id, "--json").stdout)
    assert sorted(r["point"] for r in shown["pending_requests"]) == ["legal", "security"]

    refused = cli("show", run_id, "--raw", code=1)
    assert refused.stdout == ""  # nothing printed that a `> file` would take for the value
    assert "waits at 2 steering points ('legal', 'security')" in refused.output
    assert "--at" in refused.output

    assert json.loads(cli("show", run_id, "--raw", "--at", "legal").stdout) == {"ask": "legal", "topic": "tides"}
    assert json.loads(cli("show", run_id, "--raw", "--at", "security").stdout) == {"ask": "security"}
    assert json.loads(cli("show", run_id, "--raw", "--seq", "0").stdout) == {"topic": "tides"}  # a state: no choice
    cli("show", run_id)  # the panels show both

    cli("approve", run_id, "--at", "security")
    assert json.loads(cli("show", run_id, "--raw").stdout) == {"ask": "legal", "topic": "tides"}  # one left
