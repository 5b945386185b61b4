"""``Hazel``: the engine wired together. Every entry point (CLI, Slack, Jira, REST, scheduler) goes through it.

```python
hazel = Hazel(Settings())             # store, workflows from HAZEL_WORKFLOWS, channels from settings
hazel.prepare()                       # schema (created on an empty database) + recovery of dead runs
run = hazel.start("migration-plan", {"request": "…"}, actor)
hazel.drive(run.id)                   # execute inline until it waits, ends or fails
hazel.decide(run.id, "approve", actor)
```
"""

from __future__ import annotations

import logging
import secrets
import time
from datetime import datetime
from typing import Any, Callable

from pydantic import BaseModel, ValidationError

from bot.ops import hooks
from bot.engine.clock import utcnow
from bot.engine.errors import InvalidInputError, NotAllowedError, RunNotFoundError
from bot.ops.outbox import ChannelRouter, Deliverer
from bot.engine.permissions import is_approver
from bot.engine.registry import Registry
from bot.engine.runner import DriveResult, Runner
from bot.settings import Settings
from bot.engine.steering.decide import DecisionOutcome, Steering, format_validation_error
from bot.engine.versions import decode_state
from bot.engine.workflow import START, Workflow
from integrations.base import Channel
from integrations.console import ConsoleChannel
from store import NewCheckpoint, Store
from store.models import (
    Action,
    Actor,
    AuditEvent,
    CheckpointInfo,
    Decision,
    Run,
    RunStatus,
    SteeringRequest,
)

log = logging.getLogger("hazel")


def _unknown_fields(model: type[BaseModel], data: object) -> list[str]:
    """Keys of an input dict that the state model would silently drop (a typo must not start a run with a
    default in its place). Models that allow extra fields accept anything."""
    if not isinstance(data, dict) or model.model_config.get("extra") == "allow":
        return []
    known = set(model.model_fields)
    for name, field in model.model_fields.items():
        if field.alias:
            known.add(field.alias)
        if isinstance(field.validation_alias, str):
            known.add(field.validation_alias)
    return sorted(str(k) for k in data if k not in known)


def new_run_id() -> str:
    """12 hex characters (48 random bits)."""
    return secrets.token_hex(6)


