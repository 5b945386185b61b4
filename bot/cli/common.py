"""What every CLI command shares: options, building the engine, printing, and one-line errors."""

from __future__ import annotations

import functools
import gc
import json
import logging
import os
import re
import shutil
import sys
from typing import TYPE_CHECKING, Annotated, Any, Callable, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from store.models import Actor

# Only typer is imported here: the command modules import this one, and `hazel --help` must not pay for rich,
# pydantic, SQLAlchemy or the engine. Each command imports what it uses when it runs.

F = TypeVar("F", bound=Callable[..., Any])
INT_MAX = 2**31 - 1
"""The largest number a CLI option takes (a checkpoint number, a limit, an id): what every database column
holds."""

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
AsOpt = Annotated[str | None, typer.Option("--as", help="Act for this person: recorded as \"operator YOU for NAME\", "
                                                        "NAME's one vote (refused where a quorum or a self-approval "
                                                        "ban applies unless the point lists NAME). You are "
                                                        "$HAZEL_OPERATOR, else your login name.")]
DetachOpt = Annotated[bool, typer.Option("--detach", help="Only record it; let a worker (`hazel serve`) "
                                                          "continue the run.")]
def _request_id(text: str) -> int:
    """``--request N``: digits only, 1..2**31-1 (``int()`` would also take ``41_0``, `` 41`` and ``+41``: a
    typo could pin another request).

    Raises:
        typer.BadParameter: anything else (a usage error: exit status 2).
    """
    text = str(text)
    if not re.fullmatch(r"[0-9]+", text) or not 1 <= int(text) <= INT_MAX:
        raise typer.BadParameter(f"{text!r} is not a request id: a whole number 1..{INT_MAX} (hazel show RUN gives "
                                 "it)")
    return int(text)


RequestOpt = Annotated[int | None, typer.Option("--request", parser=_request_id, metavar="N",
                                               help="The request you answer (its id: `hazel show RUN` and the "
                                                    "printed commands give it). Refused, with who decided and when, "
                                                    "once that request was settled, even if its point asked again "
                                                    "since (a redraft after feedback).")]
"""``--request N`` of the decision commands: the id of the steering request (the version of the artefact) the
operator reviewed; the engine's ``request_id`` (``Hazel.decide``)."""


def __getattr__(name: str) -> Any:
    """``out`` and ``err``: the rich Consoles of stdout and stderr, built on first use (``common.out``). They
    are ``SafeConsole``s: stored text never controls the terminal (``integrations.terminal``)."""
    if name in ("out", "err"):
        from integrations.terminal import SafeConsole

        made = globals()[name] = SafeConsole(stderr=name == "err")
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def console(name: str) -> "Console":
    """``out`` or ``err`` (see ``__getattr__``), for code of this module."""
    return globals().get(name) or __getattr__(name)


_opened: list[Any] = []
"""Engines built by ``engine()`` for the running command; closed when it ends."""
_stdin_read: list[bool] = []
"""Holds True once an argument of the running command read standard input (``read_file("-")``): a second
``@-`` would read nothing, and is refused instead of taking the empty text as its value."""


