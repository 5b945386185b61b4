"""After a crash: a decision command whose run was left without a process continues it.

``hazel approve R`` records the decision, then executes the next steps in its own process. Killed in the middle
of a step, it leaves the run ``running`` under a dead owner (recovered to ``ready`` when the next command
starts, ``Hazel.prepare``) or under a lease that lapses. Run again, the decision is refused as already decided
(or as nothing pending). When that happens and the run is ``ready``, or ``running`` under a lapsed lease
(handed back first by ``Hazel.recover``), the command continues it here through the engine's own claim
(``Hazel.drive``: a conditional UPDATE, so of two processes only one gets it) and says so. When a live process
holds the lease, it says who and until when, and runs nothing. With ``--detach`` it prints the command that
continues the run instead.

The exit status is 0 when the earlier decision is the one asked for, by the same person, and the run was
stranded (your own ``approve`` recorded before the crash: what you asked stands), else 1, with who decided
(another person's ``approve`` that came first, or another decision: yours was not taken, even though the run
went on). A run that a live process holds is not stranded: the same decision sent twice at once (a double
submit) gets the refusal and exit 1 on the second, whether the first is still running the steps or has
finished them, as it does once the run has moved on. 1 also when the run this command continued ends
``failed``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from bot.cli import common

if TYPE_CHECKING:
    from bot.engine import DecisionOutcome, Hazel
    from store.models import Actor, Run


def decide(hazel: Hazel, *, run_id: str, action: str, actor: Actor, detach: bool, json_out: bool,
           payload: dict[str, Any] | None = None, point: str | None = None,
           request_id: int | None = None, typed: dict[str, Any] | None = None) -> DecisionOutcome:
    """``hazel.decide`` (claiming the run unless ``detach``); a refusal as already decided / nothing pending on
    a run that no process continues is handled by ``continue_stranded`` (which exits). A point the run never
    asked at (``UnaskedPointError``: undeclared, or not reached) is refused as it is: the run is not driven.
    ``request_id`` (``--request N``) pins the request answered: the engine refuses it once it was settled, even
    when its point has asked again since; ``point`` with it must be that request's point (``check_request``).
    ``typed``: what the person typed, when ``payload`` does not say it (an edit's ``--set`` pairs: ``sets``),
    for telling whether a decision that settled the request first is this one (``_same_words``).

    Raises:
        the engine's errors, as ``Hazel.decide``; ``CliError`` (``check_request``); ``typer.Exit`` once a
        stranded run was handled.
    """
    from bot.engine import AlreadyDecidedError, NoPendingRequestError, UnaskedPointError

    check_request(hazel, run_id=run_id, request_id=request_id, point=point)
    try:
        return hazel.decide(run_id=run_id, action=action, actor=actor, payload=payload, point=point,
                            request_id=request_id, claim=not detach)
    except UnaskedPointError:  # a point the run never asked at: nothing to continue the run for
        raise
    except (AlreadyDecidedError, NoPendingRequestError) as refusal:
        continue_stranded(hazel, run_id=run_id, refusal=refusal, action=action, actor=actor, detach=detach,
                          json_out=json_out, payload=typed if typed is not None else payload)
        raise


def check_request(hazel: Hazel, *, run_id: str, request_id: int | None, point: str | None) -> None:
    """With ``--request N``: N must be a request of ``run_id``, and asked at ``point`` when ``--at`` names one
    too (the two options name one request, never two). Nothing to check without ``--request``.

    Raises:
        CliError: ``run R has no steering request N``, or ``request N of run R was asked at 'x', not at 'y'``.
    """
    if request_id is None:
        return
    found = next((r for r in hazel.requests(run_id=run_id) if r.id == request_id), None)
    if found is None:
        raise common.CliError(f"run {run_id} has no steering request {request_id} (see `hazel show {run_id}`)")
    if point is not None and found.point != point:
        raise common.CliError(f"request {request_id} of run {run_id} was asked at {found.point!r}, not at {point!r}")


def continue_stranded(hazel: Hazel, *, run_id: str, refusal: Exception, action: str, actor: Actor, detach: bool,
                      json_out: bool, payload: dict[str, Any] | None = None) -> None:
    """Continue ``run_id`` here if it is ``ready`` (or ``running`` under a lapsed lease), or say which live
    process holds it; returns (nothing done) when the run is waiting or has ended. ``refusal``: the engine's
    ``AlreadyDecidedError`` or ``NoPendingRequestError`` (a rewind's ``RunStateError`` too: "run R is running").

    Raises:
        typer.Exit: the run was handled (see the module docstring for the status).
    """
    from rich.markup import escape

    from bot.cli.runs import drive, finish
    from store.models import RunStatus

    run = hazel.get(run_id=run_id)
    if run.status is RunStatus.RUNNING:
        hazel.recover()  # a dead owner or an expired lease: handed back as ready (conditional UPDATE)
        run = hazel.get(run_id=run_id)
    if run.status not in (RunStatus.READY, RunStatus.RUNNING):
        return
    # Yours stands only where the run was stranded (the command that took it died): while a live process holds
    # it (the first of a double submit, still running), this one is a refusal as any other.
    stands = run.status is not RunStatus.RUNNING and _stands(hazel, run, refusal, action, actor, payload or {})
    say = common.console("err" if json_out else "out").print
    held = f"; {_held(run)}" if run.status is RunStatus.RUNNING else ""  # (one error line, with who holds it)
    if stands:
        say(escape(common._one_line(refusal)), soft_wrap=True)
    else:
        common.console("err").print(f"[red]error:[/red] {escape(common._one_line(refusal) + held)}",
                                    soft_wrap=True)
    refused = {"type": type(refusal).__name__, "message": str(refusal)}
    result = None
    if run.status is RunStatus.RUNNING:
        pass  # a live process holds it (said above): nothing runs here
    elif detach:
        say(f"run {run.id} is {run.status.value} and no process is continuing it: "
            f"`{common.command_prefix()} retry {run.id}` continues it here (or start `hazel worker`)", soft_wrap=True)
    else:
        say(f"run {run.id} is {run.status.value} and no process is continuing it: continuing it here",
            soft_wrap=True)
        result = drive(hazel, run.id)
        if result.status is None and not result.steps and not result.lease_lost:  # another process claimed it
            current = result.run
            if current is not None and current.status is RunStatus.RUNNING:
                common.console("err").print(_held(current), soft_wrap=True)
            result = None
    if result is not None and not stands:
        _asks_now(hazel, run.id, action)
    # (--json: a refusal that exits 1 is also the document's "error", as every error that exits 1 is; a failure
    # or a cancel of the run continued here replaces it: ``finish`` raises that, after the refusal's line)
    extra = {"refused": refused, "continued": result is not None, **({} if stands else {"error": refused})}
    finish(hazel, run.id, result, json_out, extra=extra,
           queued_hint=not detach)  # with --detach, the hint above says what continues the run
    raise typer.Exit(0 if stands else 1)


def _asks_now(hazel: Hazel, run_id: str, action: str) -> None:
    """After continuing a run whose decision was refused: the request it asks now, which the refused
    ``action`` did not answer (the refusal above named an earlier one, or none)."""
    from rich.markup import escape

    pending = hazel.pending_request(run_id=run_id)
    if pending is None:
        return
    where = ("--to STEP" if action == "rewind" else f"--at {escape(pending.point)}")  # (rewind has no --at)
    common.console("err").print(
        f"your {action} was not taken: run {run_id} now waits at {escape(repr(pending.point))} (request "
        f"{pending.id}, {escape(repr(pending.title))}); answer that request if you mean it: "
        f"`{common.command_prefix()} {action} {run_id} {where} --request {pending.id}"
        f"{'' if action == 'approve' else ' …'}`",
        soft_wrap=True)


def _held(run: Run) -> str:
    until = f" (lease until {common.when(run.lease_expires_at)} UTC)" if run.lease_expires_at else ""
    return f"run {run.id} is being continued by {run.lease_owner or 'another process'}{until}"


def _stands(hazel: Hazel, run: Run, refusal: Exception, action: str, actor: Actor, payload: dict[str, Any]) -> bool:
    """Whether the decision that settled the request is the one this command asked for, and ``actor``'s own
    (the same person's, through any channel): another person's ``approve`` that came first is not yours, and
    neither is your own feedback, rejection or edit with other words than this command's (the words typed now
    were not taken)."""
    from bot.engine import AlreadyDecidedError

    decisions = hazel.decisions(run_id=run.id)
    if isinstance(refusal, AlreadyDecidedError):
        settled = refusal.action
        winner = next((d for d in reversed(decisions) if d.action.value == refusal.action
                       and (d.actor_id, d.channel) == (refusal.decided_by_id, refusal.channel)), None)
    else:
        last = next((r for r in reversed(hazel.requests(run_id=run.id)) if r.decided_action), None)
        settled = last.decided_action if last is not None else None
        winner = next((d for d in reversed(decisions) if last is not None and d.request_id == last.id
                       and d.action.value == last.decided_action), None)
    return (settled == action and winner is not None and (winner.person or winner.actor_id) == actor.who
            and _same_words(winner.payload, payload))


def _same_words(recorded: dict[str, Any], sent: dict[str, Any]) -> bool:
    """A feedback's text, a rejection's reason, a rewind's feedback, an edit's new value: the recorded decision's
    against this command's. An edit (recorded as its new ``value``) is compared with what was typed: ``text``
    (``--file``'s), or ``sets`` (``--set FIELD[.KEY]=VALUE`` pairs: each VALUE that value's, or its FIELD's or
    KEY's within it, as text or as JSON). A rewind is compared by its edits (``rewind_edits``) and, when the
    command named it by number, its checkpoint (``to``) too."""
    if "to" in sent and "to" in recorded and sent["to"] != recorded["to"]:
        return False
    if "rewind_edits" in sent and (sent["rewind_edits"] or None) != (recorded.get("edits") or None):
        return False
    for key in ("text", "reason", "feedback"):
        if key in sent and key in recorded:
            return str(sent[key]).strip() == str(recorded[key]).strip()
    if "value" not in recorded:
        return True
    value = recorded["value"]
    if isinstance(sent.get("text"), str):
        return _typed_as(value, sent["text"])
    if sent.get("sets"):
        return all(any(_typed_as(v, raw) for v in _candidates(value, field, sub))
                   for field, sub, raw in common._parse_sets(sent["sets"]))
    return True


def _candidates(value: Any, field: str, sub: str | None) -> list[Any]:
    """Where ``--set FIELD[.KEY]=…`` lands in an edit's recorded ``value``: the shown field's whole value, or
    its entry KEY; the whole state's FIELD (or FIELD's KEY) when the point shows the whole state."""
    if sub is None:
        return [value, *([value[field]] if isinstance(value, dict) and field in value else [])]
    found = [value.get(sub)] if isinstance(value, dict) and sub in value else []
    inner = value.get(field) if isinstance(value, dict) else None
    return found + ([inner[sub]] if isinstance(inner, dict) and sub in inner else [])


def _typed_as(recorded: Any, raw: str) -> bool:
    """Whether ``raw`` (typed) gives ``recorded``: the same text (outer blanks aside), or JSON of it."""
    if isinstance(recorded, str) and recorded.strip() == raw.strip():
        return True
    try:
        return json.loads(raw) == recorded
    except ValueError:
        return False
