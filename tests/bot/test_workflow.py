"""Workflow definitions: validation at load names the problem; registry loading by module or path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from hazel import END, Approvers, StepContext, Workflow
from bot.engine.errors import UnknownWorkflowError, WorkflowDefinitionError
from bot.engine.registry import Registry


class S(BaseModel):
    text: str = ""


async def _async_migration(tree):  # noqa: ANN001, ANN202
    return tree


class _AsyncCall:
    async def __call__(self, *args):  # noqa: ANN002, ANN204
        return args[0]


def _generator_step(state, ctx):  # noqa: ANN001, ANN202
    yield state


def noop(state: S, ctx: StepContext) -> S:
    return state


async def _async_step(state: S, ctx: StepContext) -> S:
    return state


def test_steps_taking_state_and_ctx_in_any_form_load() -> None:
    wf = base()
    wf.step(lambda state, ctx, extra=1: state, name="defaults")
    wf.step(lambda *args: args[0], name="varargs")
    wf.step(lambda state, ctx=None: state, name="optional")
    wf.steer("review", channel="slack:C0123ABCD")
    wf.steer("review2", channel="slack:#ops-leads", escalate_after_sec=60, escalate_channel="slack:#x")
    Registry().add(wf)


def test_a_step_without_a_name_needs_name() -> None:
    """A ``functools.partial`` (or a callable object) has no ``__name__``: the module's loading stopped with an
    AttributeError (s29 F6). It is a problem named like the others; with ``name=`` it is a step."""
    import functools

    wf = base()
    wf.step(functools.partial(noop), name="partial")
    Registry().add(wf)
    wf = base()
    wf.step(functools.partial(noop))
    with pytest.raises(WorkflowDefinitionError, match=r"step functools.partial\(.*\) has no __name__: give it one "
                                                      r"with name="):
        Registry().add(wf)


def test_likely_mistakes_in_a_point_are_warnings() -> None:
    from bot.engine.routes import point_warnings

    wf = base()
    point = wf.steer("review", approvers=Approvers(slack_users=["priya", "U0123"], slack_usergroups=["dba"]),
                     escalate_to=Approvers(people=["bob"]))
    assert point_warnings(point) == [
        "steering point 'review': escalate_to is never used (set escalate_after_sec, or on_timeout='escalate')",
        "steering point 'review': slack_users 'priya' is not a Slack id (U… or W…): matches nobody; name people "
        "in people=[...]",
        "steering point 'review': slack_usergroups 'dba' is not a Slack id (S…): matches nobody; name people in "
        "people=[...]"]
    fine = wf.steer("later", approvers=Approvers(slack_users=["U0123", "W0456"], slack_usergroups=["S0789"]),
                    escalate_after_sec=60, escalate_to=Approvers(people=["bob"]))
    assert point_warnings(fine) == []
    assert point_warnings(wf.steer("timed", escalate_to=Approvers(people=["bob"]), timeout_sec=60,
                                   on_timeout="escalate")) == []


def base() -> Workflow:
    wf = Workflow("w", version=1, state=S)
    wf.step(noop, name="draft")
    return wf


@pytest.mark.parametrize(("build", "message"), [
    (lambda wf: wf.steer("review", show="txt"), "shows field 'txt' but S has no such field (fields: text)"),
    (lambda wf: wf.step(noop, name="draft"), "duplicate name 'draft'"),
    (lambda wf: wf.steer("review", on_feedback="redraft"), "on_feedback names unknown node 'redraft'"),
    (lambda wf: wf.steer("review", on_reject="nowhere"), "on_reject names unknown node 'nowhere'"),
    (lambda wf: wf.step(noop, name="other", next="ghost"), "routes next to unknown node 'ghost'"),
    (lambda wf: wf.steer("review", actions=["approve", "dance"]), "unknown actions ['dance']"),
    (lambda wf: wf.steer("review", channel="teams:#x"), "invalid channel 'teams:#x'"),
    (lambda wf: wf.steer("review", approvals_required=0), "approvals_required must be at least 1"),
    (lambda wf: wf.steer("review", on_timeout="approve"), "on_timeout without timeout_sec"),
    (lambda wf: wf.steer("review", permissions={"approve": "everyone"}),
     "permissions.approve: Input should be 'approvers' or 'anyone'"),
    (lambda wf: wf.step(noop, name="x", max_attempts=0), "max_attempts must be at least 1"),
    # retry settings no clock can keep (taken: a NaN backoff waited a default, -5 retried at once)
    (lambda wf: wf.step(noop, name="x", backoff_sec=float("nan")), "step 'x': backoff_sec must be a finite number"),
    (lambda wf: wf.step(noop, name="x", backoff_sec=-5), "step 'x': backoff_sec must be a finite number"),
    (lambda wf: wf.step(noop, name="x", max_backoff_sec=float("inf")), "max_backoff_sec must be a finite number"),
    (lambda wf: wf.step(noop, name="x", backoff_sec=True), "backoff_sec must be a number of seconds, not True"),
    (lambda wf: wf.step(noop, name="x", max_attempts=True), "max_attempts must be a whole number, not True"),
    # durations no clock can keep (they passed, then failed every run at the point: a fresh-user finding)
    (lambda wf: wf.steer("review", timeout_sec=float("nan"), on_timeout="approve"),
     "timeout_sec: Input should be a finite number"),
    (lambda wf: wf.steer("review", remind_after_sec=float("inf")), "remind_after_sec: Input should be a finite number"),
    (lambda wf: wf.steer("review", timeout_sec=1e300), "timeout_sec: Input should be less than or equal to 2147483647"),
    (lambda wf: wf.steer("review", timeout_sec=True), "timeout_sec: Input should be a valid number"),
    (lambda wf: wf.steer("review", remind_every_sec="10"), "remind_every_sec: Input should be a valid number"),
    (lambda wf: wf.steer("review", timeout_sec=0, on_timeout="approve"), "timeout_sec: Input should be greater than 0"),
    # fresh-user findings (s28): a second button with the same action_id (Slack refuses the message), a channel
    # with no name, a bool for a count, and steps that can never run as steps
    (lambda wf: wf.steer("review", actions=["approve", "approve", "reject"]),
     "steering point 'review': lists 'approve' more than once in actions"),
    (lambda wf: wf.steer("review", channel="slack:#"), "invalid channel 'slack:#'"),
    (lambda wf: wf.steer("review", channel="slack:##x"), "invalid channel 'slack:##x'"),
    (lambda wf: wf.steer("review", approvals_required=True), "approvals_required: Input should be a valid integer"),
    (lambda wf: wf.steer("review", channel="slack:#x", escalate_after_sec=60, escalate_channel="jira:OPS"),
     "escalate_channel 'jira:OPS': an escalation in Jira is a comment on the request's own issue, and a request "
     "on 'slack:#x' has none"),
    (lambda wf: wf.step(_AsyncCall(), name="x"), "step 'x': is an async function"),  # (s35 F6: __call__)
    # s33 F15: a generator step failed every run at it; a bare Slack name was taken as a channel id
    (lambda wf: wf.step(_generator_step, name="x"), "step 'x': is a generator function: a step returns the new "
                                                      "state"),
    (lambda wf: wf.steer("review", channel="slack:migrations"), "invalid channel 'slack:migrations': a Slack "
                                                                "channel is slack:#name or its id, slack:C… (did "
                                                                "you mean 'slack:#migrations'?)"),
    # s33 F16: Hazel's own steps' names (history drew the step as a rewind; a rewind to it was refused)
    (lambda wf: wf.step(noop, name="__rewind__"), "node name '__rewind__' is one of Hazel's own steps "
                                                  "(__rewind__, __migrate__, __update__): choose another"),
    # s33 F3 (HIGH): a misspelled keyword was a channel option nobody read (approver=: open to anyone)
    (lambda wf: wf.steer("review", approver=Approvers(people=("priya",))),
     "steering point 'review': unknown setting 'approver' (did you mean approvers?)"),
    (lambda wf: wf.steer("review", on_rejct="x", nxt=END),
     "unknown setting 'nxt' (did you mean next?); steering point 'review': unknown setting 'on_rejct' (did you "
     "mean on_reject?)"),
    (lambda wf: wf.steer("review", channel="jira:OPS", escalate_after_sec=60, escalate_channel="jira:SEC"),
     "escalate_channel 'jira:SEC': an escalation in Jira is a comment on the request's own issue, in 'jira:OPS', "
     "never an issue in another project"),  # (s29 F7: accepted, and SEC never heard of it)
    (lambda wf: wf.step(_async_step, name="x"),
     "step 'x': is an async function: steps are plain functions (run a coroutine inside with asyncio.run)"),
    (lambda wf: wf.step(lambda state: state, name="x"),
     "step 'x': must take two arguments, (state, ctx); its signature is (state)"),
    (lambda wf: wf.step(lambda state, ctx, more: state, name="x"), "its signature is (state, ctx, more)"),
])
def test_invalid_definitions_are_refused_with_the_problem_named(build, message: str) -> None:  # noqa: ANN001
    wf = base()
    with pytest.raises(WorkflowDefinitionError) as info:
        build(wf)  # a malformed argument is refused at once, a dangling reference when loaded
        Registry().add(wf)
    assert message in str(info.value) and "workflow w v1 is invalid" in str(info.value)


def test_feedback_needs_a_step_before_the_point() -> None:
    wf = Workflow("w", version=1, state=S)
    wf.steer("first")
    wf.step(noop, name="after")
    with pytest.raises(WorkflowDefinitionError, match="allows feedback but no step precedes it"):
        wf.validate()


def test_bad_names_and_state() -> None:
    with pytest.raises(WorkflowDefinitionError):
        Workflow("bad name!", state=S)
    with pytest.raises(WorkflowDefinitionError, match="pydantic BaseModel"):
        Workflow("w", state=dict)  # type: ignore[arg-type]
    with pytest.raises(WorkflowDefinitionError, match="no steps"):
        Workflow("empty", state=S).validate()


def test_registry_versions_and_lookup() -> None:
    reg = Registry()
    v1, v2 = base(), Workflow("w", version=2, state=S)
    v2.step(noop, name="draft")
    reg.add(v1)
    reg.add(v2)
    assert reg.get("w") is v2 and reg.get("w", 1) is v1 and reg.versions("w") == [1, 2]
    with pytest.raises(UnknownWorkflowError, match="registered: w"):
        reg.get("nope")
    with pytest.raises(UnknownWorkflowError, match=r"version 3; registered: w \(v1, v2\)$"):  # (s33 F10: versions)
        reg.get("w", 3)
    twin = base()
    with pytest.raises(WorkflowDefinitionError, match="defined twice"):
        reg.add(twin)


def test_a_workflow_defined_twice_names_both_places(tmp_path: Path) -> None:
    """s33 F10: ``workflow typo v1 is defined twice`` named neither module, nor that one file was named two
    ways (``./dupa.py,dupa``)."""
    source = "from pydantic import BaseModel\nfrom hazel import Workflow\n\nclass S(BaseModel):\n    x: int = 0\n\n" \
        "wf = Workflow('twice', version=1, state=S)\nwf.steer('p', actions=['approve'])\n"
    (tmp_path / "dupa.py").write_text(source)
    (tmp_path / "dupb.py").write_text(source)
    with pytest.raises(WorkflowDefinitionError, match=r"^workflow twice v1 is defined twice: in dupa\.py and in "
                       r"dupb\.py$"):
        Registry().load(["dupa.py", "dupb.py"], base_dir=tmp_path)
    with pytest.raises(WorkflowDefinitionError, match=r"defined twice: in dupa\.py and in "
                       r"dupb_mod \(one file named two ways\?\)$"):
        (tmp_path / "dupb_mod.py").symlink_to(tmp_path / "dupa.py")
        Registry().load(["dupa.py", "dupb_mod"], base_dir=tmp_path)


def test_loading_modules_and_files(tmp_path: Path) -> None:
    reg = Registry()
    loaded = reg.load(["examples.migration_plan"])
    assert [w.name for w in loaded] == ["migration-plan"]
    (tmp_path / "flows.py").write_text(
        "from pydantic import BaseModel\nfrom hazel import Workflow\nclass S(BaseModel):\n    x: int = 0\n"
        "wf = Workflow('from-file', state=S)\n@wf.step\ndef only(s, ctx):\n    return s\n")
    reg.load([str(tmp_path / "flows.py")])
    assert reg.get("from-file").first == "only"
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(WorkflowDefinitionError, match="cannot load workflows from .*broken.py.*boom"):
        reg.load([str(tmp_path / "broken.py")])
    (tmp_path / "empty_mod.py").write_text("x = 1\n")
    with pytest.raises(WorkflowDefinitionError, match="defines no Workflow"):
        reg.load([str(tmp_path / "empty_mod.py")])
    with pytest.raises(WorkflowDefinitionError, match="cannot load workflows from 'no.such.module'"):
        reg.load(["no.such.module"])
    (tmp_path / "invalid.py").write_text(
        "from pydantic import BaseModel\nfrom hazel import Workflow\nclass S(BaseModel):\n    x: int = 0\n"
        "wf = Workflow('invalid', state=S)\n@wf.step\ndef only(s, ctx):\n    return s\n"
        "wf.steer('look', show='y')\n")
    with pytest.raises(WorkflowDefinitionError, match="shows field 'y'"):
        reg.load([str(tmp_path / "invalid.py")])


def test_approvers_describe() -> None:
    a = Approvers(users=("ann",), slack_users=("U1",), slack_usergroups=("S1",), jira_groups=("dba",))
    assert a.describe() == "ann, <@U1>, <!subteam^S1>, group dba"
    assert Approvers().empty and Approvers().describe() == "anyone"


def test_a_misspelled_approver_list_is_refused() -> None:
    """s33 F3 (HIGH): ``Approvers(peple=["priya"])`` was ``Approvers()``: anyone may decide."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="peple\n  Extra inputs are not permitted"):
        Approvers(peple=["priya"])  # type: ignore[call-arg]
    assert Approvers(people=["priya"]).people == ("priya",)