class CliError(Exception):
    """A problem found by the CLI itself (bad --set syntax, unreadable file, …): exit status 1.

    Args:
        output: the command's own JSON document, when it has one to print all the same (a run it drove into
            ``failed``: ``bot.cli.ended``): with ``--json``, ``handle_errors`` prints it with the error as its
            ``"error"`` member, one document, instead of the error alone.
    """

    def __init__(self, message: str, *, output: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.output = output


def usage_error(option: str, message: str) -> Exception:
    """A value of ``option`` (``"--status"``) that the command cannot take, found after parsing: a usage error
    like Click's own (an unknown choice, a number out of range), one line on stderr and exit status 2:
    ``error: Invalid value for '--status': 'bogus' is not a run status (one of: …) (see `hazel runs --help`)``.
    Raise the returned exception inside a command."""
    return typer.BadParameter(message, param_hint=f"'{option}'")


def command_prefix() -> str:
    """How the user invoked the CLI, for the commands we print back: ``hazel`` when that is on PATH,
    else the path they used (``.venv/bin/hazel``)."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "hazel"
    found = shutil.which("hazel")
    try:
        if found and os.path.samefile(found, argv0):
            return "hazel"
    except OSError:
        pass
    if os.path.basename(argv0) != "hazel":
        return "hazel"
    rel = os.path.relpath(argv0)
    return rel if not rel.startswith("..") else argv0


def engine(json_mode: bool = False, *, prepare: bool = True, reads_only: bool = False):  # noqa: ANN201
    """Build ``HazelApp`` (the engine with its channels) from the environment. In JSON mode the console
    channel prints nothing (the JSON output holds the run and its pending request; stderr stays for errors).

    ``reads_only`` (commands that only read: ``runs``, ``show``, ``history``, ``audit``, ``outbox``): the runs
    of dead processes are handed back if the database takes the write; if it does not (a full disk, another
    process holding SQLite's write lock for the whole busy timeout), a warning says so and the command reads
    on, the runs shown as stored. Every other command fails as before: it is about to write."""
    from bot.cli.console import CommandConsole
    from bot.server.app import HazelApp
    from bot.server.wiring import channels_from_settings
    from bot.settings import Settings, warn_unknown_settings

    settings = Settings()
    _settings[:] = [settings]  # (for the error line: ``_redacted``)
    _log_warnings(settings)
    warn_unknown_settings()
    if json_mode:
        from rich.console import Console

        printer = Console(quiet=True)
    else:
        printer = console("out")
    channel = CommandConsole(console=printer, command=command_prefix())
    hazel = HazelApp(settings, channels=channels_from_settings(settings), console=channel)
    _opened.append(hazel)
    if prepare and reads_only:
        hazel.store.ensure_schema()
        if _clock_fits(hazel, reads_only=True):
            _recover_if_writable(hazel)
    elif prepare:
        hazel.store.ensure_schema()
        _clock_fits(hazel, reads_only=False)
        hazel.recover()
    started()
    return hazel


def _clock_fits(hazel: Any, *, reads_only: bool) -> bool:
    """Whether this host's clock is near enough the database server's for the command's clock work (handing back
    runs whose lease ran out, a new request's deadline): ``hazel serve``'s check (``check_clock``: PostgreSQL
    only; a host 90 s ahead made a read-only ``hazel runs`` take a live run, whose step then ran twice at once,
    and one 2 h behind had a 1-hour timeout fire as it was asked: a fresh-operator finding, s33 F1). A reading
    command reads on without handing runs back, saying why (False); any other is refused.

    Raises:
        ConfigurationError: the clock is too far off and the command writes.
    """
    from bot.engine import ConfigurationError
    from bot.server.clock import check_clock

    try:
        check_clock(hazel)
    except ConfigurationError as exc:
        if not reads_only:
            raise
        warning = f"runs whose lease ran out were not handed back: {exc}"
        start_up_warnings.append(warning)
        logging.getLogger("hazel.cli").warning("%s", warning)
        return False
    return True


def _recover_if_writable(hazel: Any) -> None:
    """``hazel.recover()``; a database error of its write is a warning instead (``engine(reads_only=True)``)."""
    from sqlalchemy.exc import OperationalError

    try:
        hazel.recover()
    except Exception as exc:
        busy = _busy(exc)
        if not (busy or isinstance(exc, OperationalError)):
            raise
        why = _lock_held() if busy else _database_text(exc)
        warning = (f"runs left running by a dead process were not handed back ({why}): they are shown as stored; "
                   "the next command that writes hands them back")
        start_up_warnings.append(warning)
        logging.getLogger("hazel.cli").warning("%s", warning)


start_up_warnings: list[str] = []
"""What the command's start-up warned of on stderr (``_recover_if_writable``), for a command's JSON output to
carry as well (``hazel show --json``: ``warnings``)."""


_handlers: list[Any] = []
"""The log handler of the running command (``bot.ops.logs.command_handler``); removed when it ends."""


def _log_warnings(settings: Any) -> None:
    """Print the command's warnings (a step's failed attempt: the engine logs it) on stderr as every other line
    of the CLI is printed: stored text in them shown as escapes, never obeyed by the terminal."""
    from bot.ops.logs import command_handler

    if not _handlers:
        _handlers.append(command_handler(settings))


def started() -> None:
    """Start-up is over: what it built lives until exit, so it is frozen out of the collector's sight, and the
    cycle collector (off since ``bot.cli.main``) is turned back on for the command's own work: workflow steps,
    ``serve`` and ``worker``. A no-op where the collector is on (``app`` called without ``main``, as tests do)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def actor(hazel: Any, name: str | None) -> "Actor":
    """The console actor: the operator (``HAZEL_OPERATOR`` / the user name), acting for ``--as NAME``.

    Raises:
        typer.BadParameter: ``--as`` was given an empty name, or one with a line break or another control
            character (a usage error: exit status 2).
    """
    if name is not None and not name.strip():
        raise usage_error("--as", "needs a name")
    from bot.settings import name_problem

    problem = name_problem(name.strip()) if name is not None else None  # (spaces around it: dropped, as ever)
    if problem:
        raise usage_error("--as", problem)
    return hazel.operator(acting_for=name)


def safe_url(url: str) -> str:
    """A database URL fit to print: the password masked as the logs mask a secret (``user:**********@``, and
    ``?password=**********``, which libpq takes as well); one without a password as it was given."""
    from sqlalchemy.engine import make_url

    from bot.settings import REDACTED

    try:
        parsed = make_url(url)
        if parsed.password is None and "password" not in parsed.query:  # as given (rendered, ``file:`` read
            return url.strip()  # ``file%3A``)
        if parsed.password is not None:
            parsed = parsed.set(password=_MASK)
        if "password" in parsed.query:
            parsed = parsed.update_query_dict({"password": _MASK})
        return parsed.render_as_string(hide_password=False).replace(_MASK, REDACTED)
    except Exception:  # not a URL at all: say so without echoing it
        return _NOT_A_URL


_NOT_A_URL = "(not a valid database URL)"
_MASK = "hazelpasswordmasked7f3a9c"
"""Put where a URL's password was, then replaced by ``**********`` once rendered (letters and digits: the
rendering leaves them as they are, where it would quote ``*``)."""


def to_jsonable(value: Any, *, whole: bool = False) -> Any:
    """``value`` as JSON's types: pydantic models dumped, lists and mappings gone through. A run's ``error`` and
    ``error_traceback`` are cut at ``ERROR_JSON_CHARS`` characters, saying how many more there are and that
    ``hazel show RUN --full`` prints them (``store.models.shown_error``), unless ``whole``: the database keeps
    them whole."""
    from pydantic import BaseModel

    from store.models import ERROR_JSON_CHARS, Run, shown_error

    if isinstance(value, Run):
        data = value.model_dump(mode="json")
        for key in ("error", "error_traceback") if not whole else ():
            if data.get(key):
                data[key] = shown_error(data[key], run_id=value.id, max_chars=ERROR_JSON_CHARS,
                                        command=command_prefix())
        return data
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, whole=whole) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v, whole=whole) for k, v in value.items()}
    return value


