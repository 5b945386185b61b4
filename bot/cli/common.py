"""What every CLI command shares: options, building the engine, printing, and one-line errors."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from typing import Annotated, Any, Callable, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from rich.markup import escape

from bot.engine.errors import HazelError
from bot.settings import Settings
from store.errors import StoreError
from store.models import Actor

F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
AsOpt = Annotated[str | None, typer.Option("--as", help="Record this name as the actor (default: $HAZEL_OPERATOR "
                                                        "or your user name).")]
DetachOpt = Annotated[bool, typer.Option("--detach", help="Only record it; let a worker (`hazel serve`) "
                                                          "continue the run.")]

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


_opened: list[Any] = []
"""Engines built by ``engine()`` for the running command; closed when it ends."""


class CliError(Exception):
    """A usage problem found by the CLI itself (bad --set syntax, unreadable file, …)."""


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


def engine(json_mode: bool = False, *, prepare: bool = True):  # noqa: ANN201
    """Build ``Hazel`` from the environment. In JSON mode console notifications go to stderr."""
    from bot.engine.hazel import Hazel
    from bot.server.wiring import channels_from_settings
    from integrations.console import ConsoleChannel

    settings = Settings()
    console = ConsoleChannel(console=err if json_mode else out, command=command_prefix())
    hazel = Hazel(settings, channels=channels_from_settings(settings), console=console)
    _opened.append(hazel)
    if prepare:
        hazel.prepare()
    return hazel


def actor(name: str | None, settings: Settings | None = None) -> Actor:
    """The console actor: ``--as NAME``, else ``HAZEL_OPERATOR`` / the user name.

    Raises:
        CliError: ``--as`` was given an empty name.
    """
    if name is not None and not name.strip():
        raise CliError("--as needs a name")
    who = (name or (settings or Settings()).operator).strip()
    return Actor(id=who, channel="console", name=who)


def safe_url(url: str) -> str:
    """A database URL fit to print: the password masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL at all: say so without echoing it
        return "(not a valid database URL)"


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(value), indent=2, default=str) + "\n")


def handle_errors(fn: F) -> F:
    """Turn Hazel's errors into one line on stderr (or a JSON error object) and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        json_mode = bool(kwargs.get("json_out"))
        try:
            return fn(*args, **kwargs)
        except (HazelError, StoreError, CliError, SQLAlchemyError, ValidationError) as exc:
            message = _one_line(exc)
            if json_mode:
                emit_json({"error": {"type": type(exc).__name__, "message": message}})
            else:
                err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
            raise typer.Exit(1) from None
        finally:
            while _opened:  # release the engine's connections when the command is done
                _opened.pop().close()

    return wrapper  # type: ignore[return-value]


def _one_line(exc: BaseException) -> str:
    """What went wrong, on one line; database errors name the database (password masked), not a traceback."""
    if isinstance(exc, ValidationError):  # the environment's settings
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        return f"invalid settings: {problems}"
    if isinstance(exc, SQLAlchemyError):
        cause = getattr(exc, "orig", None) or exc
        text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        return f"database {safe_url(os.environ.get('HAZEL_DATABASE_URL', 'sqlite:///hazel.db'))}: {text}"
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def when(ts: Any) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S") if ts else ""


def read_arg(text: str) -> str:
    """A CLI text argument; ``@path`` reads the file instead."""
    if not text.startswith("@"):
        return text
    try:
        with open(text[1:], encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise CliError(f"cannot read {text[1:]}: {exc.strerror}") from None


def coerce(raw: str, current: Any) -> Any:
    """A value typed on the command line, shaped like ``current``: text stays text for a text field,
    anything else is parsed as JSON when it can be (``42``, ``true``, ``{"a": 1}``)."""
    if isinstance(current, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def apply_sets(pairs: list[str], current: dict[str, Any]) -> dict[str, Any]:
    """``--set FIELD=VALUE`` / ``--set FIELD.KEY=VALUE`` (VALUE may be ``@file``) applied over ``current``
    (a state tree). Returns the changed fields with their new whole values."""
    changed: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"--set needs FIELD=VALUE, got {pair!r}")
        raw = read_arg(raw)
        field, dot, sub = key.partition(".")
        if field not in current:
            raise CliError(f"the state has no field {field!r} (fields: {', '.join(current)})")
        if dot:
            base = changed.get(field, current.get(field))
            if not isinstance(base, dict):
                raise CliError(f"--set {key}: {field} is not a mapping")
            changed[field] = {**base, sub: coerce(raw, base.get(sub))}
        else:
            changed[field] = coerce(raw, current.get(field))
    return changed
