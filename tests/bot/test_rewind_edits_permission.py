"""A rewind's edits need what an edit needs (``bot.engine.steering.rewind_edits``), on every channel that can
send them: the CLI (``hazel rewind --set``) and the REST API (``"edits"``). Slack, Jira and the run pages send
no edits with a rewind. A refused rewind says why, is audited as ``decision.refused`` and writes nothing: the
run, its history and what its steps wrote stay as they were. A rewind without edits is not affected.

The workflows are defined at the top level of this module, which the CLI loads by path (``HAZEL_WORKFLOWS``):
the example migration plan with priya reviewing and sam alone signing off (no ``edit`` at the sign-off,
self-sign-off off), a one-reviewer point (``locked``) and a quorum with a self-approval ban (``quorum``).
On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from bot.cli import app as cli_app
from bot.engine.errors import NotAllowedError
from bot.inbound.api import api_router
from bot.ops.retention import prune
from bot.server.http import create_app
from bot.settings import Settings
from examples.migration_plan import build
from hazel import Approvers, StepContext, Workflow
from store.models import RunStatus
from tests.support.engine import make_hazel, person
from tests.support.live import LiveServer

pytestmark = pytest.mark.usefixtures("offline_example", "wide_cli")

guarded = build(approvers=Approvers(users=["priya"]), signoff_approvers=Approvers(users=["sam"]),
                allow_self_signoff=False, name="mp-guarded")


class S(BaseModel):
    text: str = ""
    n: int = 0
    log: list[str] = []


locked = Workflow("locked", version=1, state=S)


@locked.step
def w(state: S, ctx: StepContext) -> S:
    return state.model_copy(update={"text": state.text or "hello"})


locked.steer("review", title="Review it", show="text", approvers=Approvers(users=["priya"]),
             actions=["approve", "edit", "reject", "feedback", "rewind"])


@locked.step
def done(state: S, ctx: StepContext) -> S:
    return state.model_copy(update={"log": [*state.log, f"done with {state.text}"]})


quorum = Workflow("quorum", version=1, state=S)


@quorum.step
def draft(state: S, ctx: StepContext) -> S:
    return state.model_copy(update={"text": state.text or "draft", "n": state.n + 1})


quorum.steer("sign_off", title="Sign off", show="text", actions=["approve", "edit", "reject", "feedback", "rewind"],
             approvers=Approvers(users=["alice", "bob", "carol"]), approvals_required=2, allow_self_approval=False)


@quorum.step
def finish(state: S, ctx: StepContext) -> S:
    return state.model_copy(update={"log": [*state.log, f"finished {state.text}"]})


DROP = "DROP TABLE orders;"
SCRIPT = "001_add_index_on_orders.up.sql"


class Cli:
    """``hazel ARGS`` in this process as a given operator, on ``db_url`` with this module's workflows."""

    def __init__(self, db_url: str, tmp_path: Path) -> None:
        self.env = {"HAZEL_DATABASE_URL": db_url, "HAZEL_WORKFLOWS": __file__,
                    "HAZEL_OUTPUT_DIR": str(tmp_path / "out")}
        self.runner = CliRunner()

    def __call__(self, *args: str, operator: str, code: int = 0) -> Any:
        result = self.runner.invoke(cli_app, list(args), env={**self.env, "HAZEL_OPERATOR": operator})
        assert result.exit_code == code, (args, result.stdout, result.stderr, result.exception)
        return result

    def start(self, workflow: str, data: dict[str, Any], *, operator: str) -> str:
        return json.loads(self("run", workflow, "--input", json.dumps(data), "--json", operator=operator).stdout)[
            "run"]["id"]


def _snapshot(hazel: Any, run_id: str) -> tuple[Any, ...]:
    """What a refused rewind must leave as it was: the run's status, head and checkpoints, its decisions."""
    run = hazel.get(run_id=run_id)
    return (run.status, run.head_seq, run.last_seq, [(c.seq, c.step) for c in hazel.checkpoints(run_id=run_id)],
            [d.id for d in hazel.decisions(run_id=run_id)])