def emit_json(value: Any, *, whole: bool = False) -> None:
    """``value`` as indented JSON (ASCII) and a newline on stdout, written whole: with ``PYTHONUNBUFFERED=1``
    stdout's text layer writes straight to the file descriptor and drops what a short write left (a pipe whose
    reader went away after taking some: the rest was lost and the command ended 0, not 141). Raises
    ``BrokenPipeError`` when the reader is gone (``handle_errors`` ends the command quietly then). ``whole``: a
    run's error and traceback whole (``to_jsonable``; ``hazel show RUN --full --json``)."""
    from integrations.terminal import write_whole

    write_whole(sys.stdout, json.dumps(to_jsonable(value, whole=whole), indent=2, default=str) + "\n")


EXIT_BROKEN_PIPE = 141
"""The exit status when stdout's reader closed it: 128 + SIGPIPE, as a tool killed by the signal ends."""
EXIT_INTERRUPTED = 130
"""The exit status after Ctrl-C: 128 + SIGINT, as a shell reports a command the signal ended."""

_driving: list[str] = []
"""The runs the running command has executed (``bot.cli.runs.drive``), for the line Ctrl-C prints."""
_document: list[dict[str, Any]] = []
"""What the running command recorded before it executes a run (``recorded``), for the JSON document Ctrl-C
prints."""


