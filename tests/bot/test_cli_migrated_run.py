"""The CLI on a run waiting on a version that is no longer deployed, when the deployed version declares a
migration from it (README, "Deploying a new version while runs wait"): the run is decided on the new version,
so ``hazel show`` shows, and ``hazel edit`` edits, the field the new version's steering point shows, with its
value migrated; an edit is validated against the new version's model. Before, the CLI looked the point up in
the run's own version (not loaded), took it for one that shows the whole state, and ``show --raw`` then
``edit --file`` stored the whole state's JSON as the text field.

The two versions are registered as an operator deploys them: ``HAZEL_WORKFLOWS`` points at v1's file while
the run starts, then at v2's file only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

V1 = '''
from pydantic import BaseModel

from hazel import Workflow


class T(BaseModel):
    plan: str = ""
    n: int = 0


wf = Workflow("tplan", version=1, state=T)


@wf.step
def draft(state, ctx):
    return {"plan": "line one\\nline two", "n": 1}


wf.steer("review", show="plan", actions=["approve", "edit", "rewind"])
wf.steer("count", show="n", actions=["approve", "edit"])
'''
V2 = '''
from typing import Annotated

from pydantic import BaseModel, Field

from hazel import Workflow


class T2(BaseModel):
    plan: str = ""
    n: Annotated[int, Field(le=10)] = 0
    owner: str = "x"


wf2 = Workflow("tplan", version=2, state=T2)


@wf2.migration(from_version=1)
def m(tree):
    return {**tree, "owner": "migrated"}


@wf2.step
def draft(state, ctx):
    return {"plan": "line one\\nline two", "n": 1}


wf2.steer("review", show="plan", actions=["approve", "edit", "rewind"])
wf2.steer("count", show="n", actions=["approve", "edit"])
'''
# v1 shows a field v2 renamed: what is shown is the migrated value, under the new version's name
RENAMED_V1 = '''
from pydantic import BaseModel

from hazel import Workflow


class D(BaseModel):
    draft: str = ""


wf = Workflow("renamed", version=1, state=D)


@wf.step
def write(state, ctx):
    return {"draft": "the draft"}


wf.steer("review", show="draft", actions=["approve", "edit"])
'''
RENAMED_V2 = '''
from pydantic import BaseModel

from hazel import Workflow


class P(BaseModel):
    plan: str = ""


wf = Workflow("renamed", version=2, state=P)


@wf.migration(from_version=1)
def m(tree):
    return {"plan": tree["draft"].upper()}


@wf.step
def write(state, ctx):
    return {"plan": "the draft"}


wf.steer("review", show="plan", actions=["approve", "edit"])
'''


@pytest.fixture
def deploy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """``deploy(name, source)``: write ``source`` as ``name`` and make it the only workflow file loaded."""

    def to(name: str, source: str) -> None:
        path = tmp_path / name
        path.write_text(source)
        monkeypatch.setenv("HAZEL_WORKFLOWS", str(path))

    return to


def waiting_v1_run(cli: Any, deploy: Any) -> str:
    """A run of tplan v1 waiting at ``review``; then only v2 is deployed."""
    deploy("migrate_tplan_v1.py", V1)
    run = cli.json("run", "tplan", "--input", "{}")
    assert run["run"]["status"] == "waiting" and run["pending_request"]["point"] == "review"
    deploy("migrate_tplan_v2.py", V2)
    return run["run"]["id"]


def test_show_raw_then_edit_file_edits_the_shown_field(cli, deploy, tmp_path: Path) -> None:  # noqa: ANN001
    run_id = waiting_v1_run(cli, deploy)
    raw = cli("show", run_id, "--raw", "--at", "review").stdout
    assert raw == "line one\nline two\n"  # the value of `plan`, not the state as JSON
    assert cli("show", run_id, "--raw").stdout == raw
    shown = cli("show", run_id).stdout
    assert "─ plan ─" in shown and "─ state ─" not in shown and '"plan"' not in shown
    plan = tmp_path / "plan.txt"
    plan.write_text(raw.replace("line two", "line TWO"))
    edited = cli.json("edit", run_id, "--at", "review", "--file", str(plan))
    assert edited["run"]["workflow_version"] == 2 and edited["pending_request"]["point"] == "count"
    state = cli.json("show", run_id)["state"]
    assert state["plan"] == "line one\nline TWO" and state["owner"] == "migrated"


def test_edit_set_uses_the_new_versions_point_and_model(cli, deploy) -> None:  # noqa: ANN001
    run_id = waiting_v1_run(cli, deploy)
    cli("approve", run_id, "--at", "review")  # migrated here: the run now waits at `count` on v2
    deploy("migrate_tplan_v1_again.py", V1)
    other = cli.json("run", "tplan", "--input", "{}")["run"]["id"]
    cli("approve", other, "--at", "review")  # on v1 (deployed again): waits at `count`, still on v1
    deploy("migrate_tplan_v2_again.py", V2)
    assert cli.json("show", other)["run"]["workflow_version"] == 1
    assert cli("show", other, "--raw", "--at", "count").stdout == "1\n"
    refused = cli("edit", other, "--at", "count", "--set", "n=11", code=1)  # v1 takes it; v2 (n <= 10) not
    assert "less than or equal to 10" in refused.output and "not a mapping" not in refused.output
    assert "valid integer" in cli("edit", other, "--at", "count", "--set", 'n="x"', code=1).output
    assert "not a mapping" in cli("edit", other, "--at", "count", "--set", "n.k=5", code=1).output
    done = cli.json("edit", other, "--at", "count", "--set", "n=5")
    assert done["run"]["status"] == "completed" and done["run"]["workflow_version"] == 2
    state = cli.json("show", other)["state"]
    assert state == {"plan": "line one\nline two", "n": 5, "owner": "migrated"}
    assert cli.json("edit", run_id, "--at", "count", "--set", "n=7")["run"]["status"] == "completed"


def test_approve_continues_on_the_new_version(cli, deploy) -> None:  # noqa: ANN001
    run_id = waiting_v1_run(cli, deploy)
    approved = cli.json("approve", run_id, "--at", "review")
    assert approved["run"]["workflow_version"] == 2 and approved["pending_request"]["point"] == "count"
    assert cli("show", run_id, "--raw").stdout == "1\n"
    assert cli.json("approve", run_id)["run"]["status"] == "completed"
    assert cli.json("show", run_id)["state"]["owner"] == "migrated"


def test_the_value_shown_is_migrated_to_the_field_the_new_version_shows(cli, deploy, tmp_path: Path,  # noqa: ANN001
                                                                          db_url: str) -> None:
    deploy("migrate_renamed_v1.py", RENAMED_V1)
    run_id = cli.json("run", "renamed", "--input", "{}")["run"]["id"]
    deploy("migrate_renamed_v2.py", RENAMED_V2)
    assert cli("show", run_id, "--raw").stdout == "THE DRAFT\n"  # what an edit replaces: v2's `plan`, migrated
    from bot.engine.workflow import Workflow  # the run page and the chat channels render the same view
    from tests.support.engine import make_hazel

    namespace: dict[str, Any] = {}
    exec(compile(RENAMED_V2, "renamed_v2", "exec"), namespace)  # noqa: S102
    hazel = make_hazel(db_url, next(v for v in namespace.values() if isinstance(v, Workflow)))
    view = hazel.request_view(request_id=hazel.pending_requests_of(run_id=run_id)[0].id)
    assert view is not None and view.show == "plan" and view.shown_value == "THE DRAFT"
    assert view.actions == ("approve", "edit")
    plan = tmp_path / "plan.txt"
    plan.write_text("THE DRAFT, edited\n")
    assert cli.json("edit", run_id, "--file", str(plan))["run"]["status"] == "completed"
    assert cli.json("show", run_id)["state"] == {"plan": "THE DRAFT, edited"}
    assert json.loads(cli("show", run_id, "--raw").stdout) == {"plan": "THE DRAFT, edited"}


def test_rewind_set_may_name_a_field_the_new_version_adds(cli, deploy) -> None:  # noqa: ANN001
    run_id = waiting_v1_run(cli, deploy)
    assert "less than or equal to 10" in cli("rewind", run_id, "--to", "1", "--set", "n=11", code=1).output
    rewound = cli.json("rewind", run_id, "--to", "1", "--set", "owner=bob", "--set", "n=4")
    assert rewound["run"]["workflow_version"] == 2 and rewound["pending_request"]["point"] == "review"
    assert cli.json("show", run_id)["state"] == {"plan": "line one\nline two", "n": 4, "owner": "bob"}


# v2 turns `plan` from text into a list of lines: a value given for it is read as v2's field
LIST_V1 = '''
from pydantic import BaseModel

from hazel import Workflow


class L(BaseModel):
    plan: str = ""


wf = Workflow("lplan", version=1, state=L)


@wf.step
def draft(state, ctx):
    return {"plan": "one"}


wf.steer("review", show="plan", actions=["approve", "edit", "rewind"])
'''
LIST_V2 = '''
from pydantic import BaseModel

from hazel import Workflow


class L2(BaseModel):
    plan: list[str] = []


wf = Workflow("lplan", version=2, state=L2)


@wf.migration(from_version=1)
def m(tree):
    return {"plan": [tree["plan"]] if tree["plan"] else []}


@wf.step
def draft(state, ctx):
    return {"plan": ["one"]}


wf.steer("review", show="plan", actions=["approve", "edit", "rewind"])
'''


def test_rewind_set_reads_a_value_by_the_field_type_of_the_version_the_run_continues_on(cli, deploy) -> None:  # noqa: ANN001
    """``hazel rewind --set`` to a checkpoint holding v1 state, the run continuing on v2: the value is read as
    v2's field (JSON for a list), as the rewind migrates the state before its edits apply (a fresh-user
    finding: it was read as v1's text field, then refused by v2's model, with no way to give the field)."""
    deploy("migrate_lplan_v1.py", LIST_V1)
    waiting = cli.json("run", "lplan", "--input", "{}")["run"]["id"]  # waits on v1
    migrated = cli.json("run", "lplan", "--input", "{}")["run"]["id"]
    deploy("migrate_lplan_v2.py", LIST_V2)
    assert cli.json("approve", migrated)["run"]["workflow_version"] == 2  # completed on v2
    for run_id in (waiting, migrated):
        rewound = cli.json("rewind", run_id, "--to", "1", "--set", 'plan=["x", "y"]', "--detach")
        assert rewound["run"]["workflow_version"] == 2, rewound
        assert cli.json("show", run_id)["state"]["plan"] == ["x", "y"]
    refused = cli("rewind", waiting, "--to", "1", "--set", "plan=x", "--detach", code=1)
    assert "valid list" in refused.output or "JSON" in refused.output, refused.output


# v2 adds a required `owner` that its migration from v1 does not give: the run cannot be migrated
BROKEN_V2 = '''
from pydantic import BaseModel

from hazel import Workflow


class S2(BaseModel):
    plan: str = ""
    n: int = 0
    owner: str


wf2 = Workflow("tplan", version=2, state=S2)


@wf2.migration(from_version=1)
def m(tree):
    return dict(tree)


@wf2.step
def draft(state, ctx):
    return {"plan": "line one\\nline two", "n": 1, "owner": "x"}


wf2.steer("review", show="plan", actions=["approve", "edit", "rewind"])
wf2.steer("count", show="n", actions=["approve", "edit"])
'''


def test_a_failing_migration_is_named_and_hazel_show_says_the_state_is_not_migrated(cli, deploy) -> None:  # noqa: ANN001
    """Fresh-user finding F7: every decision was refused with ``… failed: ValidationError: 1 validation error
    for S2`` (pydantic's first line: the field and the reason cut off), and ``hazel show RUN`` printed v1's value
    with exit status 0 and no word of it. Now the refusal names the field and why; ``hazel show`` says the state
    cannot be migrated, with the same reason (exit 0, the state shown as v1 stored it); ``--raw``, whose value
    is the migrated one an edit replaces, refuses (exit 1)."""
    deploy("migrate_tplan_v1_b.py", V1)
    run_id = cli.json("run", "tplan", "--input", "{}")["run"]["id"]
    deploy("migrate_tplan_v2_broken.py", BROKEN_V2)
    reason = (f"run {run_id}: migrating its state from v1 to tplan v2 failed: the migrated state does not fit "
              "tplan v2's state model (S2): owner: Field required")
    assert cli("approve", run_id, code=1).stderr == f"error: {reason}\n"
    refused = cli("edit", run_id, "--at", "review", "--set", "plan=x", "--json", code=1)
    assert json.loads(refused.stdout)["error"]["message"] == reason
    assert cli("rewind", run_id, "--to", "0", code=1).stderr == f"error: {reason}\n"

    shown = cli("show", run_id)
    assert "warning" in shown.stdout and "owner: Field required" in shown.stdout
    assert "every decision on it is refused" in shown.stdout
    assert "state as v1 stored it (not migrated)" in shown.stdout and "line two" in shown.stdout
    assert "owner: Field required" in cli("show", run_id, "--full").stdout
    as_json = cli.json("show", run_id)
    assert as_json["warnings"] == [f"{reason}; every decision on it is refused until a version whose migration "
                                   "works is deployed; its state is shown as v1 stored it"]
    assert as_json["state"] == {"plan": "line one\nline two", "n": 1} and as_json["run"]["workflow_version"] == 1
    raw = cli("show", run_id, "--raw", code=1)
    assert raw.stdout == "" and raw.stderr.startswith(f"error: {reason}; --raw prints the value an edit replaces")
    assert cli("show", run_id, "--raw", "--seq", "0").stdout.startswith("{")  # a checkpoint's state, as stored
    assert cli.json("show", run_id)["run"]["status"] == "waiting"


def test_hazel_show_of_a_run_that_migrates_has_no_warnings(cli, deploy) -> None:  # noqa: ANN001
    run_id = waiting_v1_run(cli, deploy)
    assert cli.json("show", run_id)["warnings"] == []
    assert "warning" not in cli("show", run_id).stdout


DROPPED_V2 = V2.replace('wf2.steer("review", show="plan", actions=["approve", "edit", "rewind"])\n', "")
CHANGED_V1 = V1.replace("    n: int = 0\n", "    n: int = 0\n    owner: str\n")  # (a required field, same version)


def test_hazel_show_warns_of_a_point_the_deployed_version_dropped(cli, deploy) -> None:  # noqa: ANN001
    """A fresh-user finding (s30 F4): ``hazel show`` said nothing, while every decision was refused."""
    run_id = waiting_v1_run(cli, deploy)
    deploy("migrate_tplan_v2_dropped.py", DROPPED_V2)
    [warning] = cli.json("show", run_id)["warnings"]
    assert warning == (f"run {run_id} waits at 'review', which tplan v2 does not have as a steering point; it stays "
                       "on v1: every decision on it is refused (deploy v1 again beside tplan v2, or cancel the "
                       "run)"), warning
    assert "warning" in cli("show", run_id).stdout
    refused = cli("approve", run_id, code=1)
    assert "which tplan v2 does not have as a steering point" in refused.stderr


def test_hazel_show_warns_of_a_state_that_no_longer_loads(cli, deploy) -> None:  # noqa: ANN001
    """A fresh-user finding (s30 F8): the state model changed under the same version; ``hazel show`` said
    nothing, an edit was refused, an approval was recorded and then failed the run."""
    deploy("migrate_tplan_v1.py", V1)
    run_id = cli.json("run", "tplan", "--input", "{}")["run"]["id"]
    deploy("migrate_tplan_v1_changed.py", CHANGED_V1)
    [warning] = cli.json("show", run_id)["warnings"]
    assert warning.startswith("the run's stored state no longer loads as tplan v1's state (owner: Field required)"), \
        warning
    assert warning.endswith("(an edit is refused; an approval, a rejection or feedback would be recorded and then "
                            "fail the run)"), warning


NO_MIGRATION_V2 = V2.replace("@wf2.migration(from_version=1)\ndef m(tree):\n    return {**tree, \"owner\": \"migrated\"}\n",
                             "")


def test_hazel_show_warns_of_a_version_nothing_deployed_goes_on_with_and_raw_refuses(cli, deploy) -> None:  # noqa: ANN001
    """Fresh-user findings (s31 F7, F8): no warning for a run whose version is not deployed and that no deployed
    version migrates; ``--raw`` printed the whole state (no point to show) where a warning stood."""
    assert "@wf2.migration" not in NO_MIGRATION_V2
    run_id = waiting_v1_run(cli, deploy)
    deploy("migrate_tplan_v2_none.py", NO_MIGRATION_V2)
    [warning] = cli.json("show", run_id)["warnings"]
    assert warning.startswith(f"run {run_id} is on workflow 'tplan' version 1, which is not deployed (deployed: v2) "
                              "and no deployed version declares a migration from v1") and warning.endswith(
        ": every decision on it is refused"), warning
    refused = cli("show", run_id, "--raw", code=1)
    assert refused.stderr.startswith(f"error: {warning}; --raw prints the value an edit replaces"), refused.stderr
    deploy("migrate_tplan_v2_dropped.py", DROPPED_V2)
    refused = cli("show", run_id, "--raw", code=1)
    assert "which tplan v2 does not have as a steering point" in refused.stderr, refused.stderr
    deploy("migrate_tplan_v1_dropped.py", V1.replace('wf.steer("review", show="plan", actions=["approve", "edit", '
                                                      '"rewind"])\n', ""))
    [warning] = cli.json("show", run_id)["warnings"]  # (the same version: not "deploy v1 again beside tplan v1")
    assert warning.endswith("(deploy the definition of tplan v1 that has it, or cancel the run)"), warning


WHOLE_V1 = '''
from pydantic import BaseModel

from hazel import Workflow


class S(BaseModel):
    text: str = ""
    note: str = ""


wf = Workflow("wholemig", version=1, state=S)


@wf.step
def draft(state, ctx):
    return {"text": "draft of " + state.text}


wf.steer("review_all", show=None, actions=["approve", "edit"])
'''
WHOLE_V2 = '''
from pydantic import BaseModel

from hazel import Workflow


class S2(BaseModel):
    text: str = ""
    owner: str


wf = Workflow("wholemig", version=2, state=S2)


@wf.migration(from_version=1)
def m(tree):
    return {"text": tree["text"].upper(), "owner": "migrated:" + tree.pop("note", "")}


@wf.step
def draft(state, ctx):
    return {"text": "draft of " + state.text}


wf.steer("review_all", title="Review it all, v2", show=None, actions=["approve", "edit"])
'''


def test_a_whole_state_point_shows_the_state_migrated(cli, deploy, tmp_path: Path) -> None:  # noqa: ANN001
    """A fresh-user finding (s33 F4, HIGH): at a point that shows the whole state, ``hazel show`` and ``--raw``
    printed the state as v1 stored it while v2 decides it: an approval settled a state nobody was shown, and
    ``show --raw > f; edit --file f`` was refused (``S2 has no field note``)."""
    deploy("whole_v1.py", WHOLE_V1)
    run_id = cli.json("run", "wholemig", "--input", '{"text": "y", "note": "n"}')["run"]["id"]
    deploy("whole_v2.py", WHOLE_V2)
    raw = cli("show", run_id, "--raw").stdout
    assert json.loads(raw) == {"text": "DRAFT OF Y", "owner": "migrated:n"}, raw
    shown = cli("show", run_id).stdout
    assert "migrated:n" in shown and "─ note ─" not in shown, shown
    assert "waiting at 'review_all': Review it all, v2" in shown, shown  # (s33 F9: v1's title)
    assert cli.json("show", run_id)["pending_request"]["title"] == "Review it all, v2"  # (s35 F4: --json too)
    whole = tmp_path / "whole.json"
    whole.write_text(raw.replace("DRAFT OF Y", "draft, edited"))
    done = cli.json("edit", run_id, "--file", str(whole))
    assert done["run"]["status"] == "completed" and done["run"]["workflow_version"] == 2
    assert cli.json("show", run_id)["state"] == {"text": "draft, edited", "owner": "migrated:n"}


def test_a_migration_only_an_older_deployed_version_declares_is_named(db_url: str) -> None:
    """s33 F6: with v2 (migrating from v1) and v3 (from v2 only) deployed, a v1 run was refused as if "no
    deployed version declares a migration from v1": only the latest version's migrations are used, and the
    refusal says so, naming the version that has one."""
    from pydantic import BaseModel

    from bot.engine import VersionUnavailableError
    from hazel import Workflow
    from tests.support.engine import make_hazel, person

    class S(BaseModel):
        text: str = ""

    def version(n: int, *froms: int) -> Workflow:
        wf = Workflow("chain", version=n, state=S)
        for f in froms:
            wf.migration(from_version=f)(lambda tree: tree)
        wf.steer("review", show="text", actions=["approve"])
        return wf

    old = make_hazel(db_url, version(1))
    run = old.start(workflow="chain", input={"text": "x"}, actor=person("olga"))
    old.drive(run_id=run.id)
    new = make_hazel(db_url, version(2, 1), version(3, 2))
    with pytest.raises(VersionUnavailableError, match=r"the latest deployed version, v3, declares no migration "
                       r"from v1 \(v2 does, and only the latest version's migrations are used: add "
                       r"@migration\(from_version=1\) to v3"):
        new.decide(run_id=run.id, action="approve", actor=person("olga"))
