"""``hazel db``, ``serve``, ``worker``, ``outbox``: running and operating Hazel."""

from typing import TYPE_CHECKING, Annotated, Any, Callable

import typer

from bot.cli import common
from bot.cli.common import (
    INT_MAX,
    CliError,
    JsonOpt,
    command_prefix,
    emit_json,
    engine,
    handle_errors,
    usage_error,
    when,
)

if TYPE_CHECKING:
    from bot.settings import Settings

# Each command imports what it uses (see bot.cli.common): `hazel --help` loads none of it.

app = typer.Typer()
db_app = typer.Typer(help="The database schema (Alembic migrations).", invoke_without_command=True)
outbox_app = typer.Typer(help="Notifications waiting to be (or that could not be) delivered.",
                         invoke_without_command=True)


@db_app.callback()
def db(ctx: typer.Context) -> None:
    """``hazel db`` alone prints its help and exits 0, as ``git remote`` lists (``no_args_is_help`` is
    Click's usage error: exit status 2)."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


@db_app.command("upgrade")
@handle_errors
def db_upgrade(json_out: JsonOpt = False) -> None:
    """Create or migrate Hazel's tables to the latest revision (safe to run again)."""
    from bot.settings import Settings
    from store import Store
    from store.migrate import current_revision, head_revision

    settings = Settings()
    store = Store(settings.database_url, wal_preallocate_pages=0)  # (a schema change, no steps: see store.wal)
    try:
        before = store.upgrade()  # (read under the schema lock: of two upgrades at once, one reports the change)
        after = current_revision(store.engine)
    finally:
        store.dispose()
    if json_out:
        emit_json({"from": before, "to": after, "head": head_revision()})
    else:
        common.out.print(f"database at revision {after}" + (f" (was {before or 'empty'})" if before != after else
                                                             " (already current)"))


def _missing_sqlite_file(url: str) -> str | None:
    """The path of ``url``'s SQLite file when it does not exist (connecting would create it), else None."""
    import os

    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and not parsed.database.startswith("file:") \
            and not os.path.exists(parsed.database):
        return parsed.database
    return None


def _revision_changed(doing: str, change: Callable[[Any], object]) -> tuple[str | None, str | None]:
    """Run ``change`` (given the engine) on the settings' database; its schema revision before and after.
    Refused, nothing created, when its SQLite file does not exist.

    Raises:
        CliError: no such file (``no database file at F: nothing to DOING``), or ``change`` raised ValueError (an
            unknown revision: its words).
    """
    from bot.settings import Settings
    from store import Store
    from store.migrate import current_revision

    url = Settings().database_url
    missing = _missing_sqlite_file(url)
    if missing is not None:
        raise CliError(f"no database file at {missing}: nothing to {doing} (nothing created)")
    store = Store(url, wal_preallocate_pages=0)
    try:
        before = current_revision(store.engine)
        try:
            change(store.engine)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        return before, current_revision(store.engine)
    finally:
        store.dispose()


@db_app.command("downgrade")
@handle_errors
def db_downgrade(revision: Annotated[str, typer.Argument(help="The revision to go back to (e.g. 0003: the newest "
                                                                  "revision of the release you roll back to).")],
                 discard_graph_state: Annotated[bool, typer.Option(
                     "--discard-graph-state", help="Below 0004: drop the LangGraph checkpoints of graph runs "
                     "(refused without it while there are any: those runs could not resume).")] = False,
                 json_out: JsonOpt = False) -> None:
    """Undo the migrations after REVISION, before rolling back to an older Hazel (see docs/deploy.md)."""
    from store.migrate import downgrade

    before, after = _revision_changed("downgrade", lambda engine: downgrade(
        engine, revision, discard_graph_state=discard_graph_state))
    if json_out:
        emit_json({"from": before, "to": after})
    else:
        common.out.print(f"database at revision {after}" + (f" (was {before or 'empty'})" if before != after else
                                                             " (already there)"))


