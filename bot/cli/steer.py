"""``hazel approve``, ``edit``, ``reject``, ``feedback``, ``rewind``, ``retry``, ``cancel``: the console
channel's decisions. Each goes through the same engine path as Slack's and Jira's, then (unless
``--detach``) continues the run in this process until it waits again, ends or fails. A decision refused as
already taken on a run that a stopped process left behind continues that run (``bot.cli.continuation``)."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.cli import common
from bot.cli.common import (
    INT_MAX,
    AsOpt,
    DetachOpt,
    JsonOpt,
    RequestOpt,
    actor,
    apply_sets,
    edit_sets,
    engine,
    handle_errors,
    read_arg,
    read_file,
    usage_error,
)
from bot.cli.continuation import check_request, continue_stranded, decide
from bot.cli.runs import drive, finish

if TYPE_CHECKING:
    from bot.engine import DecisionOutcome, Hazel

app = typer.Typer()
RunArg = Annotated[str, typer.Argument(metavar="RUN", help="Run id (or a unique prefix).")]
AtOpt = Annotated[str | None, typer.Option("--at", help="The steering point you answer (printed with the request): "
                                           "its latest request. If that one was decided meanwhile, you are told by "
                                           "whom (if you may answer it; else that you may not), instead of "
                                           "answering a request of the run's next point; a point "
                                           "that asked again (a redraft after feedback) is answered anew: "
                                           "--request N pins the version you reviewed.")]


def _after(hazel: "Hazel", outcome: "DecisionOutcome", detach: bool, json_out: bool) -> None:
    from rich.markup import escape

    from store.models import still_waiting_text

    verb = outcome.decision.action.value
    extra = {"decision": outcome.decision, "request": outcome.request, "settled": outcome.settled,
             "duplicate": outcome.duplicate, "still_pending": list(outcome.still_pending)}
    common.recorded(extra)  # (Ctrl-C from here on: --json's document carries them)
    if not json_out:
        if outcome.duplicate:
            who = outcome.decision.actor_name or outcome.decision.actor_id
            common.out.print(f"already recorded: {verb} by {escape(who)}")
        elif outcome.settled and outcome.request is None:  # a rewind of a run that waited on no one
            common.out.print(f"[green]✓[/green] {verb} recorded: forked from checkpoint "
                             f"#{escape(str(outcome.decision.payload.get('to')))}")
        elif outcome.settled:
            # a rewind names the checkpoint it forked from (a step name resolves to one: which, on which branch)
            fork = f", forked from checkpoint #{outcome.decision.payload['to']}" if (
                verb == "rewind" and isinstance(outcome.decision.payload.get("to"), int)) else ""
            common.out.print(f"[green]✓[/green] {verb} recorded for {escape(repr(outcome.request.title))}{fork}")
        else:
            r = outcome.request
            common.out.print(f"[green]✓[/green] approval recorded: {r.approvals} of {r.approvals_required}; "
                             "waiting for more approvers")
        if outcome.still_pending:  # the other requests asked with this one (the engine says which)
            common.out.print(f"run {outcome.run_id} is {escape(still_waiting_text(outcome.still_pending))}",
                             soft_wrap=True)
    result = None
    if outcome.resumes and not detach:
        result = drive(hazel, outcome.run_id)  # (delivers the run's notifications)
    else:  # a decision that ended the run, left it waiting, or left it to a worker: its notifications now
        hazel.deliver_due(run_ids=[outcome.run_id])
    finish(hazel, outcome.run_id, result, json_out, extra=extra)


@app.command("approve")
@handle_errors
def approve_cmd(run_ref: RunArg, at: AtOpt = None, request: RequestOpt = None, detach: DetachOpt = False,
                as_: AsOpt = None, json_out: JsonOpt = False) -> None:
    """Approve the run's pending steering request."""
    hazel = engine(json_out)
    outcome = decide(hazel, run_id=hazel.resolve(ref=run_ref), action="approve", actor=actor(hazel, as_), point=at,
                     request_id=request, detach=detach, json_out=json_out)
    _after(hazel, outcome, detach, json_out)


