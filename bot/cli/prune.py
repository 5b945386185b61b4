"""``hazel prune``: drop the checkpoint history of runs that ended long ago (see ``bot.ops.retention``)."""

from typing import Annotated

import typer

from bot.cli import common
from bot.cli.common import (
    JsonOpt,
    actor,
    emit_json,
    engine,
    handle_errors,
    usage_error,
    when,
)

app = typer.Typer()


@app.command("prune")
@handle_errors
def prune_cmd(
    older_than: Annotated[float, typer.Option("--older-than", metavar="DAYS",
                                              help="Prune runs that ended more than DAYS days ago (0: all ended "
                                                   "runs).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would be pruned.")] = False,
    as_: Annotated[str | None, typer.Option("--as", help="Record this name as the actor in the audit log.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Remove the checkpoints of runs that ended (completed, failed, rejected, cancelled) more than DAYS days
    ago, keeping each run's final state, its decisions and its audit log. Waiting, ready and running runs are
    never pruned. A pruned run cannot be rewound to the dropped checkpoints."""
    from bot.engine import utcnow
    from bot.ops.retention import prune

    if not 0 <= older_than < 1e6:  # NaN fails this too
        given = f"{int(older_than):,}" if older_than.is_integer() else f"{older_than:,}"  # as typed, not 1e+11
        raise usage_error("--older-than", f"must be 0 or more days, below 1,000,000 (not {given})")
    hazel = engine(json_out)
    try:
        report = prune(hazel.store, older_than_days=older_than, now=utcnow(), dry_run=dry_run,
                       actor=actor(hazel, as_), graph_snapshots=hazel.graph_snapshots)
    finally:
        hazel.close()
    if json_out:
        emit_json({"dry_run": report.dry_run, "ended_before": report.ended_before.isoformat(),
                   "runs": report.runs, "checkpoints_deleted": report.checkpoints_deleted,
                   "graph_checkpoints_deleted": report.graph_checkpoints_deleted,
                   "graph_writes_deleted": report.graph_writes_deleted, "bytes_freed": report.bytes_freed})
        return
    verb = "would prune" if dry_run else "pruned"
    at_most = "at most " if dry_run else ""
    graph = (f"{at_most}{report.graph_checkpoints_deleted} LangGraph checkpoint(s) and "
             f"{report.graph_writes_deleted} pending write(s), "
             if report.graph_checkpoints_deleted or report.graph_writes_deleted else "")
    common.out.print(f"{verb} {len(report.runs)} run(s) that ended before {when(report.ended_before)} UTC: "
                     f"{report.checkpoints_deleted} checkpoint(s), {graph}{at_most}{report.bytes_freed} bytes")
    if report.runs and len(report.runs) <= 50:
        common.out.print("  " + ", ".join(report.runs))
