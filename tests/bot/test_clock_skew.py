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