def recorded(members: dict[str, Any]) -> None:
    """Keep ``members`` of the running command's JSON document that stand whatever happens next (a decision
    command's ``decision``, ``request``, ``settled``, …: recorded before it executes the run): with ``--json``,
    Ctrl-C prints them in its document (``_interrupted``), so that a script knows the decision was taken."""
    _document[:] = [members]


def _interrupted(json_mode: bool) -> None:
    """Say what Ctrl-C left: the run the command was executing, whose step cut short runs again from its last
    checkpoint (the next command on this host, or the lease's expiry elsewhere, hands it back: ``ready``), in
    ``hazel serve`` / ``hazel worker`` or through ``hazel retry RUN`` here. With ``json_mode``, the command's
    JSON document as far as it got (``recorded``; the run and its pending request as stored now, ``_run_now``)
    with that line as its ``"error"`` member, ``{"type": "KeyboardInterrupt", "message": …}``; the error object
    alone when the command had recorded nothing."""
    run_id = _driving[-1] if _driving else None
    message = "interrupted" + (f": run {run_id} was executing; a step cut short runs again from its last "
                               f"checkpoint: `{command_prefix()} retry {run_id}` continues it here, or `hazel "
                               "serve` / `hazel worker`" if run_id else "")
    if json_mode:
        document = {**(_document[0] if _document else {}), **(_run_now(run_id) if run_id else {})}
        emit_json({**document, "error": {"type": "KeyboardInterrupt", "message": message}})
    console("err").print(message, soft_wrap=True, markup=False)


def _run_now(run_id: str) -> dict[str, Any]:
    """``{"run": …, "pending_request": …}`` of ``run_id`` as stored now, read through the command's engine;
    ``{}`` when they cannot be read (no engine, the database gone: Ctrl-C's document goes without them)."""
    if not _opened:
        return {}
    try:
        return {"run": _opened[-1].get(run_id=run_id), "pending_request": _opened[-1].pending_request(run_id=run_id)}
    except Exception:  # noqa: BLE001 (the interruption is what is reported)
        return {}


def _stdout_to_devnull() -> None:
    """Point stdout's file descriptor at ``/dev/null``, so that the interpreter's flush of stdout at exit does
    not fail again (Python's documentation, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # (no real file descriptor: a test's captured stdout)
        pass


def handle_errors(fn: F) -> F:
    """Turn every error into one line on stderr and exit status 1; with ``--json``, also a JSON object
    ``{"error": {"type", "message"}}`` on stdout (the ``"error"`` member of the command's own document when the
    error carries one: ``CliError.output``). Hazel's own errors (``_REPORTED``) say what went wrong; any
    other exception is a fault of Hazel's, reported as "unexpected …" in one line too (``HAZEL_DEBUG=1``
    lets its traceback through). Output cut short because stdout's reader went away (a ``BrokenPipeError``)
    ends the command quietly, with status ``EXIT_BROKEN_PIPE`` (141), as a Unix tool ends on SIGPIPE: what it
    did before stays done."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        json_mode = bool(kwargs.get("json_out"))
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:  # stdout's reader went away (``hazel runs | head -1``): as a Unix tool ends then
            _stdout_to_devnull()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None
        except KeyboardInterrupt:  # Ctrl-C: one line on what it left, status 130
            _interrupted(json_mode)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if isinstance(exc, (typer.Exit, typer.Abort, typer.TyperException)):  # Click's own ending
                raise
            if not _reported(exc) and os.environ.get("HAZEL_DEBUG") == "1":
                raise
            try:
                _report(exc, json_mode)
            except BrokenPipeError:  # (the JSON document cut short: as above)
                _stdout_to_devnull()
                raise typer.Exit(EXIT_BROKEN_PIPE) from None
            raise typer.Exit(1) from None
        finally:
            _driving.clear()
            _document.clear()
            start_up_warnings.clear()
            _error_log.clear()
            _stdin_read.clear()
            _settings.clear()
            while _opened:  # release the engine's connections when the command is done
                _opened.pop().close()
            while _handlers:
                import logging

                logging.getLogger().removeHandler(_handlers.pop())

    return wrapper  # type: ignore[return-value]