def _refusals(hazel: Any, run_id: str) -> list[Any]:
    return [e for e in hazel.audit(run_id=run_id) if e.action == "decision.refused"]


def test_cli_no_rewind_with_edits_past_a_sign_off_nobody_may_edit(db_url: str, tmp_path: Path) -> None:
    """Finding 1 (a): the starter, who may neither approve nor edit the sign-off, and the sign-off's approver
    alike, may not send edited scripts into ``deploy`` past sam's approval; what deploy wrote stays."""
    cli = Cli(db_url, tmp_path)
    run_id = cli.start("mp-guarded", {"request": "add index on orders"}, operator="dan")
    cli("approve", run_id, "--at", "review_plan", operator="priya")
    cli("approve", run_id, "--at", "review_artefacts", operator="priya")
    cli("approve", run_id, "--at", "sign_off", operator="sam")
    reader = make_hazel(db_url, guarded)
    assert reader.get(run_id=run_id).status is RunStatus.COMPLETED
    deployed = tmp_path / "out" / run_id / SCRIPT
    written = deployed.read_text()
    before = _snapshot(reader, run_id)
    sign_off = next(c.seq for c in reader.checkpoints(run_id=run_id) if c.step == "sign_off")

    for who in ("dan", "sam", "priya"):
        refused = cli("rewind", run_id, "--to", "deploy", "--set", f"scripts.{SCRIPT}={DROP}", operator=who,
                      code=1)
        assert refused.stderr.startswith(
            f"error: {who} may not rewind run {run_id} to #{sign_off} with edits of scripts: #{sign_off} comes "
            "after the approval at 'Sign off the deployment' (approved by sam at "), refused.stderr
        message = " ".join(refused.stderr.split())
        assert ("the run would go on with them from deploy with nobody approving them, and a rewind's edits past "
                "an approval need what an edit there needs: 'edit' is not allowed at 'Sign off the deployment' "
                "(allowed: approve, reject, rewind) (rewind without edits, or to #"
                f"{sign_off - 1} or before, where 'Sign off the deployment' asks again)") in message, message
    assert _snapshot(reader, run_id) == before and deployed.read_text() == written == reader.state_at(
        run_id=run_id).scripts[SCRIPT]
    refusals = _refusals(reader, run_id)
    assert [(e.actor_id, e.detail["attempted"]) for e in refusals] == [("dan", "rewind"), ("sam", "rewind"),
                                                                        ("priya", "rewind")]
    assert all("comes after the approval at 'Sign off the deployment'" in e.detail["reason"] for e in refusals)

    # without edits the starter still may (README: rewind is also open to who started the run)
    assert "now completed" in " ".join(cli("rewind", run_id, "--to", "deploy", operator="dan").stdout.split())
    assert deployed.read_text() == written

    # the scripts are edited where they are shown, by who may edit there: the sign-off then asks again
    cli("rewind", run_id, "--to", "review_artefacts", "--set", f"scripts.{SCRIPT}=SELECT 1;", operator="dan",
        code=1)
    cli("rewind", run_id, "--to", "review_artefacts", "--set", f"scripts.{SCRIPT}=SELECT 1;", operator="priya")
    assert reader.pending_request(run_id=run_id).point == "review_artefacts"
    assert reader.state_at(run_id=run_id).scripts[SCRIPT] == "SELECT 1;"