@pytest.mark.parametrize(("declare", "said"), [
    (lambda wf: wf.migration(lambda tree: tree), "@migration needs the version it migrates from: "
                                                 "@w.migration(from_version=N), N below 3"),  # (a bare decorator)
    (lambda wf: wf.migration(from_version=3), "@migration(from_version=3): a migration comes from an earlier "
                                              "version, 1 to 2"),
    (lambda wf: wf.migration(from_version=True), "@migration needs the version it migrates from"),
    (lambda wf: wf.migration(), "@migration needs the version it migrates from"),  # (s35 F7: a TypeError)
    (lambda wf: wf.migration(from_version=1)(lambda tree, extra: tree), "must take one argument, the state tree"),
    (lambda wf: wf.migration(from_version=1)(_async_migration), "'_async_migration' must be a plain function "
                                                                 "returning the new state tree (not async"),
    (lambda wf: wf.migration(from_version=1)(_AsyncCall()), "must be a plain function returning the new state "
                                                             "tree (not async"),  # (s35 F6: an object's __call__)
    (lambda wf: (wf.migration(from_version=1)(lambda tree: tree), wf.migration(from_version=1)),
     "@migration(from_version=1) is declared twice"),
])
def test_a_migration_declared_wrong_is_refused(declare, said: str) -> None:  # noqa: ANN001
    """s33 F5: a bare ``@wf.migration`` registered nothing (the run then waited for a migration that "was
    there"), a second one from the same version replaced the first, and a future one was taken."""
    wf = Workflow("w", version=3, state=base().state)
    with pytest.raises(WorkflowDefinitionError, match=re.escape(said)):
        declare(wf)
    assert wf.migration(from_version=2)(lambda tree: tree) is not None and 2 in wf.migrations