def _report(exc: Exception, json_mode: bool) -> None:
    """``exc`` as one line on stderr (``error: …``, or a record of ``_error_log``); with ``json_mode`` first as
    ``{"error": {"type", "message"}}`` on stdout, the member of the command's own document when the error
    carries one (``CliError.output``)."""
    message = _redacted(_one_line(exc))
    if json_mode:
        output = exc.output if isinstance(exc, CliError) and exc.output is not None else {}
        emit_json({**output, "error": {"type": type(exc).__name__, "message": message}})
    if _error_log:  # serve / worker logging JSON: the error is a record of that log too
        _error_log[0].error("%s", message)
        return
    from rich.markup import escape

    console("err").print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)


_error_log: list[Any] = []
"""The logger that takes the running command's error line instead of stderr (``log_errors``)."""


def log_errors(logger: Any) -> None:
    """Make the running command's error (``handle_errors``) a record of ``logger`` (a ``logging.Logger``), at
    ERROR, instead of a line on stderr: ``serve`` and ``worker`` under ``HAZEL_LOG_FORMAT=json``, whose every
    line is a JSON object. The record goes through the log handler, so its redaction applies too."""
    _error_log[:] = [logger]


_settings: list[Any] = []
"""The settings of the running command's engine, once ``engine()`` has read them."""


def _redacted(message: str) -> str:
    """``message`` with every secret setting's value replaced by ``**********`` (``bot.settings.Redactor``): an
    error may quote the environment (a workflow module that failed to import with a token in its exception,
    a driver's error with the database URL). The command's settings, else the environment's, read now; as
    given when the settings cannot be read (their own errors never show a value)."""
    from bot.settings import Redactor, Settings, secret_values

    try:
        settings = _settings[0] if _settings else Settings()
    except Exception:  # noqa: BLE001 (malformed settings: their message holds no value, hide_input_in_errors)
        return message
    return Redactor(secret_values(settings))(message)


_REPORTED = {"HazelError": "bot.engine", "StoreError": "store.errors", "SQLAlchemyError": "sqlalchemy.exc",
             "ValidationError": "pydantic_core", "EnvFileError": "bot.settings"}
"""The errors ``handle_errors`` reports in one line (with ``CliError``), and the modules that define them."""


def _loaded(name: str) -> type[BaseException] | None:
    """The error class ``name`` of ``_REPORTED`` if its module is loaded, else None: an exception of that class
    cannot have been raised before its module was imported, so none is imported here (an error exits fast)."""
    module = sys.modules.get(_REPORTED[name])
    return getattr(module, name, None) if module is not None else None


def _reported(exc: BaseException) -> bool:
    """Whether ``exc`` is one of the errors reported in one line: ``HazelError``, ``StoreError``, ``CliError``,
    ``SQLAlchemyError``, pydantic's ``ValidationError``, ``bot.settings.EnvFileError`` (a malformed ``.env``),
    or SQLite's "database is locked" as the driver raised it (``_busy``)."""
    return isinstance(exc, CliError) or _busy(exc) or any(
        cls is not None and isinstance(exc, cls) for cls in map(_loaded, _REPORTED))


