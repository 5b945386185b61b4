"""Errors Hazel raises to callers (CLI, Slack, Jira, REST). Each message is written for the person acting.

    HazelError (Exception)
    ├── WorkflowDefinitionError (ValueError): a workflow fails validation at load
    ├── UnknownWorkflowError (LookupError): no such workflow (or version) is registered
    ├── VersionUnavailableError (LookupError): a run's pinned version is gone and no migration leads on
    ├── RunNotFoundError (LookupError): no run with that id (or prefix)
    │   └── AmbiguousRunIdError: a shortened run id that starts several runs' ids
    ├── CheckpointNotFoundError (LookupError): no checkpoint matches a rewind target
    ├── NoPendingRequestError (LookupError): the run is not waiting on a steering request
    │   ├── UnaskedPointError: the decision names a point the run never asked at (undeclared, not reached)
    │   └── RequestNotFoundError: the decision names a request id that is not one of the run's (or, from a
    │       button that names no run, one not posted in the message clicked)
    ├── NotAllowedError (PermissionError): this person may not take this action here
    ├── InvalidDecisionError (ValueError): an edit that fails validation, a reject without reason, …
    │   ├── MissingEditValueError: an edit that gives no new value (each channel says what to send)
    │   ├── EmptyEditError: an edit that leaves a field or an entry empty (each channel says how to allow it)
    │   └── MissingRewindTargetError: a rewind that names no checkpoint (each channel may list them)
    ├── InvalidInputError (ValueError): a run's input does not fit the workflow's state model
    ├── ConfigurationError (ValueError): a setting is missing or malformed
    ├── AlreadyDecidedError: someone (maybe the same person) decided first; says who and when
    ├── RunStateError (RuntimeError): the run is not in a state that allows this (retry a running run, …)
    └── StepContractError (TypeError): a step returned something that is not its state, or routed to an
        unknown node; the run fails at once (no retry can help)

A message never names a channel's commands: where the console has one that helps (``hazel runs``), the error
carries it as ``hint``, which ``str(err)`` appends for the CLI and ``err.message`` leaves out (the REST API,
web pages); Slack maps it to its slash command. Quoted input is cut short (``quoted``): an answer never
echoes an oversized value back.
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from datetime import datetime
from typing import Any, Callable, Iterator


QUOTE_MAX_CHARS = 60
"""Characters of a person's input quoted in a message; longer input is cut (``quoted``)."""