def test_cli_a_field_the_approval_did_not_show_is_not_edited_past_it(db_url: str, tmp_path: Path) -> None:
    """An approver of 'Approve the migration plan' (which shows ``plan``) may send an edited plan past its
    approval, not an edited ``request``: ``hazel edit`` there replaces only the plan. Before the approval (the
    run's input, #0..#1), ``request`` is theirs to change."""
    cli = Cli(db_url, tmp_path)
    run_id = cli.start("mp-guarded", {"request": "add index on orders"}, operator="dan")
    cli("approve", run_id, "--at", "review_plan", operator="priya")
    refused = cli("rewind", run_id, "--to", "write_scripts", "--set", "request=drop everything", operator="priya",
                  code=1)
    message = " ".join(refused.stderr.split())
    assert ("an edit at 'Approve the migration plan' replaces only plan, not request (rewind without edits, or to "
            "#1 or before, where 'Approve the migration plan' asks again)") in message, message
    cli("rewind", run_id, "--to", "write_scripts", "--set", "plan=A shorter plan.", operator="priya")
    reader = make_hazel(db_url, guarded)
    assert reader.state_at(run_id=run_id).plan == "A shorter plan."
    cli("rewind", run_id, "--to", "1", "--set", "request=add two indexes", operator="dan")  # (shows plan only)
    assert reader.state_at(run_id=run_id).request == "add two indexes"


def test_cli_no_rewind_edits_of_a_shown_field_by_who_may_not_edit_it(db_url: str, tmp_path: Path) -> None:
    """Finding 1 (b): a starter refused ``hazel edit`` is refused a rewind that replaces what the point shows;
    the point's approver may. What the point does not show, before any approval, is the run's input: the
    starter may still change it."""
    cli = Cli(db_url, tmp_path)
    run_id = cli.start("locked", {"text": "orig"}, operator="dan")
    assert cli("edit", run_id, "--set", "text=dan edit", operator="dan", code=1).stderr == (
        "error: dan may not edit at 'Review it': only priya may\n")
    reader = make_hazel(db_url, locked)
    before = _snapshot(reader, run_id)
    refused = cli("rewind", run_id, "--to", "review", "--set", "text=dan's text via rewind", operator="dan", code=1)
    assert " ".join(refused.stderr.split()) == (
        f"error: dan may not rewind run {run_id} to #1 with edits of text: 'Review it' asks about them next, and "
        "a rewind's edits of what a steering point shows need what an edit there needs: dan may not edit at "
        "'Review it': only priya may")
    # with feedback too: the feedback step would redraft from dan's text
    cli("rewind", run_id, "--to", "review", "--feedback", "again", "--set", "text=dan's", operator="dan", code=1)
    assert _snapshot(reader, run_id) == before and reader.state_at(run_id=run_id).text == "orig"
    assert [e.detail["attempted"] for e in _refusals(reader, run_id)] == ["edit", "rewind", "rewind"]
    assert reader.pending_request(run_id=run_id).status.value == "pending"

    cli("rewind", run_id, "--to", "review", "--set", "n=5", operator="dan")  # not shown, nothing approved yet
    cli("rewind", run_id, "--to", "0", "--set", "text=dan's input", operator="dan")  # the input: w runs on it
    assert reader.state_at(run_id=run_id).text == "dan's input"
    cli("rewind", run_id, "--to", "review", "--set", "text=priya's text", operator="priya")
    assert reader.state_at(run_id=run_id).text == "priya's text"


