"""The scheduler on a database whose schema is not this Hazel's (``hazel db downgrade`` under a running process):
each failure is one log line naming the error, never a traceback quoting the SQL statement and its bound
parameters, which may hold users' text (a fresh-user finding). Real databases, a real downgrade."""

from __future__ import annotations

import logging
import pytest
from pydantic import BaseModel

from hazel import StepContext, Workflow
from bot.ops.scheduler import Scheduler
from bot.ops.timers import fire_due
from store.migrate import downgrade
from store.models import RunStatus
from tests.support import engine
from tests.support.clock import FakeClock
from tests.support.engine import person

SECRET_TEXT = "the-users-own-words-4242"


class Doc(BaseModel):
    text: str = ""


def reviewed() -> Workflow:
    wf = Workflow("reviewed", version=1, state=Doc)

    @wf.step
    def draft(state: Doc, ctx: StepContext) -> dict:
        return {"text": state.text}

    wf.steer("review", show="text", remind_after_sec=60)
    return wf


@pytest.mark.parametrize("how", ["fire_due", "tick"])
def test_database_errors_of_the_scheduler_are_one_line(empty_url: str, how: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    hazel = engine.make_hazel(empty_url, reviewed(), clock=clock)
    run = hazel.start(workflow="reviewed", input={"text": SECRET_TEXT}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    downgrade(hazel.store.engine, "0005")
    clock.advance(300)  # the reminder is due
    with caplog.at_level(logging.INFO):
        if how == "fire_due":
            report = fire_due(hazel, now=hazel.clock())
            assert report.errors == [] or all("[SQL" not in error for _, error in report.errors)
        else:
            Scheduler(hazel)._run_tick()  # as the scheduler's job runs it
    failures = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert failures, "the scheduler logged nothing"
    for record in failures:
        text = record.getMessage()
        assert record.exc_info is None, text
        assert "\n" not in text and "[SQL" not in text and "[parameters" not in text, text
        assert SECRET_TEXT not in text
    assert any("Error" in r.getMessage() for r in failures)


def test_a_request_that_failed_and_could_not_be_postponed_waits_a_minute(db_url: str,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """A fresh-operator finding (s33 F6): on a full disk the failed request's postponement, a write, failed too,
    and the request was fired again at every tick (5 s), two ERROR lines each. It waits in the scheduler's memory
    instead. The database refuses writes here and answers reads, as a full disk does (SQLite's ``query_only``)."""
    from datetime import timedelta

    from sqlalchemy import event

    if not db_url.startswith("sqlite"):
        pytest.skip("a read-only PostgreSQL refuses the due requests' read (FOR UPDATE) too: the tick fails whole")
    clock = FakeClock()
    hazel = engine.make_hazel(db_url, reviewed(), clock=clock)
    run = hazel.start(workflow="reviewed", input={"text": "t"}, actor=person("author"))
    hazel.drive(run_id=run.id)
    clock.advance(300)  # the reminder is due

    def read_only(conn, _record) -> None:  # noqa: ANN001
        cursor = conn.cursor()
        cursor.execute("PRAGMA query_only = ON")
        cursor.close()

    event.listen(hazel.store.engine, "connect", read_only)
    hazel.store.engine.dispose()
    held: dict = {}

    def failures() -> int:
        return len([r for r in caplog.records if "scheduler: request" in r.getMessage() and "failed" in r.getMessage()])

    with caplog.at_level(logging.WARNING):
        assert len(fire_due(hazel, now=hazel.clock(), held=held).errors) == 1
        assert failures() == 1 and list(held) == [hazel.pending_request(run_id=run.id).id]
        for later in (5, 30, 59):
            assert fire_due(hazel, now=hazel.clock() + timedelta(seconds=later), held=held).errors == []
        assert failures() == 1  # not tried again within the minute
        event.remove(hazel.store.engine, "connect", read_only)
        hazel.store.engine.dispose()
        report = fire_due(hazel, now=hazel.clock() + timedelta(seconds=61), held=held)
    assert report.errors == [] and report.reminders == [hazel.pending_request(run_id=run.id).id] and held == {}
