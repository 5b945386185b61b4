"""A process whose clock is far from the database server's refuses to start (s24 F5, HIGH): leases, recovery
and deadlines are judged by each process's own clock, and a worker whose clock ran 90 s ahead took every live
run as abandoned (its step ran two and three times at once) and fired a 40 s timeout after 2 s. PostgreSQL
(SQLite is a file on this host: one clock)."""

from __future__ import annotations

import logging
import time

import pytest

from bot.engine.errors import ConfigurationError
from bot.server.processes import check_clock, prepare_when_reachable
from tests.support.engine import make_hazel
from tests.workflows.doc import doc_workflow


def test_a_clock_far_from_the_databases_refuses_to_start(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    if db_url.startswith("sqlite"):
        assert hazel.store.clock_skew_sec() is None
        check_clock(hazel)  # nothing to compare with
        return
    assert abs(hazel.store.clock_skew_sec()) < 1.0  # (this host's clock is the database's)
    real = time.time
    for ahead, says in ((90.0, "ahead of"), (-45.0, "behind")):
        monkeypatch.setattr(time, "time", lambda ahead=ahead: real() + ahead)
        with pytest.raises(ConfigurationError, match=rf"^this host's clock is {abs(ahead):.0f}\.\d s {says} the "
                           r"database server's; leases \(HAZEL_LEASE_SEC=60\), recovery and deadlines are judged "
                           r"by it: synchronize the clocks \(NTP"):
            prepare_when_reachable(hazel)  # (as serve and worker start: before any run is recovered)
    monkeypatch.setattr(time, "time", lambda: real() + 10.0)  # under half the lease: a warning, it starts
    with caplog.at_level(logging.WARNING):
        assert prepare_when_reachable(hazel) == []
    assert any("clock is 10." in r.getMessage() and "ahead of" in r.getMessage() for r in caplog.records)


def test_a_cli_command_on_a_host_whose_clock_is_off_hands_back_no_run_and_writes_nothing(
        db_url: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """s33 F1 (HIGH): every CLI command hands back runs whose lease ran out, and ``hazel run`` and the decisions
    set a new request's deadlines, by this host's clock, which only ``serve`` and ``worker`` checked: from a host
    90 s ahead a read-only ``hazel runs`` took a live run (its step ran twice at once), from one 2 h behind a
    1-hour timeout fired as it was asked. A reading command now reads on without handing runs back, saying so;
    any other is refused, nothing written."""
    from datetime import timedelta
    from pathlib import Path

    from sqlalchemy import update

    from store.schema import runs
    from tests.support.cli import in_process_cli

    if db_url.startswith("sqlite"):
        pytest.skip("SQLite is a file on this host: one clock")
    hazel = make_hazel(db_url, doc_workflow())
    run = hazel.start(workflow="doc", input={"topic": "tides"}, actor=hazel.operator(), claim=True)
    with hazel.store.transaction() as tx:  # a live process elsewhere, whose lease this host's clock says ran out
        tx.conn.execute(update(runs).where(runs.c.id == run.id).values(
            lease_owner="another-host:1:x", lease_expires_at=hazel.clock() - timedelta(seconds=5)))
    workflows = str(Path(__file__).parents[1] / "workflows" / "doc.py")
    cli = in_process_cli(monkeypatch, tmp_path, db_url=db_url, workflows=workflows)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 90.0)
    listed = cli("runs")
    assert "runs whose lease ran out were not handed back: this host's clock is 90." in listed.stderr, listed.stderr
    assert hazel.get(run_id=run.id).status.value == "running"  # not taken from its process
    refused = cli("run", "doc", "--input", '{"topic": "kelp"}', code=1)
    assert "this host's clock is 90." in refused.stderr and "synchronize the clocks" in refused.stderr
    assert [r.id for r in hazel.runs()] == [run.id]  # nothing started
    monkeypatch.setattr(time, "time", real)
    cli("runs")  # a clock that fits: the run is handed back
    assert hazel.get(run_id=run.id).status.value != "running"
