"""The ``hazel`` command line: the console channel, and the way to run and operate Hazel."""

from __future__ import annotations

import copy
import gc
import re
import sys
from typing import Any

import typer
from typer._click import exceptions as click_errors  # the Click that typer vendors (and raises)
from typer.core import TyperGroup

from bot.cli import demo, link, ops, prune, runs, steer


_CONTROL = "[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
"""What ``integrations.terminal.for_terminal`` escapes in one line: inlined, as that module imports rich and a
usage error exits before anything needs it. A pattern, compiled (by ``re.sub``) when a usage error first needs
it: not by every command (~0.5 ms)."""


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class _OneLineErrors(TyperGroup):
    """The ``hazel`` group, whose usage errors (an unknown option, a missing argument, a value of the wrong
    type) are one line on stderr, like every other error of the CLI: ``error: No such option: --bogus (see
    `hazel run --help`)``, exit status 2 (Click's own format is four lines: usage, hint, blank, error)."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_errors.NoArgsIsHelpError as exc:  # `hazel` alone: its help, as Click shows it (exit 2)
            exc.show()
            sys.exit(exc.exit_code)
        except click_errors.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            message = re.sub(_CONTROL, _visible, " ".join(exc.format_message().split()))
            sys.stderr.write(f"error: {message}{hint}\n")  # a typed value's control characters shown, not obeyed
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.stderr.write("aborted\n")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        """Click's, where an option typed before the command's name that the command has (``hazel --json
        runs``: Click says only "No such option: --json") is a usage error saying where it goes: ``--json goes
        after the command: `hazel runs --json``` (see ``hazel runs --help``), exit status 2."""
        try:
            return super().parse_args(ctx, args)
        except click_errors.NoSuchOption as exc:
            misplaced = self._misplaced(ctx, exc.option_name, args)
            if misplaced is None:
                raise
            raise misplaced from None

    def _misplaced(self, ctx: typer.Context, option: str, args: list[str]) -> click_errors.NoSuchOption | None:
        """The usage error of ``option`` typed before the command (of ``args``: the first that names one of
        this group's commands, or of a group's below it: ``hazel --json db current``) that takes it, pointing
        to that command's ``--help``; None when no command named there takes it."""
        group: Any = self
        while True:
            at = next((i for i, a in enumerate(args) if not a.startswith("-") and group.get_command(ctx, a)), None)
            if at is None:
                return None
            command = group.get_command(ctx, args[at])
            ctx = typer.Context(command, info_name=args[at], parent=ctx)  # (not parsed: its path, for the hint)
            param = next((p for p in command.params if option in (*p.opts, *p.secondary_opts)), None)
            if param is not None:
                typed = option if getattr(param, "is_flag", False) else f"{option} …"
                return click_errors.NoSuchOption(option, f"{option} goes after the command: "
                                                         f"`{ctx.command_path} {typed}`", ctx=ctx)
            if not hasattr(command, "get_command"):  # (not a group: nothing below it)
                return None
            group, args = command, args[at + 1:]


app = typer.Typer(
    cls=_OneLineErrors,
    name="hazel",
    help="Durable agent workflows steered by people: start runs, answer steering requests, rewind, operate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # Click's plain help and usage errors: typer's rich formatting imports rich (~70 ms)
    context_settings={"max_content_width": 120},  # help as wide as the terminal, up to 120 columns
)
for sub in (demo.app, runs.app, steer.app, ops.app, prune.app, link.app):
    app.registered_commands.extend(sub.registered_commands)
app.add_typer(ops.db_app, name="db")
app.add_typer(ops.outbox_app, name="outbox")


def for_command(name: str | None) -> typer.Typer:
    """``app`` as the command ``name`` (the first argument) needs it: when it names a command, a copy of
    ``app`` whose only command is that one (beside the ``db`` and ``outbox`` groups, which keep it a group:
    ``hazel runs``, not a single-command app), else ``app`` itself (``hazel``, ``hazel --help``, a group, a
    mistyped name that Click answers with the commands it knows). Typer builds the Click command of every
    command it holds, reading each function's signature: ~6 ms for the 22 that ``hazel runs`` does not run."""
    cmd = next((c for c in app.registered_commands
                if (c.name or typer.main.get_command_name(c.callback.__name__)) == name), None) if name else None
    if cmd is None:
        return app
    one = copy.copy(app)
    one.registered_commands = [cmd]
    return one


def main() -> None:
    """The ``hazel`` console script.

    Start-up creates tens of thousands of objects that live until exit (modules, classes, compiled statements),
    so the cycle collector is off until the command has its engine (``common.engine`` turns it back on), and
    everything alive at exit is frozen (``gc.freeze``): the interpreter's last collection then skips it. Together
    they take ~0.14 s off a ``hazel runs`` of ~0.5 s (bench/README.md, "The CLI"). Only the command named is
    built (``for_command``).
    """
    gc.disable()
    try:
        for_command(sys.argv[1] if len(sys.argv) > 1 else None)()
    finally:
        gc.freeze()
