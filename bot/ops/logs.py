"""Logs of ``hazel serve`` and ``hazel worker``: text or JSON lines carrying the run and steering request being
worked on, with every configured secret redacted.

- ``HAZEL_LOG_FORMAT``: ``text`` (``2025-01-01 12:00:00,123 INFO hazel.runner [run=ab12cd request=7] …``) or
  ``json`` (one object per line: ``time``, ``level``, ``logger``, ``message``, ``run_id``, ``request_id``, and
  ``exc_info`` for exceptions; python-json-logger's ``JsonFormatter``).
- ``HAZEL_LOG_LEVEL``: ``DEBUG``, ``INFO`` (default), ``WARNING``, ``ERROR``, ``CRITICAL``.

The runner, steering and the outbox deliverer bind ``run_id`` / ``request_id`` with ``@bind_log_context``
(context variables, so each thread and each HTTP request keeps its own); ``ContextFilter`` copies them onto
every record. ``RedactingFormatter`` replaces the value of every ``SecretStr`` setting (and the database URL's
password) in the formatted line, exceptions included, with ``**********``: a defence in depth, since Hazel
never logs a secret on purpose. It formats a record without the SQL statement, the parameters and the driver's
detail a database error's text carries (``without_database_text``), whoever logged it. The context itself lives
in ``bot.engine.logcontext``.

Under ``json`` the console channel of ``serve`` / ``worker`` logs its notifications (``hazel.console``,
``integrations.console_log.LoggingConsole``, chosen by ``bot.server.processes.console_for``) instead of printing
panels, so that every line those processes write is a JSON object and passes this redaction.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import TextIO

from bot.engine import LOG_CONTEXT_VARS as _VARS
from bot.engine import first_line, is_database_error, traceback_text, without_statements
from bot.settings import REDACTED, Redactor, Settings, secret_values
from integrations.terminal import for_terminal


class ContextFilter(logging.Filter):
    """Puts ``run_id`` and ``request_id`` (when bound) on each record that passes the handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _VARS.items():
            value = var.get()
            if value is not None and getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger [run=… request=…] message``; control characters a message carries (stored text in
    an error, say) shown as escapes (``integrations.terminal.for_terminal``): a log read in a terminal is never
    controlled by it. The further lines of a record (a message's own line breaks, a traceback) are indented by
    four spaces: only a record's first line starts at the margin, so no text a message carries can pass for a
    record of its own (``…\n2026-03-01 09:00:00,000 CRITICAL …`` in a step's error)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(hazel_context)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        parts = [f"run={record.run_id}" if getattr(record, "run_id", None) is not None else "",
                 f"request={record.request_id}" if getattr(record, "request_id", None) is not None else ""]
        context = " ".join(p for p in parts if p)
        record.hazel_context = f" [{context}]" if context else ""
        text = for_terminal(super().format(record))
        return text.replace("\n", "\n    ") if "\n" in text else text


def json_formatter() -> logging.Formatter:
    """One JSON object per line (python-json-logger), with ISO 8601 UTC times. (python-json-logger is imported
    here: only a process that logs JSON needs it, and it is ~4 ms of every ``hazel`` command's start.)"""
    from pythonjsonlogger.core import RESERVED_ATTRS
    from pythonjsonlogger.json import JsonFormatter

    return JsonFormatter("%(levelname)s %(name)s %(message)s", timestamp="time",
                         rename_fields={"levelname": "level", "name": "logger"}, json_ensure_ascii=False,
                         reserved_attrs=[*RESERVED_ATTRS, "color_message", "hazel_context"])


LINK_TOKEN = re.compile(r"((?:[?&;]|%3[bB]|%26)(?:t|%74)=)[^&;\s\"']+")
"""The token of a signed run link in a URL (``/runs/{id}?t=…``, ``bot.inbound.web.links``): uvicorn's access
log records every request's path with its query as the client sent it; a link ``hazel link --for`` made lets
whoever holds it act as that person until it expires. The key in any spelling a client may send: ``t`` or
percent-encoded (``%74``: the query parser decodes keys, so the server accepts it), after ``?``, ``&`` or ``;``
(a path parameter: not accepted, but a valid token all the same), or an encoded ``&`` / ``;``."""
SIGNED_TOKEN = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{20,}")
"""A signed token by its shape, wherever it stands in a line (a URL mangled past ``LINK_TOKEN``, a double-encoded
key): itsdangerous' ``URLSafeTimedSerializer`` writes the payload (JSON, so base64 of ``{"`` is ``eyJ``), the
timestamp and the signature (27 characters for HMAC-SHA1), each URL-safe base64, joined by dots."""


class RedactingFormatter(logging.Formatter):
    """Formats with ``inner`` what ``without_database_text`` leaves of a record, then replaces each of
    ``secrets`` (and its JSON-escaped form: ``Redactor``), the token of every signed run link (``LINK_TOKEN``)
    and any other signed token (``SIGNED_TOKEN``) by ``**********``."""

    def __init__(self, inner: logging.Formatter, secrets: list[str]) -> None:
        super().__init__()
        self.inner = inner
        self.redact = Redactor(secrets)

    def format(self, record: logging.LogRecord) -> str:
        text = self.redact(self.inner.format(without_database_text(record)))
        if "t=" in text or "%74=" in text:
            text = LINK_TOKEN.sub(r"\g<1>" + REDACTED, text)
        if "eyJ" in text:
            text = SIGNED_TOKEN.sub(REDACTED, text)
        return text


def without_database_text(record: logging.LogRecord) -> logging.LogRecord:
    """``record``, or a copy of it without what a database error's text carries past its first line (the SQL
    statement, its parameters, the driver's ``DETAIL:``: a run's input, a person's text): its traceback as
    ``bot.engine.traceback_text`` writes it (every database error in it by its first line), and a message that
    quotes such a text (``without_statements``: a library's ``f"Failed to run listener function (error:
    {e})"``; a ``%s`` of a database error, or of a driver's, whose ``DETAIL:`` lines come without a ``[SQL: …]``)
    cut to its first line. Whoever logged it (uvicorn's ``Exception in ASGI application`` after a REST 500,
    APScheduler, Bolt, Hazel's own ``log.exception``) and whatever the format (text or JSON). The record itself
    is left as it is, for other handlers."""
    exc = record.exc_info[1] if record.exc_info else None
    message = record.getMessage()
    args = record.args if isinstance(record.args, tuple) else (record.args,)
    if any(isinstance(arg, BaseException) and is_database_error(arg) for arg in args):
        first = first_line(message)
        safe = message if first == message else first
    else:
        safe = without_statements(message)
    if safe is message and exc is None:
        return record
    copy = logging.makeLogRecord(record.__dict__)
    copy.msg, copy.args = safe, None
    if exc is not None:  # (formatted here: the same text as ``Formatter.formatException`` for any other error)
        copy.exc_info, copy.exc_text = None, traceback_text(exc).rstrip("\n")
    return copy


_HANDLER_MARK = "_hazel_handler"
QUIET_LOGGERS = ("httpx", "apscheduler", "alembic", "slack_sdk")
"""Libraries logged at WARNING and above unless ``HAZEL_LOG_LEVEL=DEBUG`` (slack_sdk: a line per retry)."""


class _SlackSendFailureIsAWarning(logging.Filter):
    """slack_sdk logs ``Failed to send a request to Slack API server: …`` at ERROR before its retry handlers
    run and before it raises, and ``Failed to decode Slack API response: …`` at ERROR when Slack (or a proxy in
    front of it) answers with something that is not JSON, a 503 page of an outage (``BaseClient._urllib_api_call``,
    slack_sdk 3): the outbox retries the message and logs its own line with Slack's answer, so each is a WARNING
    (an alert on ERROR would page for a routine retry), and a command leaves it out (``_not_slacks_retries``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and str(record.msg).startswith(
                ("Failed to send a request to Slack", "Failed to decode Slack API response")):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_SLACK_CLIENT_LOGGER = logging.getLogger("slack_sdk.web.base_client")
if not any(isinstance(f, _SlackSendFailureIsAWarning) for f in _SLACK_CLIENT_LOGGER.filters):
    _SLACK_CLIENT_LOGGER.addFilter(_SlackSendFailureIsAWarning())


class StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when each record is emitted (so a swapped or closed stream, as
    test runners leave behind, is never written to)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:  # type: ignore[override]
        return sys.stderr


class MessageFormatter(logging.Formatter):
    """The message alone, as Python prints a warning when nothing configured logging, with the control
    characters it carries (a step's error) shown as escapes (``integrations.terminal.for_terminal``) and its
    further lines indented by four spaces, as ``TextFormatter`` does: only a message's first line starts at the
    margin, so no text it carries passes for a message of its own."""

    def format(self, record: logging.LogRecord) -> str:
        text = for_terminal(super().format(record))
        return text.replace("\n", "\n    ") if "\n" in text else text


def command_handler(settings: Settings) -> logging.Handler:
    """For a CLI command (not ``serve`` / ``worker``, which call ``configure_logging``): a handler that prints
    records of level WARNING and above (a step's failed attempt, a notification not delivered) to stderr, one
    message a line, control characters shown as escapes and secrets redacted. It is added to the root logger;
    the caller removes it (``logging.getLogger().removeHandler``) when the command ends."""
    handler = StderrHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(RedactingFormatter(MessageFormatter("%(message)s"), secret_values(settings)))
    handler.addFilter(_not_slacks_retries)  # (the command's own line says the notification waits)
    logging.getLogger().addHandler(handler)
    return handler


def _not_slacks_retries(record: logging.LogRecord) -> bool:
    """False for slack_sdk's records below ERROR (its send failures, demoted by
    ``_SlackSendFailureIsAWarning``): on a command's stderr Hazel's own line about the notification says it."""
    return not (record.name.startswith("slack_sdk") and record.levelno < logging.ERROR)


def configure_logging(settings: Settings, *, stream: TextIO | None = None) -> logging.Handler:
    """Send every log record (Hazel's, uvicorn's, the libraries') to ``stream`` (default stderr) in
    ``HAZEL_LOG_FORMAT`` at ``HAZEL_LOG_LEVEL``, replacing a handler installed by an earlier call. Returns the
    handler.

    Raises:
        ConfigurationError: an unknown ``HAZEL_LOG_LEVEL``.
    """
    from bot.engine import ConfigurationError

    level = logging.getLevelName(settings.log_level.strip().upper())
    if not isinstance(level, int):
        raise ConfigurationError(f"HAZEL_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, not {settings.log_level!r}")
    inner = json_formatter() if settings.log_format == "json" else TextFormatter()
    handler = logging.StreamHandler(stream) if stream is not None else StderrHandler()
    handler.setFormatter(RedactingFormatter(inner, secret_values(settings)))
    handler.addFilter(ContextFilter())
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Below DEBUG, quiet the chatter of libraries: httpx logs every request URL (hook URLs are the operator's
    # business, not the log's), APScheduler every tick, Alembic its plugins at every start.
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if level <= logging.DEBUG else max(level, logging.WARNING))
    return handler


def log_failure(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Log that ``what`` failed with ``exc``: one WARNING line when the database is unreachable
    (``bot.engine.is_transient``: a restart, a brief disconnect; the caller tries again), with the error's first
    line; else an ERROR (``bot.engine.log_error``: one line for another database error, else with the
    traceback)."""
    from bot.engine import error_line, is_transient, log_error

    if is_transient(exc):
        log.warning("%s: the database is unreachable (%s); trying again", what, error_line(exc))
    else:
        log_error(log, exc, "%s failed", what)
