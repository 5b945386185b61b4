"""``hazel demo``: the main job. Starts a run of the example migration-plan workflow and shows it waiting at
its first steering point; ``--walkthrough`` drives one run through approve, feedback, edit, a rewind and the
sign-off, then prints its history tree."""

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.cli import common
from bot.cli.common import JsonOpt, actor, command_prefix, emit_json, engine, handle_errors, safe_url

if TYPE_CHECKING:
    from bot.engine import Hazel

# rich, the renderer and the engine are imported when the demo runs (see bot.cli.common).

app = typer.Typer()
WORKFLOW = "migration-plan"
REQUEST = "Split users.full_name into first_name and last_name without downtime"


@app.command("demo")
@handle_errors
def demo_cmd(
    walkthrough: Annotated[bool, typer.Option("--walkthrough", help="Drive a run through approve, feedback, "
                                              "edit, rewind and sign-off, then print its history.")] = False,
    request: Annotated[str, typer.Option(help="What the migration should do.")] = REQUEST,
    json_out: JsonOpt = False,
) -> None:
    """Start a run of the example migration-plan workflow on the configured database (SQLite by default)."""
    from rich.markup import escape
    from rich.rule import Rule

    from bot.cli import render
    from bot.engine import UnknownWorkflowError

    out = common.out
    hazel = engine(json_out)
    try:
        hazel.workflow(name=WORKFLOW)
    except UnknownWorkflowError:
        raise UnknownWorkflowError("the demo needs the example workflow: run it from Hazel's repository, or set "
                                   "HAZEL_WORKFLOWS=examples.migration_plan") from None
    if walkthrough:
        _walkthrough(hazel, request, json_out)
        return
    me = actor(hazel, None)
    if not json_out:
        out.print(Rule("Hazel demo"))
        out.print(f"database: {escape(safe_url(hazel.settings.database_url))} · channel: console · "
                  f"you are [bold]{escape(me.id)}[/bold]\n"
                  f"starting a run of {WORKFLOW}: “{request}”\n")
    run = hazel.start(workflow=WORKFLOW, input={"request": request}, actor=me)
    result = hazel.drive(run_id=run.id)
    pending = hazel.pending_request(run_id=run.id)
    if json_out:
        emit_json({"run": hazel.get(run_id=run.id), "steps": result.steps, "pending_request": pending})
        return
    cmd = command_prefix()
    out.print(render.drive_summary(result))
    point = pending.point if pending else "review_plan"
    pin = f" --request {pending.id}" if pending else ""  # (as the commands above: a late click lands nowhere else)
    out.print("\nThe run has stopped: nothing is running while it waits. Answer it whenever you like, e.g.")
    for line in (f"{cmd} approve {run.id} --at {point}{pin}", "then follow it with:", f"{cmd} show {run.id}",
                 f"{cmd} history {run.id}", f"{cmd} runs", "or let a whole run be driven for you:",
                 f"{cmd} demo --walkthrough"):
        out.print(escape(line if line.endswith(":") else "  " + line), soft_wrap=True)  # whole, to copy


def _walkthrough(hazel: "Hazel", request: str, json_out: bool) -> None:
    from rich.markup import escape
    from rich.rule import Rule

    from bot.cli import render

    out = common.out
    cmd = command_prefix()
    author, sme, lead = actor(hazel, None), actor(hazel, "priya"), actor(hazel, "sam")
    transcript: list[dict[str, Any]] = []

    def say(text: str) -> None:
        if not json_out:
            out.print(Rule(text, style="dim"))

    def act(label: str, fn, **kwargs):  # noqa: ANN001, ANN202
        if not json_out:
            out.print(f"[bold]$ {escape(cmd)} {escape(label)}[/bold]")
        outcome = fn(run_id=rid, claim=True, **kwargs)  # the decision leases the run: it continues here
        result = hazel.drive(run_id=rid)
        transcript.append({"command": f"{cmd} {label}", "steps": result.steps,
                           "status": result.run.status.value if result.run else None})
        if not json_out:
            out.print(render.drive_summary(result))
        return outcome

    say("1. start a run: the agent drafts a plan and stops for review")
    if not json_out:
        import shlex

        out.print(f"[bold]$ {escape(cmd)} run {WORKFLOW} --input {escape(shlex.quote(json.dumps({'request': request})))}"
                  "[/bold]")
    run = hazel.start(workflow=WORKFLOW, input={"request": request}, actor=author, claim=True)
    hazel.drive(run_id=run.id)
    rid = run.id
    say("2. priya approves the plan; scripts and a test strategy are written")
    act(f"approve {rid} --as priya", hazel.decide, action="approve", actor=sme)
    say("3. priya asks for a change to the scripts: they are re-drafted with her feedback")
    act(f"feedback {rid} 'add a rollback check for the backfill' --as priya", hazel.decide, action="feedback",
        actor=sme, payload={"text": "add a rollback check for the backfill"})
    say("4. priya edits one script herself and approves her version")
    scripts = dict(hazel.state_at(run_id=rid).scripts)  # type: ignore[attr-defined]
    first = sorted(scripts)[0]
    scripts[first] = scripts[first].replace("BEGIN;", "BEGIN;\nSET lock_timeout = '5s';", 1)
    act(f"edit {rid} --set 'scripts.{first}=@edited.sql' --as priya", hazel.decide, action="edit", actor=sme,
        payload={"entries": {first: scripts[first]}})
    say("5. at sign-off, sam wants smaller batches: rewind to the plan with feedback (a new branch)")
    act(f"rewind {rid} --to draft_plan --feedback 'backfill in batches of 5,000' --as sam", hazel.rewind, actor=lead,
        to="draft_plan", feedback="backfill in batches of 5,000")
    say("6. the new plan is approved, the artefacts accepted, and sam signs off: deploy")
    act(f"approve {rid} --as priya", hazel.decide, action="approve", actor=sme)
    act(f"approve {rid} --as priya", hazel.decide, action="approve", actor=sme)
    act(f"approve {rid} --as sam", hazel.decide, action="approve", actor=lead)
    final = hazel.get(run_id=rid)
    state = hazel.state_at(run_id=rid)
    if json_out:
        emit_json({"run": final, "transcript": transcript, "state": state,
                   "checkpoints": hazel.checkpoints(run_id=rid), "decisions": hazel.decisions(run_id=rid)})
        return
    say("history: every checkpoint, the decisions, and the abandoned branch")
    out.print(render.history_tree(final, hazel.checkpoints(run_id=rid), hazel.decisions(run_id=rid)))
    out.print(f"\nrun {rid} is {render.status(final.status.value)}; artefacts in "
              f"{getattr(state, 'deployed_to', None)}")