def _busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's ``SQLITE_BUSY`` (``store.db.is_sqlite_busy``): the driver's own error (raised
    where Hazel begins a transaction on the driver's connection) or SQLAlchemy's wrapping of it. (``store.db`` is
    not imported for it: no database error was raised without it.)"""
    db = sys.modules.get("store.db")
    return db is not None and db.is_sqlite_busy(exc)


def _busy_line() -> str:
    """What a command says when SQLite's write lock stayed taken for the whole busy timeout (``_busy``): the
    database, the wait, what stands and what to do. Nothing of the transaction that met it was written; a
    command that was executing a run (``_driving``) had recorded its decision or start before, and its run,
    left ``running``, continues as after Ctrl-C."""
    busy = f"the database is busy ({safe_url(_database_url())}): {_lock_held()}"
    if not _driving:
        return f"{busy}; nothing was recorded: try again"
    return busy + _left_running("is free")


def _lock_held() -> str:
    """``another process has held SQLite's write lock for 30 s`` (the busy timeout, ``store.db.BUSY_TIMEOUT_MS``)."""
    from store import db

    return f"another process has held SQLite's write lock for {db.BUSY_TIMEOUT_MS / 1000:g} s"


def _database_text(exc: BaseException) -> str:
    """A database error's own words: the first line of the driver's error it wraps (``orig``), else of ``exc``;
    its class name when it has none."""
    cause = getattr(exc, "orig", None) or exc
    return _first_line(str(cause).strip()) if str(cause).strip() else type(cause).__name__


def _left_running(when: str) -> str:
    """What stands after a database error that stopped a command executing a run (``_driving``): its decision
    or start was committed before, and its run, left ``running``, continues as after Ctrl-C once the database
    ``when`` (``is free``, ``takes writes again``)."""
    run_id = _driving[-1]
    return (f"; what this command recorded before stands, and run {run_id} was executing: a step cut short runs "
            f"again from its last checkpoint: `{command_prefix()} retry {run_id}` continues it here once the "
            f"database {when}, or `hazel serve` / `hazel worker`")


def _first_line(text: str) -> str:
    """``text`` up to its first line break (``\n``, ``\r``): not ``str.splitlines``, which also breaks at form
    feeds, NEL, U+2028 and the like, so that an error quoting stored text was cut there (they are shown as
    escapes on the line instead)."""
    return _LINE_BREAK.split(text, maxsplit=1)[0]


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _one_line(exc: BaseException) -> str:
    """What went wrong, on one line; database errors name the database (password masked), not a traceback."""
    ValidationError, SQLAlchemyError = _loaded("ValidationError"), _loaded("SQLAlchemyError")  # noqa: N806
    if _busy(exc):  # (also the driver's own error, which is no SQLAlchemyError)
        return _busy_line()
    if ValidationError is not None and isinstance(exc, ValidationError):  # the environment's settings
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors())
        return f"invalid {'settings' if exc.title == 'Settings' else exc.title}: {problems}"
    if SQLAlchemyError is not None and isinstance(exc, SQLAlchemyError):
        text = _database_text(exc)
        url = safe_url(_database_url())
        if url == _NOT_A_URL:
            return f"HAZEL_DATABASE_URL is not a valid database URL: {text}"
        if text == "unable to open database file":  # SQLite says no more: what stands in the way, when known
            from store.db import unopened_why

            text += unopened_why(_database_url())
        # (a full disk part-way through `approve` or `run`: what it committed before stands; s18 M1)
        return f"database {url}: {text}" + (_left_running("takes writes again") if _driving else "")
    if isinstance(exc, RecursionError):
        return "a value is nested too deeply (JSON nested more than about 900 levels)"
    if isinstance(exc, UnicodeDecodeError) and os.path.exists(".env"):  # pydantic-settings reading it
        return f"cannot read .env: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    if isinstance(exc, UnicodeEncodeError):  # text Hazel cannot store, from an argument or the environment
        return ("an argument or setting is not UTF-8 text (a byte that is not UTF-8 became "
                f"{exc.object[exc.start]!r}): give it as UTF-8")
    text = str(exc).strip()
    first = _first_line(text) if text else type(exc).__name__
    if type(exc).__name__ == "UnsupportedDatabaseError":
        return f"HAZEL_DATABASE_URL: {first}"
    if not _reported(exc):
        return f"unexpected {type(exc).__name__}: {first} (HAZEL_DEBUG=1 shows where)"
    from store.models import plain_mentions

    return plain_mentions(first)  # (the engine names unclaimed Slack ids as Slack mentions: <@U…>)


def _database_url() -> str:
    """The database URL the command used: the settings' (the environment, else ``.env``, else the default), or
    the environment's when the settings cannot be read."""
    try:
        from bot.settings import Settings

        return Settings().database_url
    except Exception:  # settings that fail to load are reported on their own; name what the environment says
        return os.environ.get("HAZEL_DATABASE_URL", "sqlite:///hazel.db")


def when(ts: Any) -> str:
    """``YYYY-MM-DD HH:MM:SS`` of ``ts`` (its year zero-padded: strftime's ``%Y`` printed year 3 as ``3``)."""
    return ts.isoformat(" ", "seconds")[:19] if ts else ""


def read_arg(text: str) -> str:
    """A CLI text argument; ``@path`` reads the file instead, ``@-`` standard input (``read_file``); ``@@…`` is
    the text ``@…`` itself (feedback that starts with a mention: ``"@@sam please shorten"``).

    Raises:
        CliError: as ``read_file``; a file that does not exist says how to write a literal ``@``.
    """
    if text.startswith("@@"):
        return text[1:]
    if not text.startswith("@"):
        return text
    try:
        return read_file(text[1:])
    except CliError as exc:
        if text[1:] != "-" and not os.path.exists(text[1:]):
            raise CliError(f"{exc} (text starting with @ names a file to read: write @@ for a literal @)") from None
        raise


