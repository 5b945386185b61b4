"""Which workflow definition a run continues on, across deployments.

A run pins the version it started on and resumes on it while that version is registered. When it is not (new
code deployed while the run waited), the latest registered version may declare a state migration from the
run's version (``@wf.migration(from_version=1)``, a function from the old state tree to the new one): the run
is then migrated in one transaction (a ``__migrate__`` checkpoint holding the migrated state, the run now on
the new version) and continues. Otherwise the run is left exactly as it is and whatever was asked of it is
refused with a message naming the missing version.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from bot.engine import lgraph
from bot.engine.errors import RunStateError, VersionUnavailableError, error_line, validation_details
from bot.engine.registry import Registry
from bot.engine.workflow import MIGRATE_NODE, SteeringPoint, Workflow
from store import NewCheckpoint, Tx
from store.models import SYSTEM, LoadedCheckpoint, Run, SteeringRequest


def target_workflow(registry: Registry, run: Run) -> Workflow | None:
    """The definition ``run`` continues on: its pinned version, else the latest version of its workflow that
    declares a migration from it, else None."""
    pinned = registry.find(run.workflow, run.workflow_version)
    if pinned is not None:
        return pinned
    versions = registry.versions(run.workflow)
    if versions:
        latest = registry.find(run.workflow, versions[-1])
        if latest is not None and run.workflow_version in latest.migrations:
            return latest
    return None


def resolve_workflow(registry: Registry, run: Run) -> Workflow:
    """Like ``target_workflow`` but raising when there is none.

    Raises:
        VersionUnavailableError: naming the run's version and what is deployed.
    """
    wf = target_workflow(registry, run)
    if wf is not None:
        return wf
    have = registry.versions(run.workflow)
    if not have:  # no version at all: the process was not given the module (a shell without HAZEL_WORKFLOWS)
        raise VersionUnavailableError(
            f"run {run.id} is on workflow {run.workflow!r} version {run.workflow_version}, which this process does "
            f"not have: no version of {run.workflow!r} is registered here (registered: "
            f"{', '.join(registry.names()) or 'none'}); set HAZEL_WORKFLOWS to the "
            "module that defines it; the run stays as it is")
    deployed = ", ".join(f"v{v}" for v in have) or "none"
    if isinstance(registry.find(run.workflow, have[-1]), lgraph.LangGraphWorkflow):  # (a graph has no migrations)
        raise VersionUnavailableError(
            f"run {run.id} is on graph {run.workflow!r} version {run.workflow_version}, which is not deployed "
            f"(deployed: {deployed}); a graph's run continues only on its own version: register v"
            f"{run.workflow_version} beside the new one, or cancel the run; the run stays as it is")
    others = [v for v in have[:-1] if run.workflow_version in getattr(registry.find(run.workflow, v), "migrations", {})]
    if others:  # (s33 F6: "no deployed version declares" one, while v2 did: only the latest's is taken)
        raise VersionUnavailableError(
            f"run {run.id} is on workflow {run.workflow!r} version {run.workflow_version}, which is not deployed "
            f"(deployed: {deployed}); the latest deployed version, v{have[-1]}, declares no migration from "
            f"v{run.workflow_version} (v{others[-1]} does, and only the latest version's migrations are used: "
            f"add @migration(from_version={run.workflow_version}) to v{have[-1]}, one that gives v{have[-1]}'s "
            f"state); the run stays as it is until then")
    raise VersionUnavailableError(
        f"run {run.id} is on workflow {run.workflow!r} version {run.workflow_version}, which is not deployed "
        f"(deployed: {deployed}) and no deployed version declares a migration "
        f"from v{run.workflow_version}; the run stays as it is until one is deployed"
    )


def unknown_step(wf: Workflow, run_id: str, name: str | None) -> str | None:
    """Why run ``run_id`` cannot go on with the node ``name`` on ``wf`` (None: it can, or it ends there): a
    native workflow without that step or steering point, its code changed under the same version (a step
    renamed: ``KeyError: 'work'`` failed ``hazel retry``, and each rewind added a checkpoint that failed at once:
    a fresh-user finding, s33 F17). A LangGraph graph's nodes are its own business (``lgraph``)."""
    from bot.engine.workflow import END

    if name is None or name == END or isinstance(wf, lgraph.LangGraphWorkflow) or name in wf.nodes:
        return None
    return (f"run {run_id} goes on with step {name!r}, which {wf.label} does not have (renamed or removed under "
            f"the same version?); deploy the code the run was written with, or the change as a new version, or "
            "rewind the run to a checkpoint that goes on with a step it has")