@db_app.command("stamp")
@handle_errors
def db_stamp(revision: Annotated[str, typer.Argument(help="The revision the database's tables are at (e.g. 0009: "
                                                          "the newest of the Hazel that last ran on it).")],
             json_out: JsonOpt = False) -> None:
    """Record the database's schema revision without migrating: for a database whose revision row was lost
    (its tables are there, `hazel db current` says none). Alembic's `stamp`."""
    from store.migrate import stamp

    before, after = _revision_changed("stamp", lambda engine: stamp(engine, revision))
    if json_out:
        emit_json({"from": before, "to": after})
    else:
        common.out.print(f"database recorded at revision {after}" + (f" (was {before or 'none'})" if before != after
                                                                     else " (already)"))


@db_app.command("current")
@handle_errors
def db_current(json_out: JsonOpt = False) -> None:
    """Show the database's schema revision and the one this Hazel needs. Exit status 1 when the database is
    newer than this Hazel (a revision it has no script for), or has Hazel's tables without a revision, as
    every other command then refuses to run."""
    from rich.markup import escape

    from bot.settings import Settings
    from store import Store
    from store.migrate import ORPHANED, current_revision, head_revision, known_revisions, orphaned

    url = Settings().database_url
    missing = _missing_sqlite_file(url)  # said so, not created (a mistyped path stays a typo)
    lost = False
    if missing is not None:
        current, head = None, head_revision()
    else:
        store = Store(url, wal_preallocate_pages=0)
        try:
            current, head = current_revision(store.engine), head_revision()
            lost = orphaned(store.engine, current)
        finally:
            store.dispose()
    newer = current is not None and current not in known_revisions()
    if json_out:
        emit_json({"current": current, "head": head, "newer_than_this_hazel": newer,
                   **({"missing_file": missing} if missing else {}), **({"problem": ORPHANED} if lost else {})})
    else:
        common.out.print(f"current {current or 'none'}"
                         + (f" (no database file at {escape(missing)!s}: nothing created)" if missing else "")
                         + f"; this Hazel needs {head}"
                         + ("; the database is newer than this Hazel: use a newer Hazel" if newer else "")
                         + (f"; {escape(ORPHANED)}" if lost else ""), soft_wrap=True)
    if newer or lost:
        raise typer.Exit(1)


def _log_errors(settings: "Settings") -> None:
    """Under ``HAZEL_LOG_FORMAT=json``, the error that ends ``serve`` / ``worker`` is a log record of
    ``hazel.server`` (one JSON line), not a line of text on stderr (``common.log_errors``)."""
    if settings.log_format == "json":
        import logging

        common.log_errors(logging.getLogger("hazel.server"))


def _read_settings() -> "Settings":
    """``Settings()`` for ``serve`` / ``worker``. When they cannot be read (a malformed setting or ``.env``) but
    ``HAZEL_LOG_FORMAT`` itself says ``json`` (and ``HAZEL_LOG_LEVEL`` is valid: ``log_format_and_level``), the
    log is set up as far as those two say, and the error is a record of it (``_log_errors``), not text.

    Raises:
        what ``Settings()`` raises.
    """
    from bot.settings import Settings, log_format_and_level

    try:
        return Settings()
    except Exception:
        known = log_format_and_level()
        if known is not None and known[0] == "json":
            from bot.ops.logs import configure_logging

            log_only = Settings.model_construct(log_format="json", log_level=known[1])  # (defaults: no secret)
            configure_logging(log_only)
            _log_errors(log_only)
        raise


def _socket_mode_missing(settings: "Settings") -> str | None:
    """The settings ``serve --socket-mode`` lacks, named for the error line (``SLACK_APP_TOKEN (an app-level
    token, xapp-…) and SLACK_BOT_TOKEN (…)``), or None when it has both: the app-level token opens the
    connection, and the bot token answers what comes over it (buttons, modals, ``/hazel``). Checked before
    anything starts: without the bot token the Slack app could only be built once the workers were running,
    and ``serve`` stopped them again with ``unexpected ValueError``."""
    missing = [text for value, text in ((settings.slack_app_token, "SLACK_APP_TOKEN (an app-level token, xapp-…)"),
                                        (settings.slack_bot_token, "SLACK_BOT_TOKEN (the bot token, xoxb-…)"))
               if value is None]
    return " and ".join(missing) or None


