"""The ``hazel`` command line: the console channel, and the way to run and operate Hazel."""

from __future__ import annotations

import typer

from bot.cli import demo, ops, prune, runs, steer

app = typer.Typer(
    name="hazel",
    help="Durable agent workflows steered by people: start runs, answer steering requests, rewind, operate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for sub in (demo.app, runs.app, steer.app, ops.app, prune.app):
    app.registered_commands.extend(sub.registered_commands)
app.add_typer(ops.db_app, name="db")
app.add_typer(ops.outbox_app, name="outbox")


def main() -> None:
    app()
