"""The console channel's lines for a request once it is settled: every outcome in words ("approved by olga")."""

from __future__ import annotations

import re

import pytest

from store.models import RunStatus
from tests.support.engine import make_hazel, person
from tests.workflows.reviewed import reviewed


SETTLE = {
    "approve": (lambda h, r: h.decide(run_id=r, action="approve", actor=person("olga")), "approved"),
    "edit": (lambda h, r: h.decide(run_id=r, action="edit", actor=person("olga"), payload={"value": "new"}),
             "edited"),
    "reject": (lambda h, r: h.decide(run_id=r, action="reject", actor=person("olga"), payload={"reason": "no"}),
               "rejected"),
    "feedback": (lambda h, r: h.decide(run_id=r, action="feedback", actor=person("olga"),
                                       payload={"text": "shorter"}), "answered with feedback"),
    "rewind": (lambda h, r: h.rewind(run_id=r, actor=person("olga"), to=0), "rewound"),
    "cancel": (lambda h, r: h.cancel(run_id=r, actor=person("olga")), "cancelled"),
}


@pytest.mark.parametrize("action", list(SETTLE))
def test_a_settled_request_reads_as_english(db_url: str, action: str) -> None:
    hazel = make_hazel(db_url, reviewed())
    run = hazel.start(workflow="reviewed", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    hazel.deliver_due()
    settle, words = SETTLE[action]
    settle(hazel, run.id)
    hazel.deliver_due()
    printed = re.sub(r"\s+", " ", hazel.console_buffer.getvalue())
    assert re.search(rf"run {run.id}: '[^']+' {words} by olga\b", printed), printed


@pytest.mark.parametrize("shown, entries", [(5, False), ({"a": "x"}, True), ([1, 2], False)])
def test_the_edit_command_offers_entries_only_for_a_mapping(db_url: str, shown: object, entries: bool) -> None:
    from typing import Any

    from pydantic import BaseModel

    from hazel import StepContext, Workflow

    class S(BaseModel):
        value: Any = None

    wf = Workflow("shown", version=1, state=S)

    @wf.step
    def make(state: S, ctx: StepContext) -> S:
        return S(value=shown)

    wf.steer("look", show="value", actions=["approve", "edit"])
    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="shown", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    hazel.deliver_due()
    printed = re.sub(r"\s+", " ", hazel.console_buffer.getvalue())
    assert "--set value=JSON" in printed, printed
    assert ("--set value.KEY=@file" in printed) is entries, printed


def test_a_reminder_at_a_point_open_to_anyone_says_so_and_its_due_time_to_the_second(db_url: str) -> None:
    """A console reminder at a point with no approvers had no ``still waits for`` line (README: console
    reminders have one; Slack's says "still waits for anyone"), and due times were cut to the minute: it
    says the point is open to anyone allowed, and ``due`` carries the seconds (UTC)."""
    from datetime import datetime, timezone

    from pydantic import BaseModel

    from bot.ops.scheduler import Scheduler
    from hazel import Workflow
    from tests.support.clock import FakeClock

    class Doc(BaseModel):
        text: str = "x"

    wf = Workflow("open", version=1, state=Doc)
    wf.steer("review", show="text", actions=["approve"], remind_after_sec=5, remind_every_sec=5,
             timeout_sec=3600 + 37)  # due at 10:00:37
    clock = FakeClock(datetime(2026, 1, 5, 9, 0, 0, tzinfo=timezone.utc))
    hazel = make_hazel(db_url, wf, clock=clock)
    run = hazel.start(workflow="open", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    hazel.deliver_due()
    first = hazel.console_buffer.getvalue()
    assert "due 2026-01-05 10:00:37 UTC" in first, first
    assert "still waits for" not in first  # (a first request names its approvers only)
    hazel.console_buffer.truncate(0)
    hazel.console_buffer.seek(0)
    clock.advance(5)
    Scheduler(hazel).tick()
    hazel.deliver_due()
    printed = re.sub(r"\s+", " ", hazel.console_buffer.getvalue())
    assert "Reminder" in printed and "still waits for: anyone allowed to decide it" in printed, printed
    assert "due 2026-01-05 10:00:37 UTC" in printed and "Answer with:" in printed, printed


def test_a_multi_line_step_error_never_starts_a_line_of_its_own(db_url: str) -> None:
    """``run X failed: …`` on stdout (the console channel, and ``hazel run``'s summary): the error's further
    lines are indented, as the text log's are. A step's error (an API's, an LLM's) that forges a log record
    after a line break started a line at the margin under journald, which takes stdout and stderr alike."""
    from pydantic import BaseModel

    from bot.cli.render import drive_summary
    from hazel import StepContext, Workflow

    class S(BaseModel):
        n: int = 0

    wf = Workflow("inj", version=1, state=S)

    @wf.step(max_attempts=1)
    def boom(state: S, ctx: StepContext) -> S:
        raise RuntimeError("line1\n2026-12-06 03:00:00,000 CRITICAL hazel.fake forged record\r\nzz end")

    hazel = make_hazel(db_url, wf)
    run = hazel.start(workflow="inj", input={}, actor=person("olga"))
    result = hazel.drive(run_id=run.id)
    assert result.run.status is RunStatus.FAILED
    hazel.deliver_due()
    printed = hazel.console_buffer.getvalue()
    summary = drive_summary(result)
    assert f"run {run.id} failed: RuntimeError: line1" in printed
    for text in (printed, summary):
        lines = text.splitlines()
        assert "    2026-12-06 03:00:00,000 CRITICAL hazel.fake forged record\\x0d" in lines, lines
        assert not [line for line in lines if line.startswith(("2026-", "zz"))], lines


def test_a_request_delivered_after_it_was_answered_is_one_line(db_url: str) -> None:
    """s25 F4: a console panel whose first delivery failed (a command's stdout closed by ``| head``) came out a
    minute later from another process, with "Answer with" commands for a request answered since. Delivered
    after the request was settled, it is one line saying so."""
    import io

    from rich.console import Console

    from integrations.console import ConsoleChannel

    hazel = make_hazel(db_url, reviewed())
    run = hazel.start(workflow="reviewed", input={}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    request = hazel.pending_request(run_id=run.id)
    hazel.decide(run_id=run.id, action="approve", actor=person("olga"))
    late = hazel.request_view(request_id=request.id)  # (what the outbox's retry renders: the request as it is)
    buffer = io.StringIO()
    ConsoleChannel(console=Console(file=buffer, width=200)).open_request(late)
    printed = buffer.getvalue()
    assert "Answer with" not in printed and "Steering request" not in printed, printed
    assert re.search(rf"run {run.id}: '[^']+' asked \(request {request.id}\), no longer pending: approved by olga",
                     re.sub(r"\s+", " ", printed)), printed
