"""``hazel run``, ``runs``, ``show``, ``history``, ``audit``, ``workflows``."""

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli import common
from bot.cli.common import (
    INT_MAX,
    AsOpt,
    CliError,
    DetachOpt,
    JsonOpt,
    actor,
    emit_json,
    engine,
    handle_errors,
    read_arg,
    to_jsonable,
    usage_error,
    when,
)

if TYPE_CHECKING:
    from bot.engine import DriveResult, Hazel, Shown
    from store.models import Run

# rich, the engine and the store are imported by the commands that use them (see bot.cli.common).

app = typer.Typer()


def parse_input(text: str | None) -> dict:
    if text is None:
        return {}
    raw = read_arg(text)
    from bot.engine.limits import strict_json

    try:
        value = strict_json(raw)
    except ValueError as exc:
        raise CliError(f"--input is not valid JSON: {exc}") from None
    except RecursionError:
        raise CliError("--input is nested too deeply (JSON nested more than about 900 levels)") from None
    if not isinstance(value, dict):
        raise CliError("--input must be a JSON object of state fields")
    return value


@app.command("run")
@handle_errors
def run_cmd(
    workflow: Annotated[str, typer.Argument(help="Workflow name (see `hazel workflows`).")],
    input: Annotated[str | None, typer.Option("--input", "-i", help="Input state as JSON, or @file.json.")] = None,
    version: Annotated[int | None, typer.Option(min=1, max=INT_MAX, help="Workflow version (default: the "
                                                "latest).")] = None,
    detach: DetachOpt = False,
    as_: AsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Start a run and execute it until it waits for an SME, ends or fails."""
    from rich.markup import escape

    hazel = engine(json_out)
    run = hazel.start(workflow=workflow, input=parse_input(input), actor=actor(hazel, as_), version=version,
                      claim=not detach)
    if not json_out:
        common.out.print(f"started run [bold]{run.id}[/bold] of {escape(run.workflow)} v{run.workflow_version}")
    result = drive(hazel, run.id) if not detach else None
    finish(hazel, run.id, result, json_out)


def drive(hazel: "Hazel", run_id: str) -> "DriveResult":
    """``hazel.drive(run_id=…)`` with the retry notices on stderr (``retry_notice``), the run remembered for
    ``common.handle_errors``: Ctrl-C during it says which run it left and how it continues. The engine's ``lease
    lost`` warning is printed only when the run was not cancelled (another worker took it over): a cancel is
    the command's own error line (``finish``)."""
    from bot.cli import ended

    common._driving.append(run_id)
    with ended.lease_lost_held(common._handlers) as held:
        result = hazel.drive(run_id=run_id, on_retry=retry_notice)
    if held and (result.run is None or not ended.cancelled_during(hazel, result.run, result)):
        ended.release(held, common._handlers)
    return result


def retry_notice(run: "Run") -> None:
    """Printed while the CLI sleeps through a failed step's backoff: when the next attempt starts (the failure
    itself is the engine's log line just above: ``run R step S attempt 1/3 failed: …``)."""
    from bot.engine import utcnow

    wait = max((run.wake_at - utcnow()).total_seconds() if run.wake_at else 0, 0)
    when = f"{wait:.1f}s" if wait >= 1 else f"{wait * 1000:.0f} ms"  # (a 0.1 s backoff read "in 0.0s")
    common.err.print(f"[yellow]run {run.id}: attempt {run.attempt + 1} in {when}[/yellow]")


def finish(hazel: "Hazel", run_id: str, result: "DriveResult | None", json_out: bool,
           extra: dict | None = None, *, queued_hint: bool = True) -> None:
    """Report a run after the CLI drove it (or only recorded something, ``result`` None: a ``ready`` run is
    then said to be queued for ``hazel serve`` / ``hazel worker``, unless ``queued_hint`` is False because the
    caller printed its own hint): its usual output (with ``--json``, one document: ``extra``, ``run``,
    ``steps``, ``pending_request``).

    Raises:
        RunFailedError, RunCancelledError: the run this command drove ended ``failed``, or was cancelled by
            someone else while this command continued it (``bot.cli.ended``): after the usual output, one error
            line on stderr and exit status 1 (``handle_errors``), so that scripts notice; with ``--json`` the
            document is printed with the error as its ``"error"`` member.
    """
    from bot.cli import ended, render
    from store.models import RunStatus

    run = hazel.get(run_id=run_id)
    pending = hazel.pending_request(run_id=run_id)
    body = {**(extra or {}), "run": run, "steps": result.steps if result else [], "pending_request": pending}
    error = ended.run_error(hazel, run, result, extra, output=body)
    if json_out:
        if error is not None:
            raise error
        emit_json(body)
        return
    if result is not None:
        line = render.drive_summary(result)
        if line:
            common.out.print(line)
    elif run.status is RunStatus.READY and queued_hint:
        common.out.print(f"run {run.id} is queued; `hazel serve` or `hazel worker` will continue it")
    if run.status is RunStatus.FAILED:
        common.out.print(f"see the traceback with: hazel show {run.id} --full; resume with: hazel retry {run.id}",
                         soft_wrap=True)
    if error is not None:
        raise error


@app.command("runs")
@handle_errors
def runs_cmd(
    status: Annotated[list[str] | None, typer.Option("--status", "-s", help="Only runs in this status "
                                                     "(repeatable): ready running waiting completed failed "
                                                     "rejected cancelled.")] = None,
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=INT_MAX, help="At most this many runs, newest first.")] = 50,
    versions: Annotated[bool, typer.Option("--version", help="Count runs per workflow version and status "
                                           "(what is waiting on which version).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """List runs, newest first."""
    from bot.cli import render
    from store.models import RunStatus

    valid = {s.value for s in RunStatus}
    for s in status or []:
        if s not in valid:
            raise usage_error("--status", f"{s!r} is not a run status (one of: {', '.join(sorted(valid))})")
    if workflow is not None and not workflow:  # (an unset "$WF" in a script: not every run of every workflow)
        raise usage_error("--workflow", "needs a workflow name (see `hazel workflows`)")
    hazel = engine(json_out, reads_only=True)
    if versions:
        _versions(hazel, json_out, statuses=status or None, workflow=workflow)
        return
    runs = hazel.runs(statuses=status or None, limit=limit + 1, workflow=workflow)  # (one more: are there more?)
    more, runs = len(runs) > limit, runs[:limit]
    waiting = hazel.pending_requests_by_run(run_ids=[r.id for r in runs])
    pending = {run_id: max(found, key=lambda r: r.id) for run_id, found in waiting.items()}
    if json_out:
        emit_json([{**to_jsonable(r), "pending_request": pending.get(r.id),
                    "pending_requests": waiting.get(r.id, [])} for r in runs])
        return
    if not runs:
        from rich.markup import escape

        registered = hazel.workflow_names()
        unknown = workflow is not None and workflow not in registered
        common.out.print(escape(_no_runs(workflow, status)
                                + (f" ({workflow!r} is not a registered workflow; registered: "
                                   f"{', '.join(registered) or 'none'})" if unknown else "")))
        return
    render.print_table(render.runs_table(runs, waiting))
    if more:  # (not when exactly ``limit`` runs exist, as REST's next_offset: s26 F2)
        common.out.print(f"[dim](the {limit} newest; --limit N for more)[/dim]")


def _no_runs(workflow: str | None, statuses: list[str] | None) -> str:
    """What a listing whose filters match nothing says: ``no runs of workflow 'x' with status failed``."""
    return ("no runs" + (f" of workflow {workflow!r}" if workflow is not None else "")
            + (f" with status {', '.join(statuses)}" if statuses else ""))


def _versions(hazel: "Hazel", json_out: bool, *, statuses: list[str] | None, workflow: str | None) -> None:
    """``hazel runs --version``: runs counted per workflow version and status (the counters' rows: a few per
    version), only those of ``statuses`` and ``workflow`` when given."""
    deployed = {(wf.name, wf.version) for wf in hazel.workflows()}
    data = [{"workflow": w, "version": v, "status": s, "runs": n, "deployed": (w, v) in deployed}
            for w, v, s, n in hazel.count_by_version()
            if (statuses is None or s in statuses) and (workflow is None or w == workflow)]
    if json_out:
        emit_json(data)
        return
    from rich.markup import escape

    if not data:
        common.out.print(escape(_no_runs(workflow, statuses)))
        return
    from rich.table import Table

    from bot.cli import render

    table = Table(show_edge=False, header_style="bold")
    for col in ("workflow", "version", "deployed", "status", "runs"):
        table.add_column(col)
    for d in data:
        table.add_row(escape(d["workflow"]), f"v{d['version']}", "yes" if d["deployed"] else "[red]no[/red]",
                      render.status(d["status"]), str(d["runs"]))
    render.print_table(table)


@app.command("show")
@handle_errors
def show_cmd(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="Run id (or a unique prefix).")],
    seq: Annotated[int | None, typer.Option("--seq", min=0, max=INT_MAX, help="Show the state at this "
                                            "checkpoint.")] = None,
    full: Annotated[bool, typer.Option("--full", help="Whole artefacts, errors and tracebacks (with --json: the "
                                      "run's error and traceback whole).")] = False,
    raw: Annotated[bool, typer.Option("--raw", help="Print only the shown field (or the state), undecorated, "
                                      "ended by one added newline: `hazel show RUN --raw > plan.txt`, edit, "
                                      "`hazel edit RUN --file plan.txt` (which drops a file's final newline: "
                                      "an unchanged file gives back the value byte for byte).")] = False,
    at: Annotated[str | None, typer.Option("--at", help="With several requests pending (parallel LangGraph "
                                           "nodes): the steering point whose value --raw prints (--raw "
                                           "without it refuses, naming them).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Show a run: status, the pending steering request, and the field it shows (the whole state with
    --seq)."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.text import Text

    from bot.cli import render
    from integrations.console import render_value
    from integrations.terminal import for_terminal
    from store.models import shown_error

    if raw and json_out:
        from typer._click.exceptions import UsageError  # the Click that typer vendors: a usage error, exit 2

        raise UsageError("--raw prints the value undecorated and --json as JSON: give one of them")
    hazel = engine(json_out, reads_only=True)
    run = hazel.get(run_id=hazel.resolve(ref=run_ref))
    waiting = hazel.pending_requests_of(run_id=run.id)
    pending = max(waiting, key=lambda r: r.id) if waiting else None  # what a decision naming no request settles
    if at is not None:
        pending = next((r for r in waiting if r.point == at), None)
        if pending is None:
            points = ", ".join(repr(r.point) for r in waiting)
            raise CliError(f"run {run.id} is not waiting at {at!r}" + (f" (it waits at {points})" if points
                                                                        else " (it waits on nothing)"))
    tree = hazel.state_tree_at(run_id=run.id, seq=seq)
    if seq is not None and tree is None:
        raise hazel.missing_checkpoint(run_id=run.id, seq=seq)
    shown = {r.id: hazel.shown(request_id=r.id, check=seq is None) for r in waiting}
    # a run whose version is gone and whose migration fails: said, with why, and shown as stored (exit 0); so is
    # what else a decision would fail on (a point the deployed version lacks, a state that no longer loads)
    warnings = list(dict.fromkeys([f"{s.migration_error}; every decision on it is refused until a version whose "
                                   f"migration works is deployed; its state is shown as v{run.workflow_version} "
                                   "stored it" for s in shown.values() if s.migration_error]
                                  + [s.problem for s in shown.values() if s.problem]))
    if json_out:  # (with what start-up warned of on stderr: the run shown as stored, not handed back)
        waiting = [r.model_copy(update={"title": shown[r.id].title}) if shown[r.id].title else r for r in waiting]
        pending = next((r for r in waiting if pending is not None and r.id == pending.id), None)  # (a run to
        # migrate: its point's title as the version that decides it gives it, as the panel says: s35 F4)
        emit_json({"run": run, "pending_request": pending, "pending_requests": waiting, "state": tree,
                   "seq": run.head_seq if seq is None else seq,
                   "warnings": [*common.start_up_warnings, *warnings]}, whole=full)
        return
    if raw and at is None and seq is None and len(waiting) > 1:  # which one's value: the person says
        points = ", ".join(repr(r.point) for r in waiting)
        raise CliError(f"run {run.id} waits at {len(waiting)} steering points ({points}): choose the one whose "
                       f"value --raw prints with --at (hazel show {run.id} --raw --at {waiting[0].point})")
    if raw:
        # the value alone, as text (a text field as it is, anything else as JSON), ended by one added line end
        # that `read_file` drops again: `--raw > f` then `edit --file f` gives back the value byte for byte
        asked = shown[pending.id] if pending is not None and seq is None else None
        if asked is not None and asked.migration_error:  # the value an edit replaces is the migrated one, which
            raise CliError(f"{asked.migration_error}; --raw prints the value an edit replaces, the migrated one, "
                           f"which cannot be made (every decision is refused until then; "  # cannot be made
                           f"`{common.command_prefix()} show {run.id}` shows the state as v{run.workflow_version} "
                           "stored it)")
        if asked is not None and asked.problem:  # (s31 F8: it printed a value no edit could replace, the whole
            raise CliError(f"{asked.problem}; --raw prints the value an edit replaces, and no edit can be made "
                           f"now (`{common.command_prefix()} show {run.id}` shows the state as stored, `--seq "
                           f"{run.head_seq} --raw` its JSON)")  # state where a field was shown)
        value = _shown_value(asked, tree)
        sys.stdout.write(value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False))
        sys.stdout.write("\n")
        return
    e = escape
    lines = [f"workflow   {e(run.workflow)} v{run.workflow_version}", f"status     {render.status(run.status.value)}",
             f"started    {when(run.created_at)} UTC by {e(render.started_by(run))} ({run.started_via})",
             f"head       checkpoint #{run.head_seq} (branch {run.branch})"]
    for request in waiting:  # several: a LangGraph super-step's parallel interrupts, each decided on its own
        title = shown[request.id].title or request.title  # (a run to migrate: the title v2 gives it)
        lines.append(f"waiting at {e(repr(request.point))}: {e(title)} · {e(request.channel)}"
                     + (f" · {request.approvals}/{request.approvals_required} approvals"
                        if request.approvals_required > 1 else "")
                     + f" · request {request.id}")  # what `--request N` names
    if run.error:  # (cut short but with --full: a step's error may be megabytes)
        error = run.error if full else shown_error(run.error, run_id=run.id, command=common.command_prefix())
        lines.append(f"error      {e(error)}")
    lines += [f"[yellow]warning[/yellow]    {e(warning)}" for warning in warnings]
    # titles as Text, not markup (a run id and a field name hold neither markup nor emoji codes): parsing a
    # title as markup looks its :codes: up in rich's emoji table, ~3 ms of every `hazel show` to import it
    common.out.print(Panel("\n".join(lines), title=Text(f"run {run.id}"), title_align="left"))
    if run.error_traceback and full:
        common.out.print(Text(for_terminal(run.error_traceback)))
    shows: dict[str | None, object] = {}
    for request in waiting if seq is None else []:  # each field a pending request shows, once
        if shown[request.id].migration_error:  # (v2's field read from v1's state may not be there, or mean it)
            shows.setdefault(None, tree)
        else:
            shows.setdefault(shown[request.id].field, _shown_value(shown[request.id], tree))
    for show, value in (shows or {None: tree}).items():
        text = render_value(value)
        if not full and len(text) > 3000:
            text = text[:3000] + f"\n… ({len(text) - 3000} more characters: --full)"
        title = (show or "state") + (f" at #{seq}" if seq is not None else "")
        if show is None and seq is None and any(s.migration_error for s in shown.values()):
            title += f" as v{run.workflow_version} stored it (not migrated)"
        common.out.print(Panel(Text(for_terminal(text)), title=Text(title), title_align="left"))


def _shown_value(shown: "Shown | None", tree: object) -> object:
    """The value the pending request shows (``shown``: its field's, or the whole state at a point that shows it,
    as it was asked and migrated to the version that decides it; for a LangGraph run, the interrupt's value),
    else ``tree`` (the whole state as stored, at ``--seq`` when given). A whole-state point's value was the
    stored state, v1's fields while v2 decides it (a fresh-user finding, s33 F4)."""
    return shown.value if shown is not None and (shown.field or shown.value is not None) else tree


@app.command("history")
@handle_errors
def history_cmd(
    run_ref: Annotated[str, typer.Argument(metavar="RUN")],
    json_out: JsonOpt = False,
) -> None:
    """The run's checkpoint tree: every step and decision, with the branches rewinds created."""
    hazel = engine(json_out, reads_only=True)
    run = hazel.get(run_id=hazel.resolve(ref=run_ref))
    checkpoints = hazel.checkpoints(run_id=run.id)
    decisions = hazel.decisions(run_id=run.id)
    if json_out:
        emit_json({"run_id": run.id, "head_seq": run.head_seq, "checkpoints": checkpoints, "decisions": decisions})
        return
    from bot.cli import render

    asked = {r.id: (r.checkpoint_seq, r.point) for r in hazel.requests(run_id=run.id)}
    common.out.print(render.history_tree(run, checkpoints, decisions, asked))


@app.command("audit")
@handle_errors
def audit_cmd(
    run_ref: Annotated[str, typer.Argument(metavar="RUN")],
    json_out: JsonOpt = False,
) -> None:
    """Who did what to a run, when, and through which channel (refused attempts included)."""
    hazel = engine(json_out, reads_only=True)
    run_id = hazel.resolve(ref=run_ref)
    events = hazel.audit(run_id=run_id)
    if json_out:
        emit_json(events)
        return
    from bot.cli import render

    render.print_table(render.audit_table(events))


@app.command("workflows")
@handle_errors
def workflows_cmd(json_out: JsonOpt = False) -> None:
    """The registered workflows (from HAZEL_WORKFLOWS) and their nodes."""
    from rich.markup import escape

    hazel = engine(json_out, prepare=False)
    data = [{"name": wf.name, "version": wf.version, "state": wf.state_label, "linear": wf.linear,
             "description": wf.description,
             "nodes": [{"name": n, "kind": "steer" if hasattr(node, "title") else "step"}
                       for n, node in wf.nodes.items()],
             "warnings": hazel.workflow_warnings(name=wf.name, version=wf.version)} for wf in hazel.workflows()]
    if json_out:
        emit_json(data)
        return
    if not data:
        common.out.print("no workflows registered: set HAZEL_WORKFLOWS to your modules")
    for d in data:
        nodes = (" → " if d["linear"] else ", ").join(  # a graph's nodes: not one after another
            f"[cyan]{escape(n['name'])}[/cyan]" if n["kind"] == "steer" else escape(n["name"]) for n in d["nodes"])
        common.out.print(f"[bold]{escape(d['name'])}[/bold] v{d['version']} ({escape(d['state'])}): {nodes}")
        for warning in d["warnings"]:
            common.out.print(f"  [yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
