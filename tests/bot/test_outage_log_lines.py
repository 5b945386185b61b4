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


@pytest.mark.parametrize("error, level, traceback", [(_outage(), logging.WARNING, False),
                                                      (ValueError("a bug"), logging.ERROR, True)])
def test_one_message_cut_short_by_an_outage_is_one_line_too(db_url: str, caplog: pytest.LogCaptureFixture,
                                                           error: Exception, level: int, traceback: bool) -> None:
    """A message whose delivery met the outage (its rendering reads the database) was an ERROR with a
    40-line traceback per message (a fresh-user finding); it is tried again either way."""
    from store.models import OutboxKind

    hazel = make_hazel(db_url)
    deliverer = Deliverer(hazel, ChannelRouter({}, fallback=hazel.console))
    with hazel.store.transaction() as tx:
        tx.outbox.add(channel="console", kind=OutboxKind.RUN_PROGRESS, now=hazel.clock(), payload={"event": "x"})

    def failing(_message) -> None:  # noqa: ANN001
        raise error

    deliverer.senders[OutboxKind.RUN_PROGRESS] = failing
    with caplog.at_level(logging.WARNING, logger="hazel"):
        assert deliverer.deliver_due() == 0
    said = [r for r in caplog.records if r.getMessage().startswith("outbox message ")]
    assert [r.levelno for r in said if r.exc_info is not None] == ([level] if traceback else [])
    assert [r.getMessage().split(": ")[0] for r in said if r.exc_info is None] == [
        "outbox message 1 (run.progress to console) failed, attempt 1"]  # the one line of an outage
    assert hazel.outbox_backlog().get("pending", 0) == 1  # kept, to be tried again
