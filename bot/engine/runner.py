"""Executing runs: claim a ready run with a lease, run its steps, checkpoint after each one, stop at a
steering point.

Every step ends in ONE transaction: the new checkpoint, the run's head and status (fenced by the lease token,
so a worker that lost its lease can never write), and, when the next node is a steering point, the pending
steering request and its outbox notification. Then the executing thread returns: nothing stays behind for a
waiting run. A step that raises is retried with exponential backoff and jitter by handing the run back to
the queue with a ``wake_at``; after its last attempt the run is ``failed`` with the error and traceback.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable

from pydantic import BaseModel, ValidationError

from bot.engine import transitions
from bot.engine import versions
from bot.engine.clock import utcnow
from bot.engine.errors import StepContractError, VersionUnavailableError
from bot.ops.logs import bind_log_context
from bot.engine.registry import Registry
from bot.engine.workflow import Step, StepContext, SteeringPoint, Workflow
from store import Fence, LeaseLostError, NewCheckpoint, Store
from store.models import Actor, Run, RunStatus

log = logging.getLogger("hazel.runner")
SYSTEM = Actor(id="hazel", channel="system", name="Hazel")


def make_owner() -> str:
    """Lease owner id: ``host:pid:nonce`` (the pid lets a restart on the same host spot dead owners)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def owner_is_dead(owner: str | None) -> bool:
    """True when ``owner`` names a process on this host that no longer exists."""
    if not owner:
        return True
    host, _, rest = owner.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass
class DriveResult:
    """What one drive of a run did: ``steps`` executed (names, in order) and the run as it was left."""

    run: Run | None
    steps: list[str] = field(default_factory=list)
    lease_lost: bool = False