def runnable_versions(registry: Registry) -> dict[str, list[int]]:
    """Per workflow name, the run versions this process can execute: the registered ones plus those the latest
    version migrates from. Workers claim only these, so an old process in a rolling deploy never takes (and
    fails) a run of a version it does not have."""
    out: dict[str, list[int]] = {}
    for wf in registry.all():
        out.setdefault(wf.name, []).append(wf.version)
    for name, versions in out.items():
        latest = registry.find(name, max(versions))
        if latest is not None:
            versions.extend(v for v in latest.migrations if v not in versions)
    return out


MIGRATION_DETAILS_MAX_CHARS = 400
"""Characters of a failed migration's reasons in its message (the fields the new model refuses and why: one
line on every channel, however many fields fail)."""


def migrate_tree(target: Workflow, from_version: int, tree: Any, *, run_id: str) -> Any:
    """Apply ``target``'s migration from ``from_version`` to a state tree and validate the result.

    Raises:
        VersionUnavailableError: the migration raised, or produced a state the new model refuses. Its message
            is one line (every channel shows it as it is: the CLI's ``error:`` line, REST's 409, Slack's and
            Jira's answers) that names why: each field the new model refuses and the reason, at most
            ``MIGRATION_DETAILS_MAX_CHARS`` characters of them (``run R: migrating its state from v1 to mig v2
            failed: the migrated state does not fit mig v2's state model (S2): owner: Field required``; a state
            that is not a mapping is named ``(state)``), or the migration function's error and the first line of
            its message (``… failed: the migration function raised KeyError: 'draft'``).
    """
    failed = f"run {run_id}: migrating its state from v{from_version} to {target.label} failed"
    try:
        migrated = target.migrations[from_version](copy.deepcopy(tree))
    except Exception as exc:  # the author's function: report, never half-apply
        raise VersionUnavailableError(f"{failed}: the migration function raised {error_line(exc)}") from exc
    try:
        return target.codec.encode(target.codec.decode(migrated))
    except ValidationError as exc:  # (pydantic's str() is several lines, the fields after the first)
        details = validation_details(exc, root="(state)", max_chars=MIGRATION_DETAILS_MAX_CHARS)
        raise VersionUnavailableError(f"{failed}: the migrated state does not fit {target.label}'s state model "
                                      f"({exc.title}): {details}") from exc
    except Exception as exc:  # a state the codec cannot encode (a validator's odd value): report it as well
        raise VersionUnavailableError(f"{failed}: {error_line(exc)}") from exc


def write_migration(tx: Tx, *, run: Run, target: Workflow, parent_seq: int, now: datetime) -> int:
    """Write the ``__migrate__`` checkpoint after ``parent_seq`` (its state migrated to ``target``) and point
    the run at it on the new version. The caller has locked the run (lease or conditional update) and moves
    ``head_seq``/``last_seq`` itself. Returns the new checkpoint's sequence number.

    Raises:
        VersionUnavailableError: the migration fails, or the node the run continues at is not in ``target``.
    """
    loaded = tx.checkpoints.load(run.id, parent_seq)
    assert loaded is not None
    next_step = loaded.info.next_step
    if next_step is not None and next_step not in target.nodes:
        raise VersionUnavailableError(
            f"run {run.id} continues at {next_step!r}, which {target.label} does not have; it stays on "
            f"v{run.workflow_version}")
    tree = migrate_tree(target, run.workflow_version, loaded.tree, run_id=run.id)
    seq = run.last_seq + 1
    tx.checkpoints.write(NewCheckpoint(
        run_id=run.id, seq=seq, parent_seq=parent_seq, branch=run.branch, step=MIGRATE_NODE, next_step=next_step,
        workflow_version=target.version, created_at=now, handoff=loaded.info.handoff), tree,
        tx.checkpoints.position(loaded))
    tx.events.add(action="run.migrated", actor=SYSTEM, now=now, run_id=run.id, from_version=run.workflow_version,
                  to_version=target.version, checkpoint=seq)
    return seq


def decode_stored(wf: Workflow, tree: Any) -> Any:
    """The state tree a run stored, as ``wf``'s state model, for a decision to change it (an edit, a rewind's
    edits).

    Raises:
        RunStateError: the stored state no longer fits the model (it changed under the same version): the
            decision is refused (REST 409) instead of failing as an invalid edit of fields nobody touched.
    """
    try:
        return wf.codec.decode(tree)
    except ValidationError as exc:
        details = validation_details(exc, root="(state)")
        raise RunStateError(f"the run's stored state no longer loads as {wf.label}'s state ({details}): its state "
                            "model changed under the same version; deploy the model the run was written with, "
                            "or a new version with a migration") from None