@app.command("edit")
@handle_errors
def edit_cmd(
    run_ref: RunArg,
    file: Annotated[str | None, typer.Option("--file", "-f", help="File holding the new value of the shown "
                                             "field (text for a text field, else JSON; the file's final "
                                             "newline is not part of it).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="FIELD=VALUE or FIELD.KEY=VALUE of the shown "
                                                   "field (VALUE may be @file); repeatable.")] = None,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Accept an empty or blank new value (an "
                                              "empty file or VALUE is refused without it).")] = False,
    at: AtOpt = None, request: RequestOpt = None, detach: DetachOpt = False, as_: AsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Replace the shown field with your version (validated against the state model), then continue."""
    if bool(file) == bool(set_):
        from typer._click.exceptions import UsageError  # the Click that typer vendors: a usage error, exit 2

        raise UsageError("give either --file F or --set FIELD=VALUE")
    hazel = engine(json_out)
    run_id = hazel.resolve(ref=run_ref)
    if file:
        payload: dict[str, Any] = {"text": read_file(file)}  # the engine parses it (text, or JSON)
    else:
        from bot.engine import AlreadyDecidedError, NoPendingRequestError

        check_request(hazel, run_id=run_id, request_id=request, point=at)
        try:
            shown = hazel.shown(request_id=hazel.request_for(run_id=run_id, request_id=request, point=at).id)
        except (NoPendingRequestError, AlreadyDecidedError):  # refused below as any decision would be: audited,
            shown = None  # and, for a run a live process holds, naming it (``continuation.decide``)
        # where the point allows no edit, the engine's refusal says so (not which field --set may name)
        refused = shown is None or (shown.actions and "edit" not in shown.actions)
        payload = {"entries": {}} if refused else edit_sets(set_ or [], shown.field)
    payload["allow_empty"] = allow_empty  # the engine refuses an empty or blank value without it
    typed = {"text": payload["text"]} if file else {"sets": set_}  # (what a settled edit is compared with)
    outcome = decide(hazel, run_id=run_id, action="edit", actor=actor(hazel, as_), payload=payload, point=at,
                     request_id=request, detach=detach, json_out=json_out, typed=typed)
    _after(hazel, outcome, detach, json_out)


@app.command("reject")
@handle_errors
def reject_cmd(
    run_ref: RunArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why (required; @file reads a file).")],
    at: AtOpt = None, request: RequestOpt = None, detach: DetachOpt = False, as_: AsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Reject: the run goes to the steering point's on_reject step, or ends as rejected."""
    hazel = engine(json_out)
    outcome = decide(hazel, run_id=hazel.resolve(ref=run_ref), action="reject", actor=actor(hazel, as_),
                     payload={"reason": read_arg(reason)}, point=at, request_id=request, detach=detach,
                     json_out=json_out)
    _after(hazel, outcome, detach, json_out)


