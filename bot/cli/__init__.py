"""The ``hazel`` command line: the console channel, and the way to run and operate Hazel."""

from __future__ import annotations

import gc

import typer

from bot.cli import demo, link, ops, prune, runs, steer

app = typer.Typer(
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


def main() -> None:
    """The ``hazel`` console script.

    Start-up creates tens of thousands of objects that live until exit (modules, classes, compiled statements),
    so the cycle collector is off until the command has its engine (``common.engine`` turns it back on), and
    everything alive at exit is frozen (``gc.freeze``): the interpreter's last collection then skips it. Together
    they take ~0.14 s off a ``hazel runs`` of ~0.5 s (bench/README.md, "The CLI").
    """
    gc.disable()
    try:
        app()
    finally:
        gc.freeze()