class Hazel:
    """The engine: store, registered workflows, runner, steering and outbox delivery.

    Args:
        settings: configuration (default: from the environment).
        store, registry: inject instead of building from ``settings``.
        channels: channel implementations by kind (``slack``, ``jira``); the console is always there.
        console: the console channel (to print elsewhere, e.g. stderr for ``--json`` output).
        load_workflows: import the modules named by ``HAZEL_WORKFLOWS``.
    """

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None,
                 registry: Registry | None = None, channels: dict[str, Channel] | None = None,
                 console: ConsoleChannel | None = None, clock: Callable[[], datetime] = utcnow,
                 load_workflows: bool = True) -> None:
        self.settings = settings or Settings()
        self.clock = clock
        self.store = store or Store(self.settings.database_url, sqlite_synchronous=self.settings.sqlite_synchronous)
        self.registry = registry or Registry()
        if load_workflows:
            self.load_workflows()
        self.console = console or ConsoleChannel()
        self.router = ChannelRouter({"console": self.console, **(channels or {})}, fallback=self.console)
        self.deliverer = Deliverer(self.store, self.router, self.registry.find, clock=clock)
        self.runner = Runner(self.store, self.registry, lease_sec=self.settings.lease_sec,
                             on_outbox=self.deliverer.wake, clock=clock)
        self.steering = Steering(self.store, self.registry, clock=clock, on_ready=self._ready,
                                 on_outbox=self.deliverer.wake)
        self._ready_listeners: list[Callable[[str], None]] = []
        hooks.install(self.store, self.deliverer, self.settings)

    # -- lifecycle ---------------------------------------------------------------------------------------

    def load_workflows(self) -> list[Workflow]:
        """Register the workflows of ``HAZEL_WORKFLOWS``. The default module is skipped quietly when it
        cannot be found (Hazel running outside its repository); a module named explicitly must load.

        Raises:
            WorkflowDefinitionError: a named module fails to import or defines an invalid workflow.
        """
        modules = self.settings.workflow_modules
        if "workflows" not in self.settings.model_fields_set:
            import importlib.util
            import os
            import sys

            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            modules = [m for m in modules if importlib.util.find_spec(m.split(".")[0]) is not None]
        return self.registry.load(modules)

    def prepare(self, *, upgrade_if_empty: bool = True) -> list[str]:
        """Check the schema (creating it on an empty database) and recover runs left ``running`` by a dead
        process. Returns the recovered run ids.

        Raises:
            SchemaNotReadyError: the database needs ``hazel db upgrade``.
        """
        self.store.ensure_schema(upgrade_if_empty=upgrade_if_empty)
        recovered = self.runner.recover()
        for run_id in recovered:
            self._ready(run_id)
        return recovered

    def on_ready(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(run_id)`` whenever a run becomes ready (workers use it to wake up)."""
        self._ready_listeners.append(listener)

    @property
    def has_ready_listeners(self) -> bool:
        """True when something in this process (a worker pool) executes runs as they become ready."""
        return bool(self._ready_listeners)

    def _ready(self, run_id: str) -> None:
        for listener in self._ready_listeners:
            listener(run_id)

    def close(self) -> None:
        self.runner.close()
        self.deliverer.stop()
        self.store.dispose()

    # -- starting and executing ------------------------------------------------------------------------

    def start(self, workflow: str, input: dict[str, Any] | BaseModel | None, actor: Actor, *,
              version: int | None = None) -> Run:
        """Create a run of ``workflow`` (its latest version unless ``version``) with ``input`` validated
        against the state model, checkpoint #0 holding it, status ``ready``. Nothing executes yet.

        Raises:
            UnknownWorkflowError, InvalidInputError, NotAllowedError.
        """
        wf = self.registry.get(workflow, version)
        if not wf.starters.empty and not is_approver(wf.starters, actor):
            raise NotAllowedError(f"{actor.label} may not start {wf.label}: only {wf.starters.describe()} may")
        unknown = _unknown_fields(wf.state, input)
        if unknown:
            raise InvalidInputError(f"invalid input for {wf.label}: unknown field {', '.join(map(repr, unknown))} "
                                    f"(fields: {', '.join(wf.state.model_fields)})")
        try:
            state = wf.codec.validate(input if input is not None else {})
        except ValidationError as exc:
            raise InvalidInputError(f"invalid input for {wf.label}: {format_validation_error(exc)}") from None
        now = self.clock()
        run_id = new_run_id()
        with self.store.transaction() as tx:
            tx.runs.insert(run_id=run_id, workflow=wf.name, workflow_version=wf.version, started_by=actor.id,
                           started_via=actor.channel, now=now)
            tx.checkpoints.write(NewCheckpoint(
                run_id=run_id, seq=0, parent_seq=None, branch=0, step=START, next_step=wf.first,
                workflow_version=wf.version, created_at=now), wf.codec.encode(state), None)
            tx.events.add(action="run.started", actor=actor, now=now, run_id=run_id, workflow=wf.name,
                          version=wf.version)
            tx.notify_ready(run_id)
            run = tx.runs.get(run_id)
        assert run is not None
        self._ready(run_id)
        return run

    def drive(self, run_id: str, *, wait_for_retries: bool = True,
              on_retry: Callable[[Run], None] | None = None) -> DriveResult:
        """Execute ``run_id`` in this thread until it waits, ends or fails (sleeping through retry backoffs
        when ``wait_for_retries``), then deliver due notifications. If another worker holds the run, returns
        at once with nothing done."""
        total = DriveResult(run=None)
        while True:
            claimed = self.runner.claim(run_id)
            if claimed is None:
                current = self.get(run_id)
                if (wait_for_retries and current.status is RunStatus.READY and current.wake_at is not None
                        and current.lease_owner is None):
                    if on_retry is not None:
                        on_retry(current)
                    time.sleep(max(0.0, (current.wake_at - self.clock()).total_seconds()) + 0.01)
                    continue
                total.run = current
                break
            result = self.runner.drive(claimed)
            total.steps.extend(result.steps)
            total.lease_lost = total.lease_lost or result.lease_lost
            total.run = result.run
            if result.run is None or result.run.status is not RunStatus.READY or not wait_for_retries:
                break
        self.deliverer.deliver_due()
        return total

    # -- steering (see bot.engine.steering.decide) ----------------------------------------------------------------------

    def decide(self, run_id: str, action: str | Action, actor: Actor, **kwargs: Any) -> DecisionOutcome:
        return self.steering.decide(run_id, action, actor, **kwargs)

    def rewind(self, run_id: str, actor: Actor, **kwargs: Any) -> DecisionOutcome:
        return self.steering.rewind(run_id, actor, **kwargs)

    def retry(self, run_id: str, actor: Actor) -> Run:
        return self.steering.retry(run_id, actor)

    def cancel(self, run_id: str, actor: Actor, *, reason: str | None = None) -> Run:
        return self.steering.cancel(run_id, actor, reason=reason)

    # -- reading -------------------------------------------------------------------------------------------

    def resolve(self, ref: str) -> str:
        """A run id from an id or a unique prefix of at least 4 characters.

        Raises:
            RunNotFoundError: no run, or the prefix is ambiguous.
        """
        ref = (ref or "").strip()
        with self.store.read() as tx:
            if ref and tx.runs.get(ref) is not None:
                return ref
            matches = tx.runs.find_by_prefix(ref, limit=6) if len(ref) >= 4 else []
        if len(matches) == 1:
            return matches[0]
        if matches:
            listed = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
            raise RunNotFoundError(f"run id {ref!r} is ambiguous: it starts {listed}")
        if 0 < len(ref) < 4:
            raise RunNotFoundError(f"no run {ref!r}: a shortened run id needs at least 4 characters")
        raise RunNotFoundError(f"no run {ref!r} (see `hazel runs`)")

    def get(self, run_id: str) -> Run:
        with self.store.read() as tx:
            run = tx.runs.get(run_id)
        if run is None:
            raise RunNotFoundError(f"no run {run_id!r} (see `hazel runs`)")
        return run

    def runs(self, *, statuses: list[str] | None = None, limit: int = 100, offset: int = 0,
             workflow: str | None = None) -> list[Run]:
        with self.store.read() as tx:
            return tx.runs.list(statuses=statuses, limit=limit, offset=offset, workflow=workflow)

    def pending_request(self, run_id: str) -> SteeringRequest | None:
        with self.store.read() as tx:
            return tx.requests.pending_for_run(run_id)

    def requests(self, run_id: str) -> list[SteeringRequest]:
        with self.store.read() as tx:
            return tx.requests.for_run(run_id)

    def checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        self.get(run_id)
        with self.store.read() as tx:
            return tx.checkpoints.list(run_id)

    def decisions(self, run_id: str) -> list[Decision]:
        with self.store.read() as tx:
            return tx.decisions.for_run(run_id)

    def audit(self, run_id: str) -> list[AuditEvent]:
        self.get(run_id)
        with self.store.read() as tx:
            return tx.events.for_run(run_id)

    def state_at(self, run_id: str, seq: int | None = None) -> BaseModel:
        """The run's state at checkpoint ``seq`` (default: its head), as its workflow's model.

        Raises:
            RunNotFoundError, CheckpointNotFoundError, VersionUnavailableError.
        """
        from bot.engine.errors import CheckpointNotFoundError

        run = self.get(run_id)
        with self.store.read() as tx:
            loaded = tx.checkpoints.load(run_id, run.head_seq if seq is None else seq)
        if loaded is None:
            raise CheckpointNotFoundError(f"run {run_id} has no checkpoint #{seq}")
        return decode_state(self.registry, run, loaded.info.workflow_version, loaded.tree)

    def state_tree_at(self, run_id: str, seq: int | None = None) -> Any:
        run = self.get(run_id)
        with self.store.read() as tx:
            loaded = tx.checkpoints.load(run_id, run.head_seq if seq is None else seq)
        return loaded.tree if loaded is not None else None


from bot.ops.worker import WorkerPool  # noqa: E402, F401  (re-exported: bot.engine.hazel.WorkerPool)