def read_file(path: str, *, what: str | None = None) -> str:
    """The text of the file ``path`` (UTF-8; ``-``: standard input), without its one final line end: a file's last ``\n`` (or
    ``\r\n``) ends its last line and is not part of the value, so that ``hazel show RUN --raw > f`` (which
    ends the value with one added ``\n``) and ``hazel edit RUN --file f`` give back the stored value byte for
    byte, whether or not it ends with a newline itself. A final ``\r\n`` is one line end when every other line
    break of the file is ``\r\n`` too (a Windows editor's file); otherwise only its ``\n`` is (so a value
    ending in ``\r`` round-trips). A UTF-8 byte-order mark at its start (Notepad's "UTF-8 with BOM") is dropped.

    Files larger than ``HAZEL_MAX_STATE_BYTES`` (``Settings.max_state_bytes``) are refused before they are read
    (their size, or for a pipe the bytes read up to one past the limit).

    Standard input is read once per command: a second ``-`` is refused (it would read nothing). A file named
    ``-`` is ``./-``.

    Raises:
        CliError: the file cannot be read, is over the limit, or is not UTF-8 text (or holds a NUL byte);
            standard input was read already by another argument of the command.
    """
    what = what or ("standard input" if path == "-" else path)
    if path == "-":
        if _stdin_read:
            raise CliError("standard input was read already by another `@-` or `--file -` of this command; only "
                           "one argument can read it (give the others as @FILE)")
        _stdin_read.append(True)
    limit = _max_file_bytes()
    over = f"{what} is over the limit of {limit:,} bytes (HAZEL_MAX_STATE_BYTES)"
    try:
        if path == "-":  # `--input @-`, `--file -`: what is piped in
            data = sys.stdin.buffer.read(limit + 1)
        else:
            data = _read_limited(path, what, limit)
    except OSError as exc:
        raise CliError(f"cannot read {what}: {exc.strerror or type(exc).__name__}") from None
    if len(data) > limit:
        raise CliError(over)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"cannot read {what}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                       f"{exc.start})") from None
    if "\x00" in text:  # not text; and PostgreSQL's JSON cannot hold it (nothing would be stored)
        raise CliError(f"cannot read {what}: it holds a NUL byte (at offset {data.index(0)}): not a text file")
    text = text.removeprefix("\ufeff")  # a Windows editor's byte-order mark: how the file was saved, not the value
    if text.endswith("\r\n") and "\r\n" in text[:-2] and "\n" not in text[:-2].replace("\r\n", ""):
        return text[:-2]  # a file whose line breaks are all CRLF (a Windows editor's): its last one too
    return text[:-1] if text.endswith("\n") else text