def quoted(value: object, *, max_chars: int = QUOTE_MAX_CHARS) -> str:
    """``repr(str(value))``, cut to ``max_chars`` characters with its length named when longer: ``'abc…'
    (20,000,000 characters)``."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= max_chars:
        return repr(text)
    return f"{text[:max_chars]!r}… ({len(text):,} characters)"


def validation_details(exc: Any, *, root: str = "", max_chars: int | None = None) -> str:
    """A pydantic ``ValidationError`` in one line: ``loc: msg`` for each error, joined by ``; `` (an error of
    the whole value, whose ``loc`` is empty, named ``root``; a line break in a validator's message becomes a
    space). ``max_chars``: at most about that many characters: the errors that fit, then how many there are in
    all (``owner: Field required; … (40 errors in all)``), a first error longer than that cut with ``…``."""
    parts = [" ".join(f"{'.'.join(str(x) for x in e['loc']) or root}: {e['msg']}".splitlines())
             for e in exc.errors(include_url=False, include_input=False)]
    text = "; ".join(parts)
    if max_chars is None or len(text) <= max_chars:
        return text
    kept: list[str] = []
    for part in parts:
        if len("; ".join([*kept, part])) > max_chars:
            break
        kept.append(part)
    if not kept:
        kept = [parts[0][:max_chars - 1] + "…"]
    return "; ".join(kept) + (f"; … ({len(parts)} errors in all)" if len(parts) > 1 else "")

class HazelError(Exception):
    """Base of Hazel's errors; ``str(err)`` is a one-line message fit to show the person who acted.

    Args:
        hint: a console command that helps (``"hazel runs"``): ``str(err)`` appends ``(see `hazel runs`)``,
            ``message`` leaves it out.
    """

    def __init__(self, *args: object, hint: str | None = None) -> None:
        super().__init__(*args)
        self.hint = hint

    @property
    def message(self) -> str:
        """The message without the console hint: for channels that have no console commands."""
        return super().__str__()

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} (see `{self.hint}`)" if self.hint else text


class WorkflowDefinitionError(HazelError, ValueError):
    pass


class UnknownWorkflowError(HazelError, LookupError):
    pass


class VersionUnavailableError(HazelError, LookupError):
    pass


class RunNotFoundError(HazelError, LookupError):
    pass


class AmbiguousRunIdError(RunNotFoundError):
    """A shortened run id matches several runs (the message lists some of them)."""


def no_run(run_id: str) -> RunNotFoundError:
    """The error for a run that does not exist (hint: ``hazel runs``)."""
    return RunNotFoundError(f"no run {quoted(run_id)}", hint="hazel runs")


class CheckpointNotFoundError(HazelError, LookupError):
    pass


def no_checkpoint(run_id: str, seq: int, *, last_seq: int, kept: list[int], pruned: bool) -> CheckpointNotFoundError:
    """The error for checkpoint ``#seq`` of run ``run_id`` when it is not stored, the one wording of every read
    and rewind: ``checkpoint #1 of run R was pruned (kept: #3)`` when the run had it (``seq`` up to
    ``last_seq``, the highest number it ever gave: only ``hazel prune`` removes checkpoints), else ``run R has
    no checkpoint #9 (it has #0..#3)``, or ``(it had #0..#3; kept: #3)`` when ``pruned`` (some of its history
    was). ``kept``: numbers of some kept checkpoints to name (the newest few)."""
    names = ", ".join(f"#{n}" for n in kept)
    if 0 <= seq <= last_seq:
        return CheckpointNotFoundError(f"checkpoint #{seq} of run {run_id} was pruned (kept: {names})")
    span = f"it had #0..#{last_seq}; kept: {names}" if pruned else f"it has #0..#{last_seq}"
    return CheckpointNotFoundError(f"run {run_id} has no checkpoint #{seq} ({span})")


class NoPendingRequestError(HazelError, LookupError):
    pass


class UnaskedPointError(NoPendingRequestError):
    """A decision names a steering point the run has never asked at: one its workflow does not declare (the
    message names those it does), or one the run has not reached. Nothing of the run is worth continuing for
    it: the decision could not be taken even once the run got there."""


class RequestNotFoundError(NoPendingRequestError):
    """A decision names a steering request id that no request of its run has: an unknown id, or another run's
    request (nothing is said of that one: whether it is pending, who settled it). The REST API answers 404."""


def no_request(run_id: str, request_id: int) -> RequestNotFoundError:
    """The error for a decision on run ``run_id`` naming request ``request_id``, which is not one of its:
    ``run R has no steering request N``."""
    return RequestNotFoundError(f"run {run_id} has no steering request {request_id}")


def not_posted_there(request_id: int) -> RequestNotFoundError:
    """The error for a click naming request ``request_id`` on a message that is not one posted for it (a card
    of an older Hazel, whose buttons named the request only, after the database was reset or restored):
    ``no steering request N was posted in this message`` (whether a request N exists is not said)."""
    return RequestNotFoundError(f"no steering request {request_id} was posted in this message")


class NotAllowedError(HazelError, PermissionError):
    pass


class InvalidDecisionError(HazelError, ValueError):
    pass


class MissingEditValueError(InvalidDecisionError):
    """An edit that gives no new value: ``an edit needs a new value for field 'plan'``. The message names no
    channel's way of giving one; a channel whose person can leave it out says what to send there (the REST API:
    ``payload.value`` or ``payload.text``). The CLI, Slack and Jira ask for the value before the engine sees the
    edit (``hazel edit`` without ``--file`` or ``--set``, a Jira ``/edit`` without text; a Slack modal sends its
    inputs)."""


class EmptyEditError(InvalidDecisionError):
    """An edit (or a rewind's edits) that would leave a field or an entry empty or blank, refused because it did not
    allow that (``allow_empty``): ``the edit leaves field 'plan' empty: that would replace the value with
    nothing``, or ``… entry 'b.sql' of field 'scripts' blank (only whitespace) …``. The check is the engine's
    (``bot.engine.steering.edits``); how an empty value is given is each channel's to say, after ``message``:
    ``str(err)``, the console's, adds ``; add --allow-empty if that is what you mean`` (``hint``: the command that
    takes it, ``hazel edit --allow-empty`` or ``hazel rewind --allow-empty``); the REST API names its
    ``allow_empty``; a Slack modal and a Jira ``/edit``, which have no way to give one, name where it can be
    given (``hint``, and the REST API's ``allow_empty``)."""

    def __str__(self) -> str:
        return f"{self.message}; add --allow-empty if that is what you mean"

    def given_elsewhere(self, here: str, code: Callable[[str], str] = str) -> str:
        """Where an empty value can be given, for a channel with no way to give one (``here``: ``a Slack
        form``, ``a Jira comment``), each command or field as ``code`` marks it: ``; an empty value can be set
        with hazel edit --allow-empty or the REST API's allow_empty, not from a Slack form``; ``""`` without a
        ``hint``."""
        if not self.hint:
            return ""
        return (f"; an empty value can be set with {code(self.hint)} or the REST API's {code('allow_empty')}, "
                f"not from {here}")


class MissingRewindTargetError(InvalidDecisionError):
    """A rewind that names no checkpoint (neither a number nor a step name): ``rewind needs a target: a
    checkpoint number or a step name``. A channel may answer it with the checkpoints to choose from (Jira lists
    ``RequestView.rewind``); the REST API answers it as the ``InvalidDecisionError`` it is (422)."""


class InvalidInputError(HazelError, ValueError):
    pass


class ConfigurationError(HazelError, ValueError):
    """A setting is missing or malformed (the message names the variable, never a secret's value)."""


class RunStateError(HazelError, RuntimeError):
    pass


class StepContractError(HazelError, TypeError):
    pass


class AlreadyDecidedError(HazelError):
    """The request was settled before this decision (or this person already voted).

    Attributes: ``decided_by`` (who won, a label), ``decided_by_id`` and ``channel`` (their channel identity,
    e.g. a Slack user id, for mentions), ``decided_at`` (UTC), ``action`` (what they did), ``own`` (True when
    it was the same person's earlier vote: one person, one vote), ``request_id`` (the request refused, when
    known: for the audit log), ``changed`` (a rewind refused because the run changed since the page or form
    that sent it showed it: where the run is now and its last decision, ``it is now at #7, waiting, not #3;
    last approved by sam at …``; None otherwise).
    """

    def __init__(self, message: str, *, decided_by: str | None, decided_at: datetime | None,
                 action: str | None, decided_by_id: str | None = None, channel: str | None = None,
                 own: bool = False, request_id: int | None = None, changed: str | None = None) -> None:
        super().__init__(message)
        self.changed = changed
        self.own = own
        self.request_id = request_id
        self.decided_by = decided_by
        self.decided_by_id = decided_by_id
        self.channel = channel
        self.decided_at = decided_at
        self.action = action


def first_line(text: str) -> str:
    """The first line of ``text`` once its surrounding whitespace is left out (``""`` for a blank text)."""
    return (text.strip().splitlines() or [""])[0]


def error_line(exc: BaseException) -> str:
    """``exc`` in one line for a log or a stored error: ``OperationalError: (psycopg.OperationalError) terminating
    connection due to administrator command``, its class and the first line of its message (at most 300
    characters). A SQLAlchemy error's further lines (``[SQL: …]``, ``[parameters: …]``: what a step, a decision,
    a message carried, text of the users) and a driver's ``DETAIL`` lines (a unique key's values) are left out."""
    first = first_line(str(exc))
    first = first if len(first) <= 300 else first[:299] + "…"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def carries_statement(exc: BaseException) -> bool:
    """Whether ``exc``'s message holds a SQL statement and its bound parameters (SQLAlchemy's ``StatementError``:
    every error the database raised through SQLAlchemy, a schema that is not this Hazel's among them), which may
    hold users' text: such an error is logged as its ``error_line``, not with a traceback ending in its message."""
    module = sys.modules.get("sqlalchemy.exc")  # (not imported: SQLAlchemy has raised nothing)
    return module is not None and isinstance(exc, module.StatementError)


_DRIVERS = ("psycopg", "sqlite3")
"""The DB-API drivers whose own errors ``is_database_error`` knows (of those already imported)."""


def is_database_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an error of the database: SQLAlchemy's ``StatementError`` (``carries_statement``) or a
    driver's own (``psycopg.Error``, ``sqlite3.Error``: SQLAlchemy's error carries one as ``orig`` and is raised
    from it), whose further lines (PostgreSQL's ``DETAIL:`` and ``CONTEXT:``) may quote a row's values. Such an
    error is shown by its first line (``error_line``, ``traceback_text``)."""
    if carries_statement(exc):
        return True
    for name in _DRIVERS:
        module = sys.modules.get(name)  # (a driver not imported has raised nothing)
        if module is not None and isinstance(exc, module.Error):
            return True
    return False


def chained(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, what it was raised from or while handling (``__cause__``, ``__context__``) and, for an exception
    group, its members, each once: every error a traceback of ``exc`` shows."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__, *(e.exceptions if isinstance(e, BaseExceptionGroup) else ())]


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001  (a __str__ that raises: the traceback module shows a placeholder)
        return ""


def traceback_text(exc: BaseException) -> str:
    """``exc``'s traceback as Python prints it (``traceback.format_exception``), each database error in it
    (``is_database_error``, along ``chained``) shown by the first line of its message: ``sqlalchemy.exc.DataError:
    (psycopg.errors.NumericValueOutOfRange) integer out of range``, without SQLAlchemy's ``[SQL: …]`` and
    ``[parameters: …]`` lines or the driver's ``DETAIL:`` lines (the statement's values: a run's input, a
    person's text); so is any other error whose message quotes such a text (``without_statements``). The frames
    (files, lines, code) are kept: where it happened is no one's data."""
    text = "".join(traceback.format_exception(exc))
    for e in chained(exc):
        full = _text(e)
        safe = shown_text(e, full)
        if full and safe != full:
            text = text.replace(full, safe)
    return text


_STATEMENT_LINE = re.compile(r"^\s*\[SQL: ", re.MULTILINE)
"""A line of SQLAlchemy's text of a database error that starts its statement (``[SQL: INSERT …``); its
parameters (``[parameters: …]``) follow."""


def without_statements(text: str) -> str:
    """``text`` cut to its first line when it holds the text of a database error's statement (a line starting
    ``[SQL: ``: a message made with ``str()`` of SQLAlchemy's error, as a library's ``f"… (error: {e})"``),
    else ``text`` itself; its further lines would carry the statement, its parameters and the driver's detail."""
    if "[SQL: " not in text or not _STATEMENT_LINE.search(text):
        return text
    return first_line(text)


def shown_text(exc: BaseException, text: str) -> str:
    """``text`` (``str(exc)``) as a log, a stored error or a traceback shows it: a database error's
    (``is_database_error``) by its first line, any other's without a quoted statement (``without_statements``)."""
    return first_line(text) if is_database_error(exc) else without_statements(text)


def log_error(log: logging.Logger, exc: BaseException, message: str, *args: object) -> None:
    """Log ``message % args`` at ERROR for ``exc``: an error of the database (``is_database_error``: its message
    holds the SQL statement and its parameters, or the driver's detail, which may be users' text) as one line, ``message:
    <error_line(exc)>`` (its class and first line: ``ProgrammingError: (psycopg.errors.UndefinedColumn) column …
    does not exist``), without a traceback; any other error with its traceback (a bug to look at)."""
    if is_database_error(exc):
        log.error(message + ": %s", *args, error_line(exc))
    else:
        log.error(message, *args, exc_info=exc)
