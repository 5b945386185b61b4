"""How a command that executed a run here (``hazel run``, ``approve``, ``retry``, …) ends when the run did not go
on: the drive left it ``failed``, or someone cancelled it while the command executed it. The command exits 1
with one error line (``handle_errors``): ``error: run R failed at step S: RuntimeError: …``, ``error: run R was
cancelled by sam while this command was executing it (reason: …); the approve stays recorded, the run goes no
further``; with ``--json`` its usual document carries the error as its ``"error"`` member (``CliError.output``).

The engine's ``lease lost`` warning of a run cancelled mid-step is left off such a command's stderr
(``lease_lost_held``): its error line says it. ``hazel serve`` / ``hazel worker`` log it as before."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from bot.cli.common import CliError, _first_line

if TYPE_CHECKING:
    from datetime import datetime

    from bot.engine import DriveResult, Hazel
    from store.models import AuditEvent, Run


class RunFailedError(CliError):
    """The run this command executed ended ``failed`` (a step's last attempt raised, or Hazel could not execute
    it: a migration, a state it cannot load): ``retry`` resumes it from its last good checkpoint."""


class RunCancelledError(CliError):
    """The run this command executed was cancelled meanwhile (``hazel cancel`` from another shell, a REST or
    Slack cancel, a timeout), also when someone continued it since (a rewind, a retry): not by this command."""


def run_error(hazel: "Hazel", run: "Run", result: "DriveResult | None", extra: dict | None = None, *,
              output: dict | None = None) -> CliError | None:
    """The error a command ends with after executing ``run`` (as it is now; ``result``: the drive, None when the
    command executed nothing): ``RunCancelledError`` when it was cancelled during the drive
    (``cancelled_during``), ``RunFailedError`` when the drive left it ``failed``, else None. ``extra``: the
    command's other output (its ``"decision"`` is named as kept); ``output``: its JSON document
    (``CliError.output``)."""
    from store.models import RunStatus

    if result is None:
        return None
    if cancelled_during(hazel, run, result):
        return RunCancelledError(cancelled_message(hazel, run.id, extra), output=output)
    if run.status is RunStatus.FAILED:
        return RunFailedError(failed_message(hazel, run), output=output)
    return None


def cancelled_during(hazel: "Hazel", run: "Run", result: "DriveResult") -> bool:
    """Whether ``run`` (as it is now) was cancelled while ``result``'s drive executed it: it ended so (only a
    cancel or a timeout does, never a step the drive executed), or it lost its lease to a cancel that someone
    followed with a rewind or a retry meanwhile."""
    from store.models import RunStatus

    return run.status is RunStatus.CANCELLED or (
        result.lease_lost and _cancel_of(hazel, run.id, since=result.started_at) is not None)


ERROR_LINE_CHARS = 300
"""Characters of a failed run's error on the command's error line (``failed_message``)."""


def failed_message(hazel: "Hazel", run: "Run") -> str:
    """``run R failed at step S: RuntimeError: payment provider down``: the step of the run's latest failure (from
    its audit log; none when it failed outside a step) and the first line of its error, cut at
    ``ERROR_LINE_CHARS`` characters saying how many more the error has and where it is whole (``… (2,999,700
    more characters: hazel show R --full)``)."""
    from bot.cli.common import command_prefix
    from store.models import shown_error

    failure = next((e for e in reversed(hazel.audit(run_id=run.id)) if e.action in ("step.failed", "run.failed")),
                   None)
    step = failure.detail.get("step") if failure is not None else None
    error = str(run.error or "").strip()
    line = _first_line(error) or "unknown error"
    if len(line) > ERROR_LINE_CHARS:  # (the more characters counted in the whole error, its other lines too)
        line = shown_error(error, run_id=run.id, max_chars=ERROR_LINE_CHARS, command=command_prefix(),
                           one_line=True)
    return f"run {run.id} failed{f' at step {step}' if step else ''}: {line}"


def cancelled_message(hazel: "Hazel", run_id: str, extra: dict | None = None) -> str:
    """Who cancelled the run and why, from its audit log, and that the decision this command recorded
    (``extra["decision"]``, when there is one) stays recorded: ``run R was cancelled by sam while this command
    was executing it (reason: wrong topic); the approve stays recorded, the run goes no further``."""
    from bot.cli.render import _short
    from store.models import person_label

    ended = _cancel_of(hazel, run_id)
    by = f" by {person_label(ended.person, ended.actor_name, ended.actor_id)}" if ended is not None else ""
    reason = (ended.detail.get("reason") if ended is not None else None) or ""
    why = f" (reason: {_short(reason, 80)})" if str(reason).strip() else ""
    decision = (extra or {}).get("decision")
    kept = f"the {decision.action.value} stays recorded, " if decision is not None else ""
    return f"run {run_id} was cancelled{by} while this command was executing it{why}; {kept}the run goes no further"


def _cancel_of(hazel: "Hazel", run_id: str, *, since: "datetime | None" = None) -> "AuditEvent | None":
    """The run's latest ``run.cancelled`` event (at or after ``since``, UTC, when given), or None."""
    ended = next((e for e in reversed(hazel.audit(run_id=run_id)) if e.action == "run.cancelled"), None)
    return ended if ended is not None and (since is None or ended.created_at >= since) else None


@contextmanager
def lease_lost_held(handlers: list[logging.Handler]) -> Iterator[list[logging.LogRecord]]:
    """While a command executes a run: the engine's ``lease lost`` warning (``bot.engine.LEASE_LOST``) kept off
    ``handlers`` (the command's stderr) and collected in the yielded list, for the caller to drop when the
    command's error line says the run was cancelled, or else to print (``release``): another worker took the
    run over."""
    from bot.engine import LEASE_LOST

    held: list[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        if record.msg == LEASE_LOST:
            held.append(record)
            return False
        return True

    for handler in handlers:
        handler.addFilter(hold)
    try:
        yield held
    finally:
        for handler in handlers:
            handler.removeFilter(hold)


def release(held: list[logging.LogRecord], handlers: list[logging.Handler]) -> None:
    """Print the ``held`` records through ``handlers`` after all (their filters see them again)."""
    for record in held:
        for handler in handlers:
            handler.handle(record)