def test_the_embedding_api_names_a_wrong_actor_or_payload(tmp_path: Path) -> None:
    """s33 F11: ``actor="olga"`` was an ``AttributeError`` deep in the engine, ``payload="more"`` a ``ValueError:
    dictionary update sequence element #0 …``."""
    from bot.engine.errors import InvalidInputError
    from tests.support.engine import make_hazel, person

    hz = make_hazel(f"sqlite:///{tmp_path / 'h.db'}", base())
    with pytest.raises(TypeError, match=r"^actor must be an Actor \(hazel.operator\(\), hazel.identify\(channel=…, "
                       r"id=…\), or Actor\(id=…, channel=…\)\), not str 'olga'$"):
        hz.start(workflow="w", input={}, actor="olga")  # type: ignore[arg-type]
    run = hz.start(workflow="w", input={}, actor=person("olga"))
    hz.drive(run_id=run.id)
    with pytest.raises(InvalidInputError, match=r"^payload must be a dict \({'text': …} for feedback"):
        hz.decide(run_id=run.id, action="feedback", payload="more", actor=person("olga"))  # type: ignore[arg-type]
    for call in (lambda: hz.decide(run_id=run.id, action="approve", actor="olga"),  # type: ignore[arg-type]
                 lambda: hz.rewind(run_id=run.id, actor=None, to=0),  # type: ignore[arg-type]
                 lambda: hz.cancel(run_id=run.id, actor="olga")):  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="actor must be an Actor"):
            call()
    assert hz.decisions(run_id=run.id) == []


def test_a_module_raising_a_validation_error_is_named_in_one_line(tmp_path: Path) -> None:
    """s34 F8: ``Approvers(peple=…)`` in a workflow module showed ``ValidationError: 1 validation error for
    Approvers`` alone (the CLI prints an error's first line): the field and why were lost."""
    (tmp_path / "k1.py").write_text("from hazel import Approvers\nA = Approvers(peple=['a'])\n")
    with pytest.raises(WorkflowDefinitionError) as refused:
        Registry().load(["k1.py"], base_dir=tmp_path)
    assert str(refused.value).splitlines()[0] == ("cannot load workflows from 'k1.py': ValidationError: Approvers: "
                                                  "peple: Extra inputs are not permitted")