@app.command("serve")
@handle_errors
def serve_cmd(
    host: Annotated[str | None, typer.Option(help="Bind address (default $HAZEL_HOST or 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port (default $HAZEL_PORT or 8000).")] = None,
    workers: Annotated[int | None, typer.Option(min=1, max=1000, help="Worker threads (default $HAZEL_WORKERS "
                                                "or 4).")] = None,
    socket_mode: Annotated[bool, typer.Option("--socket-mode", help="Also connect to Slack over Socket Mode "
                                              "(needs SLACK_APP_TOKEN).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run the HTTP app (Slack, Jira, REST API, health), the workers and the scheduler."""
    from bot.server.stopping import StopSignals

    signals = StopSignals().install()  # first: a SIGTERM/SIGINT while the server is imported stops it cleanly
    from bot.ops.logs import configure_logging
    from bot.server.processes import bind_problem, console_for, serve
    from bot.settings import warn_unknown_settings

    settings = _read_settings()
    configure_logging(settings)
    _log_errors(settings)
    missing = _socket_mode_missing(settings) if socket_mode else None
    if missing:
        raise CliError(f"--socket-mode needs {missing}")
    problem = bind_problem(host or settings.host, port or settings.port)
    if problem:
        raise CliError(problem)
    warn_unknown_settings()
    common.started()
    serve(settings, host=host or settings.host, port=port or settings.port, workers=workers,
          socket_mode=socket_mode, signals=signals,
          console=console_for(settings, command=command_prefix()))  # (the answer commands as `worker` prints them)


@app.command("worker")
@handle_errors
def worker_cmd(
    workers: Annotated[int | None, typer.Option(min=1, max=1000, help="Worker threads (default $HAZEL_WORKERS "
                                                "or 4).")] = None,
    until_idle: Annotated[bool, typer.Option("--until-idle", help="Exit once no run is ready.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Execute ready runs (new, decided, recovered, retries due) without serving HTTP."""
    from bot.server.stopping import StopSignals

    # first (unless --until-idle, which Ctrl-C interrupts as any command): a SIGTERM/SIGINT while the worker is
    # imported stops it cleanly
    signals = None if until_idle else StopSignals().install()
    from bot.ops.logs import configure_logging
    from bot.server.processes import bind_problem, console_for, work
    from bot.settings import warn_unknown_settings

    settings = _read_settings()
    configure_logging(settings)
    _log_errors(settings)
    problem = None if until_idle or settings.metrics_port is None else bind_problem(settings.host,
                                                                                  settings.metrics_port)
    if problem:
        raise CliError(f"HAZEL_METRICS_PORT: {problem}")
    warn_unknown_settings()
    common.started()
    console = console_for(settings, printer=common.err if json_out else common.out, command=command_prefix())
    n, left = work(settings, workers=workers, until_idle=until_idle, console=console, signals=signals)
    if until_idle:
        said = f"worked on {n} run(s); none is ready now"
        if left:  # (s30 F6: "none is ready" while runs of versions not deployed here were)
            runs = sum(count for _, _, count in left)
            said += (f" that this process can execute: {runs} ready run(s) of "
                     f"{', '.join(f'{w} v{v}' for w, v, _ in left)} left for a worker that has "
                     f"{'that version' if len(left) == 1 else 'those versions'} (HAZEL_WORKFLOWS)")
        if json_out:
            emit_json({"drives": n, "left": [{"workflow": w, "version": v, "runs": c} for w, v, c in left]})
        elif settings.log_format == "json":  # a log line like the rest of what this process wrote
            import logging

            logging.getLogger("hazel.worker").info(said, extra={"drives": n})
        else:
            common.out.print(said, soft_wrap=True)


@outbox_app.callback()
@handle_errors
def outbox_list(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help="pending, sent, dead or superseded (default: pending "
                                                       "and dead).")] = None,
    run: Annotated[str | None, typer.Option(metavar="RUN", help="Only this run's messages (a run id or a "
                                            "unique prefix).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=INT_MAX, help="At most this many messages of each "
                                       "status.")] = 50,
    json_out: JsonOpt = False,
) -> None:
    """List outbox messages with their attempts and last error."""
    if ctx.invoked_subcommand is not None:
        return
    from store.models import OutboxStatus

    if status is not None and status not in {s.value for s in OutboxStatus}:
        raise usage_error("--status", f"{status!r} is not an outbox status (one of: "
                                      f"{', '.join(s.value for s in OutboxStatus)})")
    hazel = engine(json_out, reads_only=True)
    if run is not None:
        run = hazel.resolve(ref=run)
    if status:
        messages = hazel.outbox_messages(status=status, run_id=run, limit=limit)
    else:
        messages = (hazel.outbox_messages(status="dead", run_id=run, limit=limit)
                    + hazel.outbox_messages(status="pending", run_id=run, limit=limit))
    backlog = hazel.outbox_backlog()
    # rows for a channel this shell has no settings for: not stuck, waiting for serve / worker with them
    have = set(hazel.router.kinds()) | set(hazel.deliverer.senders)
    elsewhere = sorted({k for m in messages if m.status.value == "pending"
                        for k in [m.channel.split(":", 1)[0]] if k not in have and m.kind not in have})
    if json_out:  # ("backlog" is the whole outbox's, with --run too: counting one run's would read every row)
        from bot.ops.hooks import shown_message

        emit_json({"backlog": backlog, "messages": [shown_message(m, hazel.settings) for m in messages],
                   "waiting_for_settings": elsewhere})
        return
    # the backlog is what is not delivered (pending, dead: as /metrics' hazel_outbox_messages); what is done
    # (sent, superseded: never to be sent) beside it
    done = ("sent", "superseded")
    stuck = ", ".join(f"{k} {v}" for k, v in sorted(backlog.items()) if k not in done and v) or "empty"
    over = ", ".join(f"{k} {backlog[k]:,}" for k in done if backlog.get(k))
    common.out.print(f"backlog{' (all runs)' if run is not None else ''}: {stuck}" + (f" ({over})" if over else ""))
    if not messages:
        return
    from rich.markup import escape
    from rich.table import Table

    from bot.cli import render

    table = Table(show_edge=False, header_style="bold")
    for col in ("id", "run", "channel", "kind", "status", "attempts", "next attempt (UTC)", "last error"):
        table.add_column(col, overflow="fold")
    for m in messages:
        table.add_row(str(m.id), escape(m.run_id or ""), escape(m.channel), escape(m.kind), m.status.value,
                      str(m.attempts), when(m.next_attempt_at) if m.status.value == "pending" else "",
                      escape(m.last_error or ""))  # (stored up to 2,000 characters: shown whole)
    render.print_table(table)
    if elsewhere:
        names = " and ".join(k.capitalize() for k in elsewhere)
        common.out.print(f"pending {escape(', '.join(elsewhere))} messages wait for a hazel serve or hazel worker "
                         f"with the {escape(names)} settings (this shell has none)")


@outbox_app.command("retry")
@handle_errors
def outbox_retry(
    message_id: Annotated[int | None, typer.Argument(min=1, max=INT_MAX, help="One dead message (default: all dead "
                                                  "ones).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Queue dead messages for delivery again, and deliver what is due now."""
    hazel = engine(json_out)
    n = hazel.retry_dead_outbox(message_id=message_id)
    sent = hazel.deliver_due()
    if json_out:
        emit_json({"requeued": n, "sent": sent})
    else:
        common.out.print(f"requeued {n}; delivered {sent}")