@app.command("feedback")
@handle_errors
def feedback_cmd(
    run_ref: RunArg,
    text: Annotated[str, typer.Argument(help="Your feedback (@file reads a file).")],
    at: AtOpt = None, request: RequestOpt = None, detach: DetachOpt = False, as_: AsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Send feedback: the run goes back to the step that drafts the artefact, with your words."""
    hazel = engine(json_out)
    outcome = decide(hazel, run_id=hazel.resolve(ref=run_ref), action="feedback", actor=actor(hazel, as_),
                     payload={"text": read_arg(text)}, point=at, request_id=request, detach=detach,
                     json_out=json_out)
    _after(hazel, outcome, detach, json_out)


@app.command("rewind")
@handle_errors
def rewind_cmd(
    run_ref: RunArg,
    to: Annotated[str, typer.Option("--to", help="Checkpoint number (see `hazel history`) or a step or "
                                    "steering point name (the run continues from just before it).")],
    feedback: Annotated[str | None, typer.Option("--feedback", help="Words for the step that runs next.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="FIELD=VALUE state edits applied at the "
                                                   "target (repeatable).")] = None,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Accept a --set that leaves a field (or an "
                                              "entry) empty or blank (refused without it).")] = False,
    request: RequestOpt = None, detach: DetachOpt = False, as_: AsOpt = None, json_out: JsonOpt = False,
) -> None:
    """Fork the run from an earlier checkpoint; the abandoned branch stays in the history."""
    number = to.strip().lstrip("#")
    if number.startswith("-") and number[1:].strip().isdigit():  # `--to -5`: no checkpoint number is negative
        raise usage_error("--to", f"{number} is out of range: a checkpoint number is 0 or more")
    if number.isdigit() and int(number) > INT_MAX:
        raise usage_error("--to", f"{number} is out of range: a checkpoint number is at most {INT_MAX}")
    hazel = engine(json_out)
    run_id = hazel.resolve(ref=run_ref)
    check_request(hazel, run_id=run_id, request_id=request, point=None)
    edits = None
    if set_:  # the edits apply over the target's state, not the head's
        target = hazel.rewind_target(run_id=run_id, to=to)
        tree = hazel.rewind_tree(run_id=run_id, seq=target)  # (migrated, as the rewind edits it)
        if tree is None:
            raise hazel.missing_checkpoint(run_id=run_id, seq=target)
        declared = hazel.declared_fields(run_id=run_id)  # a graph's channel no node has written yet, too
        edits = apply_sets(set_, {**declared, **(tree if isinstance(tree, dict) else {})},
                           hazel.declared_entries(run_id=run_id))
    from bot.engine import AlreadyDecidedError, NoPendingRequestError, RunStateError

    who, words = actor(hazel, as_), read_arg(feedback) if feedback else None
    try:
        outcome = hazel.rewind(run_id=run_id, actor=who, to=to, feedback=words, edits=edits, claim=not detach,
                               request_id=request,
                               allow_empty=allow_empty)  # the engine refuses an empty or blank --set without it
    except (AlreadyDecidedError, NoPendingRequestError, RunStateError) as refusal:  # run again after a crash, or
        # while a process runs its steps (RunStateError: "is running"): as a decision is, naming who holds it
        # (what an earlier rewind of this person's must have been to be this one: its checkpoint when named by
        # number, not by a step, whose checkpoint the earlier rewind's fork has changed since; its edits)
        typed: dict[str, Any] = {"feedback": words} if words is not None else {}
        typed.update({"rewind_edits": edits}, **({"to": int(number)} if number.isdigit() else {}))
        continue_stranded(hazel, run_id=run_id, refusal=refusal, action="rewind", actor=who, detach=detach,
                          json_out=json_out, payload=typed)
        raise
    _after(hazel, outcome, detach, json_out)


@app.command("retry")
@handle_errors
def retry_cmd(run_ref: RunArg, detach: DetachOpt = False, as_: AsOpt = None, json_out: JsonOpt = False) -> None:
    """Resume a failed run (or a queued one) from its last good checkpoint."""
    hazel = engine(json_out)
    run = hazel.retry(run_id=hazel.resolve(ref=run_ref), actor=actor(hazel, as_))
    if not json_out:
        common.out.print(f"run {run.id} resumes from checkpoint #{run.head_seq}")
    result = drive(hazel, run.id) if not detach else None
    finish(hazel, run.id, result, json_out)


@app.command("cancel")
@handle_errors
def cancel_cmd(
    run_ref: RunArg,
    reason: Annotated[str | None, typer.Option("--reason", "-r", help="Why (@file reads a file).")] = None,
    as_: AsOpt = None, json_out: JsonOpt = False,
) -> None:
    """Cancel a run that has not ended; its pending steering request is closed."""
    hazel = engine(json_out)
    run = hazel.cancel(run_id=hazel.resolve(ref=run_ref), actor=actor(hazel, as_),
                       reason=read_arg(reason) if reason is not None else None)
    hazel.deliver_due(run_ids=[run.id])
    if not json_out and (run.id, "cancelled") not in getattr(hazel.console, "reported", ()):
        common.out.print(f"run {run.id} cancelled")  # unless the console channel just said so
    finish(hazel, run.id, None, json_out)
