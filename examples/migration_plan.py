"""Example: draft a database migration plan, have an SME approve it, write the scripts and a test strategy,
have them reviewed, get a sign-off, then deploy (write the artefacts to an output folder).

    draft_plan → [review_plan] → write_scripts → write_test_strategy → [review_artefacts] → [sign_off] → deploy

LLM calls go through ``hazel.llm.complete``: a real OpenAI-compatible model when ``HAZEL_LLM_*`` is set, else the
deterministic offline drafter below (it says so in what it writes). Where each steering point is asked comes
from ``HAZEL_EXAMPLE_PLAN_CHANNEL``, ``HAZEL_EXAMPLE_REVIEW_CHANNEL`` and ``HAZEL_EXAMPLE_SIGNOFF_CHANNEL``
(``console`` by default; e.g. ``slack:#migrations`` or ``jira:MIG``); ``build()`` takes them as arguments.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from hazel import Approvers, StepContext, Workflow, env
from hazel.llm import OFFLINE_NOTICE, complete


class MigrationState(BaseModel):
    request: str = Field(min_length=3, description="What should change in the database, in plain words.")
    plan: str = ""
    scripts: dict[str, str] = Field(default_factory=dict, description="File name -> SQL.")
    test_strategy: str = ""
    plan_revisions: int = 0
    script_revisions: int = 0
    deployed_to: str | None = None
    deployed_at: datetime | None = None

    @field_validator("scripts")
    @classmethod
    def _file_names(cls, scripts: dict[str, str]) -> dict[str, str]:
        """Each script is written as its own file in the run's output folder by ``deploy``: a plain ``.sql``
        file name (letters, digits, ``.``, ``_``, ``-``; no folder, no ``..``), so that an edit can neither
        leave the folder nor overwrite ``plan.md`` or the ``DEPLOYED`` marker."""
        bad = [name for name in scripts if not SCRIPT_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"script file names must be plain .sql file names (such as 001_add_column.up.sql), "
                             f"not {', '.join(map(repr, bad[:3]))}")
        return scripts


SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.sql")


# -- the offline drafter: deterministic text from the request and the SME's feedback ------------------------

def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "change"


def offline_plan(request: str, feedback: str | None, revision: int) -> str:
    lines = [f"# Migration plan: {request}", "", OFFLINE_NOTICE, "",
             "1. Pre-checks: take a backup, record row counts, confirm no long-running transactions.",
             "2. Expand: add the new columns and tables alongside the old ones (backward compatible).",
             "3. Backfill in batches of 10,000 rows, throttled, resumable by primary key.",
             "4. Switch the application to read and write the new shape behind a feature flag.",
             "5. Contract: drop what is no longer read after one release without incident.",
             "", "Rollback: steps 2-4 are reversible with the down scripts; step 5 only after sign-off."]
    if feedback:
        lines += ["", f"## Revision {revision}", f"Addressed the reviewer's feedback: {feedback}"]
    return "\n".join(lines)


def offline_scripts(request: str, feedback: str | None, revision: int) -> dict[str, str]:
    name = _slug(request)
    note = f"-- {OFFLINE_NOTICE}\n-- change: {request}\n"
    if feedback:
        note += f"-- revision {revision}: {feedback}\n"
    return {
        f"001_{name}.up.sql": note + f"BEGIN;\nALTER TABLE target ADD COLUMN {name}_new TEXT;\n"
                                     f"UPDATE target SET {name}_new = {name} WHERE {name}_new IS NULL;\nCOMMIT;\n",
        f"001_{name}.down.sql": note + f"BEGIN;\nALTER TABLE target DROP COLUMN {name}_new;\nCOMMIT;\n",
    }


def offline_tests(request: str, scripts: dict[str, str]) -> str:
    files = ", ".join(sorted(scripts))
    return "\n".join([f"# Test strategy: {request}", "", OFFLINE_NOTICE, "",
                      f"- Apply {files} to a copy of production data; compare row counts and checksums.",
                      "- Run the down scripts and check the schema and data match the backup.",
                      "- Run the application's integration tests against the expanded schema.",
                      "- Time the backfill on a 10% sample; extrapolate to the full table."])


# -- the workflow -------------------------------------------------------------------------------------------

def build(*, plan_channel: str | None = None, review_channel: str | None = None,
          signoff_channel: str | None = None, approvers: Approvers | None = None,
          signoff_approvers: Approvers | None = None, allow_self_signoff: bool = True,
          name: str = "migration-plan", version: int = 1) -> Workflow[MigrationState]:
    """The example workflow, with its steering points on the given channels (default: the environment's
    ``HAZEL_EXAMPLE_*_CHANNEL``, in the environment or ``.env``, else the console)."""
    wf: Workflow[MigrationState] = Workflow(
        name, version=version, state=MigrationState,
        description="Draft a database migration plan, review it and the scripts, sign off, deploy.")

    @wf.step(max_attempts=3, backoff_sec=1.0)
    def draft_plan(state: MigrationState, ctx: StepContext) -> MigrationState:
        revision = state.plan_revisions + (1 if ctx.feedback else 0)
        prompt = (f"Write a step-by-step plan for this database migration: {state.request}\n"
                  + (f"Previous plan:\n{state.plan}\nReviewer feedback to address: {ctx.feedback}\n"
                     if ctx.feedback else ""))
        plan = complete(prompt, offline=lambda _p: offline_plan(state.request, ctx.feedback, revision),
                        system="You are a careful database engineer.", idempotency_key=ctx.idempotency_key)
        return state.model_copy(update={"plan": plan, "plan_revisions": revision})

    wf.steer("review_plan", title="Approve the migration plan", show="plan", on_feedback="draft_plan",
             channel=plan_channel or env("HAZEL_EXAMPLE_PLAN_CHANNEL", "console"),
             approvers=approvers, permissions={"feedback": "anyone"})

    @wf.step(max_attempts=3)
    def write_scripts(state: MigrationState, ctx: StepContext) -> MigrationState:
        revision = state.script_revisions + (1 if ctx.feedback else 0)
        prompt = (f"Write SQL up and down scripts for this plan:\n{state.plan}\n"
                  "Answer as '-- file: NAME' headers each followed by its SQL.\n"
                  + (f"Reviewer feedback to address: {ctx.feedback}\n" if ctx.feedback else ""))
        text = complete(prompt, offline=lambda _p: _as_files(offline_scripts(state.request, ctx.feedback, revision)),
                        idempotency_key=ctx.idempotency_key)
        return state.model_copy(update={"scripts": _parse_files(text), "script_revisions": revision})

    @wf.step(max_attempts=3)
    def write_test_strategy(state: MigrationState, ctx: StepContext) -> MigrationState:
        prompt = f"Write a test strategy for these migration scripts:\n{_as_files(state.scripts)}"
        strategy = complete(prompt, offline=lambda _p: offline_tests(state.request, state.scripts),
                            idempotency_key=ctx.idempotency_key)
        return state.model_copy(update={"test_strategy": strategy})

    wf.steer("review_artefacts", title="Review the migration scripts", show="scripts",
             on_feedback="write_scripts",
             channel=review_channel or env("HAZEL_EXAMPLE_REVIEW_CHANNEL", "console"), approvers=approvers,
             permissions={"feedback": "anyone"})
    wf.steer("sign_off", title="Sign off the deployment", show="test_strategy", actions=["approve", "reject", "rewind"],
             channel=signoff_channel or env("HAZEL_EXAMPLE_SIGNOFF_CHANNEL", "console"),
             approvers=signoff_approvers or approvers, allow_self_approval=allow_self_signoff)

    @wf.step(max_attempts=5, backoff_sec=2.0)
    def deploy(state: MigrationState, ctx: StepContext) -> MigrationState:
        """Write the artefacts to HAZEL_OUTPUT_DIR/<run id>/ (idempotent: a rerun rewrites the same files; a
        script the state no longer holds, from a deploy before a rewind, is removed)."""
        folder = Path(env("HAZEL_OUTPUT_DIR", "out")) / ctx.run_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "plan.md").write_text(state.plan + "\n", encoding="utf-8")
        (folder / "test_strategy.md").write_text(state.test_strategy + "\n", encoding="utf-8")
        for stale in folder.glob("*.sql"):
            if stale.name not in state.scripts:
                stale.unlink()
        for filename, sql in state.scripts.items():
            (folder / Path(filename).name).write_text(sql, encoding="utf-8")
        (folder / "DEPLOYED").write_text(ctx.idempotency_key + "\n", encoding="utf-8")
        return state.model_copy(update={"deployed_to": str(folder), "deployed_at": datetime.now(timezone.utc)})

    return wf


def _as_files(files: dict[str, str]) -> str:
    return "\n".join(f"-- file: {name}\n{body}" for name, body in files.items())


def _parse_files(text: str) -> dict[str, str]:
    """The model's ``-- file: NAME`` sections; a NAME that is not a plain ``.sql`` file name (``SCRIPT_NAME``)
    is numbered instead (``002_migration.sql``), as the state accepts no other."""
    files: dict[str, str] = {}
    current = None
    for line in text.splitlines(keepends=True):
        m = re.match(r"^--\s*file:\s*(\S+)\s*$", line)
        if m:
            current = m.group(1) if SCRIPT_NAME.fullmatch(m.group(1)) else f"{len(files) + 1:03d}_migration.sql"
            files[current] = ""
        elif current is not None:
            files[current] += line
    return files or {"001_migration.sql": text}


workflow = build()