def test_self_approval_ban_and_quorum(db_url: str) -> None:
    """The self-approval ban holds for a rewind's edits as for ``edit``; past a quorum's approval nobody's edits
    stand alone (an edit there asks the quorum again): rewinding to where it asks is the way."""
    hz = make_hazel(db_url, quorum)
    run = hz.start(workflow="quorum", input={}, actor=person("alice"))
    hz.drive(run_id=run.id)
    with pytest.raises(NotAllowedError) as refused:
        hz.rewind(run_id=run.id, actor=person("alice"), to="sign_off", edits={"text": "alice sneaky edit"})
    assert str(refused.value).endswith(
        "need what an edit there needs: alice may not edit at 'Sign off': alice started this run (self-approval "
        "is off: someone else must)")
    assert hz.state_at(run_id=run.id).text == "draft" and len(_refusals(hz, run.id)) == 1
    hz.rewind(run_id=run.id, actor=person("bob"), to="sign_off", edits={"text": "bob's text"})
    hz.drive(run_id=run.id)
    assert hz.pending_request(run_id=run.id).point == "sign_off"  # asked again, with bob's text
    hz.decide(run_id=run.id, action="approve", actor=person("bob"))
    hz.decide(run_id=run.id, action="approve", actor=person("carol"))
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED
    before = _snapshot(hz, run.id)
    with pytest.raises(NotAllowedError) as refused:
        hz.rewind(run_id=run.id, actor=person("bob"), to="finish", edits={"text": "after the quorum"})
    assert "'Sign off' needs 2 approvals, and one person's edits cannot stand for them (an edit there is asked " \
           "again)" in str(refused.value)
    assert "(approved by carol at " in str(refused.value) and ", 2 of 2 approvals)" in str(refused.value)
    assert _snapshot(hz, run.id) == before
    hz.rewind(run_id=run.id, actor=person("alice"), to="finish")  # without edits: as before
    hz.drive(run_id=run.id)
    assert hz.state_at(run_id=run.id).log[-1] == "finished bob's text"


def test_rest_rewind_with_edits_past_the_sign_off(db_url: str, tmp_path: Path) -> None:
    """The same rule over HTTP: 403 ``NotAllowedError`` with the engine's words, audited, nothing written; the
    same rewind without edits is 201."""
    hz = make_hazel(db_url, guarded)
    tokens = Settings(HAZEL_API_TOKENS="dan=tok-dan-0123456789,priya=tok-priya-0123456789,sam=tok-sam-0123456789")
    with LiveServer(create_app(hz, routers=[api_router(hz, tokens)])) as server:
        def post(who: str, path: str, body: dict[str, Any]) -> httpx.Response:
            return httpx.post(server.url + path, json=body, timeout=15,
                              headers={"Authorization": f"Bearer tok-{who}-0123456789"})

        def settles(status: RunStatus) -> None:
            deadline = time.monotonic() + 20  # (the API runs the steps in a background thread)
            while hz.get(run_id=run_id).status is not status and time.monotonic() < deadline:
                time.sleep(0.02)
            assert hz.get(run_id=run_id).status is status

        started = post("dan", "/api/runs", {"workflow": "mp-guarded", "input": {"request": "add index on orders"}})
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        for who, point in (("priya", "review_plan"), ("priya", "review_artefacts"), ("sam", "sign_off")):
            settles(RunStatus.WAITING)
            request_id = hz.pending_request(run_id=run_id).id
            answer = post(who, f"/api/runs/{run_id}/decisions", {"action": "approve", "request_id": request_id})
            assert answer.status_code == 201, answer.text
        settles(RunStatus.COMPLETED)
        sign_off = next(c.seq for c in hz.checkpoints(run_id=run_id) if c.step == "sign_off")
        scripts = dict(hz.state_at(run_id=run_id).scripts)
        before = _snapshot(hz, run_id)
        body = {"action": "rewind", "payload": {"to": sign_off, "edits": {"scripts": {**scripts, SCRIPT: DROP}}}}
        for who in ("dan", "sam"):
            refused = post(who, f"/api/runs/{run_id}/decisions", body)
            assert refused.status_code == 403, refused.text
            error = refused.json()["error"]
            assert error["type"] == "NotAllowedError"
            assert error["message"].startswith(f"{who} may not rewind run {run_id} to #{sign_off} with edits of "
                                               "scripts: ") and "'edit' is not allowed at 'Sign off the " \
                                                                "deployment'" in error["message"]
        assert _snapshot(hz, run_id) == before and hz.state_at(run_id=run_id).scripts == scripts
        assert [e.actor_id for e in _refusals(hz, run_id)] == ["dan", "sam"]
        plain = post("dan", f"/api/runs/{run_id}/decisions", {"action": "rewind", "payload": {"to": sign_off}})
        assert plain.status_code == 201, plain.text
        settles(RunStatus.COMPLETED)
        assert hz.state_at(run_id=run_id).scripts == scripts


