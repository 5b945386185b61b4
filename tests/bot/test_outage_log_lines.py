"""A brief database outage is one warning line in the logs of the outbox and the scheduler (as in the worker's),
not an ERROR with the driver's traceback; any other error still logs its traceback."""

from __future__ import annotations

import logging
import time

import pytest
from sqlalchemy.exc import OperationalError

from bot.ops.outbox import ChannelRouter, Deliverer
from tests.support.engine import make_hazel


def _outage() -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly\n\tThis probably…"))


@pytest.mark.parametrize("error, level, traceback", [(_outage(), logging.WARNING, False),
                                                      (ValueError("a bug"), logging.ERROR, True)])
def test_the_outbox_loop_logs_an_outage_in_one_line(db_url: str, caplog: pytest.LogCaptureFixture, error: Exception,
                                                    level: int, traceback: bool) -> None:
    hazel = make_hazel(db_url)
    deliverer = Deliverer(hazel, ChannelRouter({}, fallback=hazel.console))
    calls = []

    def failing() -> None:
        calls.append(1)
        raise error

    deliverer.deliver_due = failing  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="hazel"):
        deliverer.start(sweep_sec=0.01)
        deadline = time.monotonic() + 10
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
        deliverer.stop()
    [record] = [r for r in caplog.records if "outbox delivery pass" in r.getMessage()][:1]
    assert record.levelno == level and (record.exc_info is not None) is traceback
    if not traceback:
        assert record.getMessage() == ("outbox delivery pass: the database is unreachable (OperationalError: "
                                       "(builtins.Exception) server closed the connection unexpectedly); trying again")
