"""Which workflow definition a run continues on: the version it pinned when it started."""

from __future__ import annotations

from bot.errors import VersionUnavailableError
from bot.registry import Registry
from bot.workflow import Workflow
from store.models import Run


def resolve_workflow(registry: Registry, run: Run) -> Workflow:
    """The definition ``run`` is pinned to.

    Raises:
        VersionUnavailableError: that version is not registered any more; the message names it and what is.
    """
    wf = registry.find(run.workflow, run.workflow_version)
    if wf is not None:
        return wf
    have = registry.versions(run.workflow)
    raise VersionUnavailableError(
        f"run {run.id} is on workflow {run.workflow!r} version {run.workflow_version}, which is not deployed "
        f"(deployed: {', '.join(f'v{v}' for v in have) or 'none'}); the run stays as it is until that version "
        "or a migration from it is deployed"
    )