def test_a_pruned_history_is_judged_by_the_runs_newest_approval(db_url: str) -> None:
    """``hazel prune`` keeps only the final checkpoint (no parent): the approval behind it is the run's newest
    one before it (priya's, at 'Review it'), so the starter may not edit the final state past it."""
    hz = make_hazel(db_url, locked)
    run = hz.start(workflow="locked", input={}, actor=person("dan"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="approve", actor=person("priya"))
    hz.drive(run_id=run.id)
    assert prune(hz.store, older_than_days=0, now=hz.clock() + timedelta(seconds=1)).runs == [run.id]
    [head] = hz.checkpoints(run_id=run.id)
    assert head.parent_seq is None and head.seq > 0
    with pytest.raises(NotAllowedError, match=rf"to #{head.seq} with edits of text: #{head.seq} comes after the "
                                              r"approval at 'Review it' \(approved by priya at .*\): they would be "
                                              r"the run's final state with nobody approving them, .*: dan may not "
                                              r"edit at 'Review it': only priya may") as refused:
        hz.rewind(run_id=run.id, actor=person("dan"), to=head.seq, edits={"text": "after the fact"})
    asked = next(r for r in hz.requests(run_id=run.id) if r.point == "review").checkpoint_seq
    # (the refusal named #asked "or before", which prune had removed: a fresh-user finding, s27 F6)
    assert str(refused.value).endswith(f"(rewind without edits instead: #{asked}, where 'Review it' asked, was "
                                       "pruned with every checkpoint before it)"), str(refused.value)
    hz.rewind(run_id=run.id, actor=person("priya"), to=head.seq, edits={"text": "priya's"})
    hz.drive(run_id=run.id)
    assert hz.state_at(run_id=run.id).text == "priya's"


def test_an_edit_of_no_field_is_refused_as_such_before_what_editing_past_an_approval_needs(db_url: str) -> None:
    """Fresh-user s19 M2: REST ``"edits": {"scripts.a.sql": …}`` (the CLI's ``--set`` form) past an approval
    was refused as not allowed, with advice to rewind earlier, where it was refused again as no field; the
    person was never told the body's shape. It is refused as no field first, naming the shape meant."""
    from bot.engine.errors import InvalidDecisionError

    hz = make_hazel(db_url, guarded)
    run = hz.start(workflow="mp-guarded", input={"request": "add index on orders"}, actor=person("dan"))
    hz.drive(run_id=run.id)
    hz.decide(run_id=run.id, action="approve", actor=person("priya"))
    hz.drive(run_id=run.id)
    assert hz.pending_request(run_id=run.id).point == "review_artefacts"
    before = _snapshot(hz, run.id)
    for to in ("review_artefacts", 0):
        with pytest.raises(InvalidDecisionError) as refused:
            hz.rewind(run_id=run.id, actor=person("priya"), to=to, edits={"scripts.a.sql": "select 1"})
        assert str(refused.value) == ('invalid edit: MigrationState has no field scripts.a.sql (an entry of a field '
                                      'is given inside it: {"scripts": {"a.sql": …}})'), str(refused.value)
    with pytest.raises(InvalidDecisionError, match="^invalid edit: MigrationState has no field nope$"):
        hz.rewind(run_id=run.id, actor=person("priya"), to="review_artefacts", edits={"nope": 1})
    assert _snapshot(hz, run.id) == before
    with pytest.raises(NotAllowedError):  # who may not rewind is told so first, whatever the edits name
        hz.rewind(run_id=run.id, actor=person("zed"), to="review_artefacts", edits={"scripts.a.sql": "x"})