class Runner:
    """Claims and executes runs of the workflows in ``registry``.

    Args:
        owner: this process's lease owner id (``make_owner()``).
        lease_sec: how long a claim lasts without renewal; a heartbeat renews it every ``lease_sec / 3``.
        on_outbox: called after a commit that wrote outbox rows (to wake the deliverer).
        on_step: called with ``(run_id, step_name)`` just before a step executes (metrics, benchmarks).
    """

    def __init__(self, store: Store, registry: Registry, *, owner: str | None = None, lease_sec: float = 60.0,
                 on_outbox: Callable[[], None] | None = None,
                 on_step: Callable[[str, str], None] | None = None,
                 clock: Callable[[], datetime] = utcnow, rng: random.Random | None = None) -> None:
        self.store = store
        self.registry = registry
        self.owner = owner or make_owner()
        self.lease_sec = lease_sec
        self.on_outbox = on_outbox or (lambda: None)
        self.on_step = on_step
        self.on_step_end: Callable[[str, str, float, bool], None] | None = None
        """Called with ``(workflow, step, duration_sec, ok)`` after each step function returns or raises
        (``bot.ops.metrics`` observes step durations with it)."""
        self.clock = clock
        self.rng = rng or random.Random()
        self._tokens: set[str] = set()
        self._tokens_lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()

    # -- claiming -----------------------------------------------------------------------------------------

    def claim(self, run_id: str | None = None) -> Run | None:
        """Lease one ready, due run (or ``run_id``). None when there is none or another worker won."""
        now = self.clock()
        token = secrets.token_hex(8)
        with self.store.transaction() as tx:
            run = tx.runs.claim(owner=self.owner, token=token, now=now,
                                lease_until=now + timedelta(seconds=self.lease_sec), run_id=run_id,
                                runnable=versions.runnable_versions(self.registry))
        if run is not None:
            self._hold(token)
        return run

    def recover(self) -> list[str]:
        """Hand back to the queue every ``running`` run whose worker is dead (same host, pid gone) or whose
        lease has expired. Returns their ids."""
        now = self.clock()
        recovered = []
        with self.store.read() as tx:
            candidates = tx.runs.running()
        for run in candidates:
            dead = owner_is_dead(run.lease_owner) and run.lease_owner != self.owner
            expired = run.lease_expires_at is not None and run.lease_expires_at < now
            if not (dead or expired):
                continue
            with self.store.transaction() as tx:
                if tx.runs.release_to_ready(run.id, now=now, only_token=None,
                                            expired_before=None if dead else now):
                    tx.events.add(action="run.recovered", actor=SYSTEM, now=now, run_id=run.id,
                                  previous_owner=run.lease_owner, reason="owner died" if dead else "lease expired")
                    tx.notify_ready(run.id)
                    recovered.append(run.id)
        if recovered:
            log.warning("recovered %d run(s) left running by a dead process: %s", len(recovered), recovered)
        return recovered

    # -- leases -------------------------------------------------------------------------------------------

    def _hold(self, token: str) -> None:
        with self._tokens_lock:
            self._tokens.add(token)
            if self._heartbeat is None or not self._heartbeat.is_alive():
                self._heartbeat = threading.Thread(target=self._renew_loop, name="hazel-lease-heartbeat",
                                                   daemon=True)
                self._heartbeat.start()

    def _drop(self, token: str | None) -> None:
        with self._tokens_lock:
            self._tokens.discard(token or "")

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease_sec / 3):
            with self._tokens_lock:
                tokens = list(self._tokens)
            if not tokens:
                continue
            try:
                with self.store.transaction() as tx:
                    tx.runs.renew_leases(tokens=tokens, lease_until=self.clock() + timedelta(seconds=self.lease_sec))
            except Exception:  # the next beat tries again; a lost lease is caught by the fenced write
                log.exception("lease renewal failed")

    def close(self) -> None:
        self._stop.set()

    # -- executing ----------------------------------------------------------------------------------------

    @bind_log_context(run_id="run.id")
    def drive(self, run: Run, *, hand_back: threading.Event | None = None) -> DriveResult:
        """Execute the leased ``run`` until it waits at a steering point, ends, fails, is scheduled for a
        retry, or loses its lease; or, once ``hand_back`` is set (the process is stopping), until the step in
        flight is checkpointed, handing the run back as ``ready``. Returns what happened; never raises for a
        step's own error."""
        token = run.lease_token
        assert token is not None, "drive() needs a run claimed by this runner"
        result = DriveResult(run=None)
        try:
            resolved = self._workflow(run)
            if resolved is None:
                return result
            wf, run = resolved
            self._execute(run, wf, token, result, hand_back)
        except LeaseLostError:
            log.warning("run %s: lease lost (cancelled or taken over); stopping here", run.id)
            result.lease_lost = True
        finally:
            self._drop(token)
            with self.store.read() as tx:
                result.run = tx.runs.get(run.id)
        return result

    def _workflow(self, run: Run) -> tuple[Workflow, Run] | None:
        """The definition to execute ``run`` on, migrating its state first when its version is gone and the
        latest version declares a migration from it (under this worker's lease). None: handed back."""
        now = self.clock()
        target = versions.target_workflow(self.registry, run)
        if target is None:  # not runnable here (claim filters these out; a registry change raced us)
            with self.store.transaction() as tx:
                tx.runs.release_to_ready(run.id, now=now, only_token=run.lease_token)
            return None
        if target.version == run.workflow_version:
            return target, run
        token = run.lease_token or ""
        try:
            with self.store.transaction() as tx:
                seq = versions.write_migration(tx, run=run, target=target, parent_seq=run.head_seq, now=now)
                tx.runs.advance(run.id, token=token, now=now, head_seq=seq, last_seq=seq,
                                workflow_version=target.version, status=RunStatus.RUNNING)
        except VersionUnavailableError as exc:  # the migration itself failed: a deployment bug, shown loudly
            with self.store.transaction() as tx:
                tx.runs.advance(run.id, token=token, now=now, status=RunStatus.FAILED, error=str(exc))
                tx.events.add(action="run.failed", actor=SYSTEM, now=now, run_id=run.id, error=str(exc))
                transitions.progress(tx, run_id=run.id, now=now, event="failed", error=str(exc))
            self.on_outbox()
            return None
        with self.store.read() as tx:
            migrated = tx.runs.get(run.id)
        assert migrated is not None
        return target, migrated

    def _execute(self, run: Run, wf: Workflow, token: str, result: DriveResult,
                 hand_back: threading.Event | None = None) -> None:
        with self.store.read() as tx:
            head = tx.checkpoints.load(run.id, run.head_seq)
            assert head is not None, f"run {run.id} has no checkpoint #{run.head_seq}"
            position = tx.checkpoints.position(head)
        tree = head.tree
        state = wf.codec.decode(tree)
        node_name = head.info.next_step
        handoff = head.info.handoff or {}
        seq, last_seq, branch, attempt = head.info.seq, run.last_seq, run.branch, run.attempt

        while True:
            now = self.clock()
            if node_name is None:  # only after a rewind to a final checkpoint: the run is complete again
                with self.store.transaction() as tx:
                    tx.runs.advance(run.id, token=token, now=now, status=RunStatus.COMPLETED)
                    transitions.progress(tx, run_id=run.id, now=now, event="completed", steps=result.steps)
                self.on_outbox()
                return
            node = wf.nodes[node_name]
            if isinstance(node, SteeringPoint):
                with self.store.transaction() as tx:
                    tx.runs.advance(run.id, token=token, now=now, status=RunStatus.WAITING)
                    transitions.open_request(tx, run_id=run.id, wf=wf, point=node, checkpoint_seq=seq, now=now,
                                             steps=result.steps)
                self.on_outbox()
                return

            ctx = StepContext(
                run_id=run.id, step=node.name, seq=seq, attempt=attempt + 1,
                idempotency_key=f"{run.id}:{seq}:{node.name}", started_by=run.started_by, workflow=wf.name,
                workflow_version=wf.version, feedback=handoff.get("feedback"), rejection=handoff.get("rejection"),
                feedback_by=handoff.get("by"), log=logging.getLogger(f"hazel.step.{wf.name}.{node.name}"),
            )
            if self.on_step is not None:
                self.on_step(run.id, node.name)
            try:
                new_state = self._timed_call(node, wf, state, ctx)
                next_name = ctx._goto or wf.next_of(node.name)
                if next_name is not None and next_name not in wf.nodes:
                    raise StepContractError(f"step {node.name!r} routed to unknown node {next_name!r}")
                new_tree = wf.codec.encode(new_state)
            except Exception as exc:  # the step's own error: retry or fail, never crash the worker
                self._failed(run, wf, node, token, attempt + 1, exc)
                return
            done = [*result.steps, node.name]
            last_seq += 1
            next_node = wf.nodes.get(next_name) if next_name else None
            status = (RunStatus.COMPLETED if next_node is None else
                      RunStatus.WAITING if isinstance(next_node, SteeringPoint) else RunStatus.RUNNING)
            with self.store.transaction() as tx:  # the checkpoint and the run's head, fenced by the lease
                position = tx.checkpoints.write(NewCheckpoint(
                    run_id=run.id, seq=last_seq, parent_seq=seq, branch=branch, step=node.name,
                    next_step=next_name, workflow_version=wf.version, created_at=now,
                ), new_tree, position, fence=Fence(run.id, token, now, dict(
                    head_seq=last_seq, last_seq=last_seq, status=status, attempt=0, error=None,
                    error_traceback=None, lease_expires_at=now + timedelta(seconds=self.lease_sec)
                    if status is RunStatus.RUNNING else None)))
                if isinstance(next_node, SteeringPoint):
                    transitions.open_request(tx, run_id=run.id, wf=wf, point=next_node, checkpoint_seq=last_seq,
                                             now=now, steps=done)
                elif next_node is None:
                    transitions.progress(tx, run_id=run.id, now=now, event="completed", steps=done)
            result.steps.append(node.name)  # only once its checkpoint is committed
            if status is not RunStatus.RUNNING:
                self.on_outbox()
                return
            if hand_back is not None and hand_back.is_set():  # the process is stopping: hand the run back
                with self.store.transaction() as tx:
                    tx.runs.advance(run.id, token=token, now=self.clock(), status=RunStatus.READY)
                    tx.notify_ready(run.id)
                log.info("run %s handed back at checkpoint #%d: this process is stopping", run.id, last_seq)
                return
            state, tree, seq, node_name, handoff, attempt = new_state, new_tree, last_seq, next_name, {}, 0

    def _timed_call(self, step: Step, wf: Workflow, state: BaseModel, ctx: StepContext) -> BaseModel:
        """``_call``, reported to ``on_step_end`` with its duration and whether it returned."""
        if self.on_step_end is None:
            return self._call(step, wf, state, ctx)
        started, ok = time.perf_counter(), False
        try:
            out = self._call(step, wf, state, ctx)
            ok = True
            return out
        finally:
            self.on_step_end(wf.name, step.name, time.perf_counter() - started, ok)

    @staticmethod
    def _call(step: Step, wf: Workflow, state: BaseModel, ctx: StepContext) -> BaseModel:
        out = step.fn(state, ctx)
        if out is None:
            return state
        if isinstance(out, wf.state):
            return out
        if isinstance(out, dict):
            try:
                return wf.state.model_validate({**state.model_dump(), **out})
            except ValidationError as exc:
                raise StepContractError(f"step {step.name!r} returned fields that fail validation: {exc}") \
                    from exc
        raise StepContractError(f"step {step.name!r} must return {wf.state.__name__}, a dict of changed fields, "
                                f"or None; got {type(out).__name__}")

    def _failed(self, run: Run, wf: Workflow, step: Step, token: str, attempts: int, exc: Exception) -> None:
        now = self.clock()
        message = f"{type(exc).__name__}: {exc}"
        trace = "".join(traceback.format_exception(exc))
        if isinstance(exc, StepContractError):
            attempts = step.max_attempts  # a broken contract fails the same way every time: no retry
        log.warning("run %s step %s attempt %d/%d failed: %s", run.id, step.name, attempts, step.max_attempts,
                    message)
        with self.store.transaction() as tx:
            if attempts < step.max_attempts:
                delay = step.backoff_for(attempts, self.rng)
                tx.runs.advance(run.id, token=token, now=now, status=RunStatus.READY, attempt=attempts,
                                wake_at=now + timedelta(seconds=delay), error=message, error_traceback=trace)
                tx.events.add(action="step.retry_scheduled", actor=SYSTEM, now=now, run_id=run.id, step=step.name,
                              attempt=attempts, max_attempts=step.max_attempts, delay_sec=round(delay, 3),
                              error=message)
            else:
                tx.runs.advance(run.id, token=token, now=now, status=RunStatus.FAILED, attempt=attempts,
                                error=message, error_traceback=trace)
                tx.events.add(action="step.failed", actor=SYSTEM, now=now, run_id=run.id, step=step.name,
                              attempts=attempts, error=message)
                transitions.progress(tx, run_id=run.id, now=now, event="failed", step=step.name, error=message)
        if attempts >= step.max_attempts:
            self.on_outbox()

