"""``HAZEL_SCHEDULER_TICK_SEC=0.001`` was taken (durations are at least 1 ms), and a worker then logged about 500
APScheduler warnings a second, ``Execution of job "Scheduler._run_tick …" skipped: maximum number of running
instances reached (1)``: every tick started before the last had ended (s25 F5). The tick now takes at least
0.1 s, and a tick skipped because the last one still runs (a slow database) is logged at DEBUG: the next one
runs once it has ended, nothing is lost."""

from __future__ import annotations

import logging
import time

import pytest
from pydantic import ValidationError

from bot.ops.scheduler import Scheduler
from bot.settings import Settings
from tests.bot.test_timers import close_hazels, make_hazel, timed  # noqa: F401 - close_hazels is an autouse fixture


@pytest.mark.parametrize("value", ["0.001", "0.0999"])
def test_a_tick_shorter_than_a_tenth_of_a_second_is_refused(value: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(HAZEL_SCHEDULER_TICK_SEC=value)
    [error] = refused.value.errors()
    assert error["msg"] == ("Value error, must be at least 0.1 s (the scheduler's safety net: deadlines fire on "
                            "time whatever the tick)"), error


def test_a_tenth_of_a_second_is_taken_and_other_durations_keep_their_floor() -> None:
    assert Settings(HAZEL_SCHEDULER_TICK_SEC="0.1").scheduler_tick_sec == 0.1
    assert Settings(HAZEL_SWEEP_SEC="0.001").sweep_sec == 0.001


def test_a_tick_skipped_while_the_last_one_runs_is_no_warning(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    hazel = make_hazel(db_url, timed())
    scheduler = Scheduler(hazel, tick_sec=0.001)  # (the constructor takes any period: the settings have the floor)
    ticks: list[float] = []
    real_tick = scheduler.tick

    def slow_tick():  # noqa: ANN202 (a database that takes 50 ms a tick)
        ticks.append(time.monotonic())
        time.sleep(0.05)
        return real_tick()

    scheduler.tick = slow_tick  # type: ignore[method-assign]
    with caplog.at_level(logging.DEBUG, logger="apscheduler"):
        scheduler.start()
        try:
            time.sleep(0.5)
        finally:
            scheduler.stop()
    skipped = [r for r in caplog.records if "maximum number of running instances reached" in r.getMessage()]
    assert skipped, "no tick was skipped: the test proves nothing"
    assert {r.levelno for r in skipped} == {logging.DEBUG}, [(r.levelname, r.getMessage()) for r in skipped[:3]]
    assert {r.name for r in skipped} == {"apscheduler.scheduler"}
    assert len(ticks) >= 3  # the ticks went on, one after the other
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text[:2000]