def _read_limited(path: str, what: str, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of the file ``path``; one whose size is over ``limit`` is refused unread.

    Raises:
        CliError: over the limit. OSError: the file cannot be read.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise CliError(f"{what} is {size:,} bytes, over the limit of {limit:,} bytes (HAZEL_MAX_STATE_BYTES)")
        return fh.read(limit + 1)


def _max_file_bytes() -> int:
    """The largest input file the CLI reads: ``max_state_bytes`` of the running command's settings."""
    if _opened:
        return _opened[-1].settings.max_state_bytes
    from bot.settings import Settings

    return Settings().max_state_bytes


def apply_sets(pairs: list[str], current: dict[str, Any], entries: dict[str, Any] | None = None) -> dict[str, Any]:
    """``--set FIELD=VALUE`` / ``--set FIELD.KEY=VALUE`` (VALUE may be ``@file``) applied over ``current``
    (a state tree), each VALUE parsed as the engine parses typed edits (text for a text field, else JSON:
    ``bot.engine.value_from_text``). Returns the changed fields with their new whole values (a rewind's
    ``edits``). ``entries``: what a new entry of each mapping field is parsed like, as its workflow declares it
    (``Hazel.declared_entries``).

    Raises:
        typer.BadParameter: malformed ``--set`` (no ``=``, no FIELD): a usage error, exit status 2.
        CliError: an unknown field, a key of something that is not a mapping.
        InvalidDecisionError: a value that must be JSON is not.
    """
    from bot.engine import UNDECLARED, value_from_text

    changed: dict[str, Any] = {}
    for field, sub, raw in _parse_sets(pairs):
        if field not in current:
            raise CliError(f"the state has no field {field!r} (fields: {', '.join(current)})")
        if sub is not None:
            base = changed.get(field, current.get(field))
            if base is None:  # an unset optional mapping (its first entry) or model (made: s34 F2): the engine
                base = {}  # validates what it makes
            if not isinstance(base, dict):
                raise CliError(f"--set {field}.{sub}: {field} is not a mapping")
            declared = (entries or {}).get(field, UNDECLARED)
            changed[field] = _set_at(base, sub, raw, field, declared)
        else:
            changed[field] = value_from_text(current.get(field), raw, field=field)
    return changed


def _set_at(base: dict[str, Any], path: str, raw: str, field: str, declared: Any) -> dict[str, Any]:
    """``base`` (a mapping, or a model's value) with the entry at ``path`` set from ``raw``: a key of ``base``
    as it is (``b.sql``), else a dotted path into the mapping or model value its first part holds
    (``leaf.a``; ``maybe.a`` makes ``maybe`` when it is null), else a new key. The engine refuses a key a
    model does not declare (``bot.engine.steering.edits.refuse_undeclared_inside``; s33 F1: ``cfg.leaf.a`` was
    the key ``leaf.a`` of ``cfg``, dropped without a word)."""
    from bot.engine import UNDECLARED, entry_value, value_from_text

    head, dot, rest = path.partition(".")
    if path not in base and dot and rest and head in base and (base[head] is None or isinstance(base[head], dict)):
        return {**base, head: _set_at(base[head] or {}, rest, raw, f"{field}.{head}", UNDECLARED)}
    return {**base, path: value_from_text(entry_value(base, path, declared), raw, field=field, key=path)}


def edit_sets(pairs: list[str], show: str | None) -> dict[str, Any]:
    """``hazel edit --set`` as the engine's edit payload: ``--set FIELD=VALUE`` of the shown field is its new
    text (``{"text": …}``), ``--set FIELD.KEY=VALUE`` new texts of entries (``{"entries": {KEY: …}}``); with
    the whole state shown, ``--set FIELD=VALUE`` sets that entry of the state and ``--set FIELD.KEY=VALUE`` the
    entry at that path inside it (``cfg.limit``). The engine parses and validates them.

    Raises:
        typer.BadParameter: malformed ``--set`` (a usage error, exit status 2).
        CliError: a field the steering point does not show.
    """
    entries: dict[str, str] = {}
    whole: str | None = None
    for field, sub, raw in _parse_sets(pairs):
        name = field if sub is None else f"{field}.{sub}"
        if show is None:  # (``FIELD.KEY``: a path into the field, which the engine follows: s33 F8)
            entries[name] = raw
        elif name == show:  # (a shown name may hold a dot: a LangGraph node sent twice asks as ``each.2``)
            whole = raw
        elif name.startswith(f"{show}."):
            entries[name[len(show) + 1:]] = raw
        else:
            raise CliError(f"this steering point lets you edit {show!r} only, not {field}")
    if whole is not None and entries:
        raise CliError(f"--set {show}=… replaces the whole {show}: do not combine it with --set {show}.KEY=…")
    return {"text": whole} if whole is not None else {"entries": entries}


def _parse_sets(pairs: list[str]) -> list[tuple[str, str | None, str]]:
    """``(field, key or None, value)`` of each ``--set FIELD[.KEY]=VALUE`` (``@file`` values read).

    Raises:
        typer.BadParameter: a pair without ``=``, without FIELD, or with an empty KEY (``scripts.=x``, ``.a=x``: a
            usage error, exit status 2).
    """
    out = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise usage_error("--set", f"needs FIELD=VALUE, got {pair!r}")
        field, dot, sub = key.partition(".")
        if not field.strip() or (dot and not sub.strip()):
            raise usage_error("--set", f"needs FIELD=VALUE or FIELD.KEY=VALUE with a FIELD and a KEY, got {pair!r}")
        out.append((field, sub if dot else None, read_arg(raw)))
    return out