def decode_state(registry: Registry, run: Run, version: int, tree: Any) -> Any:
    """A checkpoint's state tree (written by ``version``) as a model: with that version's definition when it is
    registered, else migrated to the run's target version.

    Raises:
        VersionUnavailableError: neither is possible.
    """
    own = registry.find(run.workflow, version)
    if own is not None:
        return own.codec.decode(tree)
    target = resolve_workflow(registry, run)
    if version == target.version:
        return target.codec.decode(tree)
    if version not in target.migrations:
        raise VersionUnavailableError(f"state of run {run.id} at v{version} cannot be read: v{version} is not "
                                      f"deployed and {target.label} declares no migration from it")
    return target.codec.decode(migrate_tree(target, version, tree, run_id=run.id))


def point_in(target: Workflow, name: str, run: Run, *, tree: Any = None) -> SteeringPoint:
    """The steering point ``name`` in ``target`` (a LangGraph workflow's are in the tree of the checkpoint
    the request was asked at: ``tree``; see ``bot.engine.lgraph``).

    Raises:
        VersionUnavailableError: ``target`` has no such steering point.
    """
    node = lgraph.find_node(target, name, lambda: tree)
    if not isinstance(node, SteeringPoint):
        same = target.version == run.workflow_version  # (its code changed under the same version: s34 F11)
        raise VersionUnavailableError(
            f"run {run.id} waits at {name!r}, which {target.label} does not have as a steering point"
            + (" (renamed or removed under the same version?); deploy the code the run was written with, or cancel "
               "the run; it stays as it is" if same else f"; it stays on v{run.workflow_version}"))
    return node


def request_point(tx: Tx, wf: Workflow | None, run: Run, request: SteeringRequest) -> SteeringPoint | None:
    """The steering point ``request`` waits at in ``wf`` (None: ``wf`` is None or lacks it). A LangGraph
    workflow's points are read from the checkpoint the request was asked at (one read, for those only)."""
    if wf is None:
        return None
    node = lgraph.find_node(wf, request.point, lambda: _tree_at(tx, run.id, request.checkpoint_seq))
    return node if isinstance(node, SteeringPoint) else None


def find_point(wf: Workflow | None, name: str, tree: Any) -> SteeringPoint | None:
    """The steering point ``name`` of ``wf`` at a checkpoint whose tree is ``tree`` (None: there is none)."""
    node = lgraph.find_node(wf, name, lambda: tree) if wf is not None else None
    return node if isinstance(node, SteeringPoint) else None


def asked_at(wf: Workflow | None, run: Run, request: SteeringRequest,
             loaded: LoadedCheckpoint | None) -> tuple[SteeringPoint | None, Any, str | None]:
    """What a decision on ``request`` is made against: ``(its steering point in wf, the state tree, why the
    tree is not migrated)``.

    ``wf`` is the definition the run continues on (``target_workflow``); ``loaded`` is the checkpoint the
    request was asked at. When another version wrote that checkpoint (the run's version is no longer deployed
    and ``wf`` declares a migration from it), the tree is migrated to ``wf`` as a decision migrates the run
    before it edits (``Decisions._current``), so that what a channel shows (``show="plan"``: the value of
    ``plan``) is what an edit replaces. A migration that fails leaves the stored tree, and the third item is
    its error's message (``migrate_tree``: the fields the new model refuses and why), with which every decision
    on the request is refused; None when nothing failed. The point is None when ``wf`` is None or has no such
    point; the tree is None when ``loaded`` is.
    """
    tree = loaded.tree if loaded is not None else None
    written_by = loaded.info.workflow_version if loaded is not None else run.workflow_version
    failed: str | None = None
    if wf is not None and loaded is not None and written_by != wf.version and written_by in wf.migrations:
        try:
            tree = migrate_tree(wf, written_by, tree, run_id=run.id)
        except VersionUnavailableError as exc:
            failed = exc.message  # shown as stored; deciding on it is refused with this error
    return find_point(wf, request.point, tree), tree, failed


def _tree_at(tx: Tx, run_id: str, seq: int) -> Any:
    loaded = tx.checkpoints.load(run_id, seq)
    return loaded.tree if loaded is not None else None
