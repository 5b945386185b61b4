"""Executing runs: a leased run's steps, a checkpoint after each one, stopping at a steering point.

Every step ends in ONE transaction: the new checkpoint and the run's head and status (fenced by the lease
token, so a worker that lost its lease can never write), and, when the next node is a steering point, the
pending steering request and its outbox notification. Then the executing thread returns: nothing stays
behind for a waiting run. A step that raises is retried with exponential backoff and jitter by handing the
run back to the queue with a ``wake_at``; after its last attempt the run is ``failed`` with the error and
traceback. An error outside a step (a state that cannot be loaded or decoded) fails the run at once, as it would
fail the same way on every attempt; only a database that is unreachable leaves the run to recovery.

A run arrives as a ``Claim``: leased by a claim (``Runner.claim``), or by the transaction that made it runnable
(a start or a decision that executes in this process). A claim made by such a transaction carries the run's
head (``Head``: the state tree and where it sits in its snapshot chain), so the first step starts without
reading anything; the state then stays in memory from step to step.
"""

from __future__ import annotations

import importlib
import logging
import random
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

import sqlalchemy.exc
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from bot.engine import lgraph, transitions, versions
from bot.engine.clock import utcnow
from bot.engine.errors import StepContractError, VersionUnavailableError, is_database_error, shown_text, traceback_text
from bot.engine.leases import Leases, make_owner
from bot.engine.logcontext import log_context
from bot.engine.registry import Registry
from bot.engine.workflow import END, Step, StepContext, SteeringPoint, Workflow, unknown_fields
from store import ChainPosition, Fence, LeaseLostError, NewCheckpoint, SchemaNotReadyError, Store
from store.migrate import names_missing_schema
from store.steps import StepWriter
from store.models import SYSTEM, Run, RunStatus, shown_error

log = logging.getLogger("hazel.runner")

LEASE_LOST = "run %s: lease lost (cancelled or taken over); stopping here"
"""The warning (``log``'s, its one argument the run id) of a drive that stopped because its lease is gone: the run
was cancelled, or another worker took it over. A CLI command that reports the cancel itself leaves it out
(``bot.cli.ended``); ``hazel serve`` / ``hazel worker`` log it."""

TRANSIENT_ERRORS = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError, sqlalchemy.exc.TimeoutError,
                    sqlalchemy.exc.DisconnectionError)
"""SQLAlchemy's errors of a database that is down or unreachable (``is_transient`` adds the drivers' own)."""
_DRIVERS = ("sqlite3", "psycopg")
"""The drivers whose own ``OperationalError`` / ``InterfaceError`` also mean the database is down."""


def transient_error_classes(*, import_drivers: bool = False) -> tuple[type[BaseException], ...]:
    """``TRANSIENT_ERRORS`` and the drivers' own ``OperationalError`` / ``InterfaceError``: of the drivers
    already imported (a driver not imported has raised nothing: none is imported here), or of every one
    installed with ``import_drivers`` (an exception handler registered before any connection is made)."""
    found: list[type[BaseException]] = list(TRANSIENT_ERRORS)
    for name in _DRIVERS:
        module = sys.modules.get(name)
        if module is None and import_drivers:
            try:
                module = importlib.import_module(name)
            except ImportError:  # (psycopg is a dependency; a build without it has no PostgreSQL)
                continue
        if module is not None:
            found += [module.OperationalError, module.InterfaceError]
    return tuple(found)


def _first_warning(exc: Exception) -> str:
    """pydantic's first serializer warning of ``exc``, shortened: ``Expected `str` … [field_name='plan',
    input_value=123, input_type=int]``."""
    lines = [line.strip() for line in str(exc).splitlines() if "Expected" in line or "field_name" in line]
    text = lines[0] if lines else str(exc)
    text = text.removeprefix("PydanticSerializationUnexpectedValue(").removesuffix(")")
    return text if len(text) <= 300 else text[:299] + "…"


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the database is down or unreachable: one of ``TRANSIENT_ERRORS``, or the driver's
    own ``OperationalError`` / ``InterfaceError`` (raised where Hazel talks to the driver's connection directly:
    a ``psycopg.OperationalError`` "connection failed" once failed a run that an outage had only interrupted).
    A drive that meets one leaves its run leased (a worker pool hands it back as soon as the database answers
    again: ``bot.ops.worker``; else recovery, when its lease runs out), where any other error outside a step
    fails the run (``Runner.drive``). Not SQLite's "no such column" / "no such table", an ``OperationalError``
    too: the database answered, and its schema is not this Hazel's (``store.migrate.names_missing_schema``;
    ``schema_behind`` says why), as PostgreSQL's ``ProgrammingError`` says."""
    classes = transient_error_classes()
    seen: BaseException | None = exc
    for _ in range(5):  # the error, and what it was raised from (a wrapper's cause)
        if seen is None:
            break
        if isinstance(seen, classes):
            return not names_missing_schema(seen)
        seen = seen.__cause__
    return False


def schema_behind(store: Store, exc: BaseException) -> str | None:
    """Why ``exc`` happened when the database's schema is older than this Hazel needs (a ``hazel db downgrade``
    under a running process), in the words every command refuses with ("the database is at schema revision
    0005, this Hazel needs 0009: run `hazel db upgrade`"); None when that is not why. A ``SchemaNotReadyError``
    (itself, or what it was raised from) says so; an error of the database that is not an outage
    (``is_database_error``, not ``is_transient``: a column or table the statement named is missing, on either
    database) is checked with ``Store.health`` (one query, asked only after such an error); nothing else is."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            break
        if isinstance(seen, SchemaNotReadyError):
            return str(seen)
        seen = seen.__cause__
    if not is_database_error(exc) or is_transient(exc):
        return None
    return store.health().schema


@dataclass(frozen=True)
class Head:
    """A run's head checkpoint as the runner continues from it: its state tree and chain position
    (``position.seq``, ``position.tree``), the node that runs next, what a decision handed to it, its branch,
    and the run's latest steering request when the claiming transaction knew it (``transitions.Asked``; None:
    read when the drive reports progress)."""

    position: ChainPosition
    next_step: str | None
    handoff: dict[str, Any] | None
    branch: int
    asked: transitions.Asked | None = None


@dataclass(frozen=True)
class Claim:
    """A run leased by this process (``run.lease_token``), with its head when the claiming transaction had it
    in hand (None: the runner loads it)."""

    run: Run
    head: Head | None = None


@dataclass
class DriveResult:
    """What one drive of a run did: ``steps`` executed (names, in order), ``status`` the run was left in
    (None when the drive stopped before deciding one: a lost lease, a hand-back), ``started_at`` when it began
    (UTC; what a caller compares the run's later events with: a cancel that cut it short), and ``run``: the run
    as it is now (read on first access)."""

    run_id: str
    store: Store | None = None
    steps: list[str] = field(default_factory=list)
    lease_lost: bool = False
    status: RunStatus | None = None
    started_at: datetime | None = None
    _run: Run | None = None

    @property
    def run(self) -> Run | None:
        if self._run is None and self.store is not None:
            with self.store.read() as tx:
                self._run = tx.runs.get(self.run_id)
        return self._run


class Runner:
    """Claims and executes runs of the workflows in ``registry``.

    Args:
        owner: this process's lease owner id (``make_owner()``).
        lease_sec: how long a claim lasts without renewal; a heartbeat renews it every ``lease_sec / 3``.
    """

    def __init__(self, store: Store, registry: Registry, *, owner: str | None = None, lease_sec: float = 60.0,
                 clock: Callable[[], datetime] = utcnow, rng: random.Random | None = None) -> None:
        self.store = store
        self.registry = registry
        self.lease_sec = lease_sec
        self.clock = clock
        self.rng = rng or random.Random()
        self.leases = Leases(store, owner=owner or make_owner(), lease_sec=lease_sec, clock=clock,
                             transient=is_transient)
        self.on_outbox: Callable[[], None] = lambda: None
        """Called after a commit that wrote outbox rows (wakes the deliverer)."""
        self.redact: Callable[[str], str] = lambda text: text
        """Applied to an error's message and traceback before they are stored, shown or sent (``Hazel`` sets
        ``bot.settings.Redactor`` of the settings' secrets: a step's exception may quote a token)."""
        self.on_step: Callable[[str, str], None] | None = None
        """Called with ``(run_id, step_name)`` just before a step executes (benchmarks, tests)."""
        self.on_step_end: Callable[[str, str, float, bool], None] | None = None
        """Called with ``(workflow, step, duration_sec, ok)`` after each step function returns or raises."""

    @property
    def owner(self) -> str:
        """This process's lease owner id (``host:pid:nonce``)."""
        return self.leases.owner

    @owner.setter
    def owner(self, value: str) -> None:
        self.leases.owner = value

    # -- claiming -----------------------------------------------------------------------------------------

    def claim(self, run_id: str | None = None) -> Claim | None:
        """Lease one ready, due run (or ``run_id``). None when there is none or another worker won."""
        now = self.clock()
        token = secrets.token_hex(8)
        with self.store.transaction() as tx:
            with tx.pipeline(commit=True):  # PostgreSQL: BEGIN, the claim and COMMIT in one round trip
                claimed = tx.runs.claim_later(owner=self.owner, token=token, now=now,
                                              lease_until=self.leases.until(now), run_id=run_id,
                                              runnable=versions.runnable_versions(self.registry))
            run = claimed.get()  # (SQLite commits when the transaction ends: its answer is read before)
        if run is None:
            return None
        self.leases.hold(token)
        return Claim(run)

    def release(self, claim: Claim) -> bool:
        """Hand a claimed run that will not be executed here back to the queue (``ready``)."""
        with self.store.transaction() as tx:
            released = tx.runs.release_to_ready(claim.run.id, now=self.clock(), only_token=claim.run.lease_token)
            if released:
                tx.notify_ready(claim.run.id)
        self.leases.drop(claim.run.lease_token)
        return released

    def recover(self) -> list[str]:
        """Hand back the runs of dead processes and expired leases (``Leases.recover``)."""
        return self.leases.recover()

    def close(self) -> None:
        self.leases.close()

    # -- executing ----------------------------------------------------------------------------------------

    def drive(self, claim: Claim, *, hand_back: threading.Event | None = None) -> DriveResult:
        """Execute the leased run until it waits at a steering point, ends, fails, is scheduled for a retry,
        or loses its lease; or, once ``hand_back`` is set (the process is stopping), until the step in flight
        is checkpointed, handing the run back as ``ready``. Never raises for a step's own error; an error of
        Hazel's own outside a step (the state cannot be loaded, decoded or written) fails the run with it
        (``run.failed``, ``outside_step``) rather than leave it to crash again after each recovery.

        Raises:
            sqlalchemy.exc.OperationalError and the other errors of ``is_transient``: the database is unreachable (the
                run stays ``running`` until recovery hands it back).
            SchemaNotReadyError: the database's schema is older than this Hazel needs (``schema_behind``), met by
                the step (a LangGraph graph's checkpointer) or by Hazel's own statements: nothing of the step is
                written and no attempt is counted; the run stays ``running`` as after an outage (a worker pool
                hands it back and claims nothing more until the schema is upgraded: ``bot.ops.worker``).
        """
        run = claim.run
        token = run.lease_token
        assert token is not None, "drive() needs a run claimed by this runner"
        result = DriveResult(run_id=run.id, store=self.store, started_at=self.clock())
        self.leases.hold(token)
        with log_context(run_id=run.id):
            try:
                resolved = self._workflow(run)
                if resolved is not None:
                    wf, migrated = resolved
                    head = claim.head if migrated is run else None
                    self._execute(migrated, wf, token, head or self._load_head(migrated), result, hand_back)
            except LeaseLostError:
                log.warning(LEASE_LOST, run.id)
                result.lease_lost = True
            except SchemaNotReadyError:  # (a step's: its checkpointer's) the same as below, its words ready
                raise
            except Exception as exc:  # Hazel's own error outside a step (loading, decoding, writing the state):
                if is_transient(exc):  # the database is unreachable: recovery hands the run back once it is
                    raise
                behind = schema_behind(self.store, exc)  # (one query, on this failure only)
                if behind is not None:  # an older schema (hazel db downgrade): no fault of the run's; it goes
                    raise SchemaNotReadyError(behind) from exc  # on once the schema is upgraded
                # the same every time, so the run fails, saying why, rather than crash and be handed back forever
                self._crashed(run, token, exc, result)
            finally:
                self.leases.drop(token)
                if result.lease_lost:
                    self._let_go(run.id, token)
        return result

    def _let_go(self, run_id: str, token: str) -> None:
        """After a lost lease: clear it where the run still carries it (cancelled while its step executed, the
        lease kept so that a rewind waits for that step), so that the run can be rewound now. Best effort: the
        lease, no longer renewed, runs out by itself."""
        try:
            with self.store.transaction() as tx:
                tx.runs.drop_lease(run_id, token=token)
        except Exception as exc:  # (the database is unreachable: the lease runs out)
            log.warning("run %s: could not let go of its lease after its step ended (%s); it runs out by itself",
                        run_id, type(exc).__name__)

    def _crashed(self, run: Run, token: str, exc: Exception, result: DriveResult) -> None:
        """Fail ``run`` (leased with ``token``) after its drive raised ``exc`` outside a step: ``failed`` with the
        error and its traceback, audited as ``run.failed`` (``outside_step``), its progress reported.

        Raises:
            ``exc`` (chained) when failing the run cannot be written either (the worker's loop logs it; recovery
            hands the run back when its lease runs out).
        """
        now = self.clock()
        message, trace = (self.redact(text) for text in described(exc))
        message = message[:2000]
        first = message.splitlines()[0] if message else type(exc).__name__
        try:
            with self.store.transaction() as tx:
                tx.runs.advance(run.id, token=token, now=now, status=RunStatus.FAILED, error=message,
                                error_traceback=trace)
                tx.events.add(action="run.failed", actor=SYSTEM, now=now, run_id=run.id, error=message,
                              outside_step=True)
                transitions.progress(tx, run_id=run.id, now=now, event="failed", error=message)
        except LeaseLostError:
            log.warning(LEASE_LOST, run.id)
            result.lease_lost = True
            return
        except Exception as failing:  # (said so: it is not failed, it stays leased until its lease runs out)
            log.error("run %s: its execution failed outside a step (%s), and marking it failed failed too (%s): "
                      "it stays as it is, and is handed back when its lease runs out", run.id, first,
                      self.redact(f"{type(failing).__name__}: {failing}").splitlines()[0])
            raise failing from exc
        log.error("run %s: its execution failed outside a step (%s); the run is failed (its traceback: hazel show "
                  "%s --full)", run.id, first, run.id)
        result.status = RunStatus.FAILED
        self.on_outbox()

    def _load_head(self, run: Run) -> Head:
        with self.store.read() as tx:
            with tx.pipeline(commit=True):  # PostgreSQL: BEGIN, the one query and COMMIT in one round trip
                head = tx.checkpoints.load_later(run.id, run.head_seq)
            loaded = head.get()  # (SQLite ends the transaction after: its answer is read before)
            assert loaded is not None, f"run {run.id} has no checkpoint #{run.head_seq}"
            position = tx.checkpoints.position(loaded)
        return Head(position, loaded.info.next_step, loaded.info.handoff, run.branch)

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
                migrated = tx.runs.get(run.id)
        except VersionUnavailableError as exc:  # the migration itself failed: a deployment bug, shown loudly
            error = self.redact(str(exc))  # (a migration's own exception may quote the environment)
            with self.store.transaction() as tx:
                tx.runs.advance(run.id, token=token, now=now, status=RunStatus.FAILED, error=error)
                tx.events.add(action="run.failed", actor=SYSTEM, now=now, run_id=run.id, error=error)
                transitions.progress(tx, run_id=run.id, now=now, event="failed", error=error)
            self.on_outbox()
            return None
        assert migrated is not None
        return target, migrated

    def _execute(self, run: Run, wf: Workflow, token: str, head: Head, result: DriveResult,
                 hand_back: threading.Event | None = None) -> None:
        writer = self.store.step_writer()  # the steps that keep the run running: one connection, raw driver
        try:
            self._steps(run, wf, token, head, result, hand_back, writer)
        finally:
            writer.close()

    def _steps(self, run: Run, wf: Workflow, token: str, head: Head, result: DriveResult,
               hand_back: threading.Event | None, writer: StepWriter) -> None:
        position, node_name, handoff = head.position, head.next_step, head.handoff or {}
        state = wf.codec.decode(position.tree)
        seq, last_seq, branch, attempt = position.seq, run.last_seq, head.branch, run.attempt
        asked = head.asked  # stays true for the whole drive: a drive that opens a request ends there
        lease_sec = timedelta(seconds=self.lease_sec)
        while True:
            now = self.clock()
            if node_name is None or node_name == END:  # after a rewind to a final checkpoint: complete again
                with self.store.transaction() as tx:
                    tx.runs.advance(run.id, token=token, now=now, status=RunStatus.COMPLETED)
                    transitions.end_run(tx, run_id=run.id, status=RunStatus.COMPLETED, now=now, by=SYSTEM,
                                        steps=result.steps, asked=asked)
                result.status = RunStatus.COMPLETED
                self.on_outbox()
                return
            missing = versions.unknown_step(wf, run.id, node_name)
            if missing is not None:
                raise StepContractError(missing)
            node = lgraph.node_at(wf, node_name, lambda: position.tree)
            if isinstance(node, SteeringPoint):
                with self.store.transaction() as tx:
                    tx.runs.advance(run.id, token=token, now=now, status=RunStatus.WAITING)
                    _paused(tx, wf, run, now)
                    transitions.open_requests(tx, run_id=run.id, wf=wf, checkpoint_seq=seq, now=now,
                                              points=lgraph.points_asked(wf, node, position.tree),
                                              steps=result.steps, asked=asked)
                result.status = RunStatus.WAITING
                self.on_outbox()
                return

            ctx = StepContext(
                run_id=run.id, step=node.name, seq=seq, attempt=attempt + 1,
                idempotency_key=f"{run.id}:{seq}:{node.name}", started_by=run.started_by, workflow=wf.name,
                workflow_version=wf.version, feedback=handoff.get("feedback"), rejection=handoff.get("rejection"),
                feedback_by=handoff.get("by"), log=wf.step_log(node.name),
                _lease=token,
            )
            if self.on_step is not None:
                self.on_step(run.id, node.name)
            try:
                new_state = self._timed_call(node, wf, state, ctx)
                next_name = wf.target(ctx._goto) if ctx._goto else wf.next_of(node.name)  # END: None, the end
                try:
                    new_tree = wf.codec.encode(new_state)
                except PydanticSerializationError as exc:  # a model the step changed in place, off its types
                    raise StepContractError(f"step {node.name!r} returned a {wf.state.__name__} holding a value "
                                            f"its field does not take: {_first_warning(exc)}") from None
                if next_name is not None and lgraph.find_node(wf, next_name, lambda: new_tree) is None:
                    raise StepContractError(f"step {node.name!r} routed to unknown node {next_name!r}")
            except LeaseLostError:  # a fenced write inside the step (a LangGraph run's graph checkpoint)
                raise
            except SchemaNotReadyError:  # the step's checkpointer (a LangGraph graph's) found the schema older
                raise  # than this Hazel needs: not the step's fault, and the same on every attempt until upgraded
            except BaseException as exc:  # the step's own error: retry or fail, never crash the worker. Not only
                # Exception: a library's sys.exit() (SystemExit), an LLM client's asyncio.CancelledError, a
                # KeyboardInterrupt or GeneratorExit raised by the step each ended a worker's thread, its run left
                # running (its lease renewed) for ever. A KeyboardInterrupt in the main thread is Ctrl-C: it goes on
                # (the CLI says which run it left; ``hazel serve`` stops).
                if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                    raise
                result.status = self._failed(run, wf, node, token, attempt + 1, exc)
                return
            now = self.clock()  # the step's checkpoint, the run's update and a request it opens: when they commit
            last_seq += 1
            next_node = lgraph.find_node(wf, next_name, lambda: new_tree) if next_name else None
            status = (RunStatus.COMPLETED if next_node is None else
                      RunStatus.WAITING if isinstance(next_node, SteeringPoint) else RunStatus.RUNNING)
            checkpoint = NewCheckpoint(run_id=run.id, seq=last_seq, parent_seq=seq, branch=branch, step=node.name,
                                       next_step=next_name, workflow_version=wf.version, created_at=now)
            try:
                if status is RunStatus.RUNNING:  # the checkpoint and the run's head, fenced by the lease
                    position = writer.write(checkpoint, new_tree, position, token=token, now=now,
                                            lease_until=now + lease_sec)
                else:
                    done = [*result.steps, node.name]  # (a copy of the drive's steps: only where it stops)
                    fence = Fence(run.id, token, now, dict(head_seq=last_seq, last_seq=last_seq, status=status,
                                                           attempt=0, error=None, error_traceback=None,
                                                           lease_expires_at=None))
                    with self.store.transaction() as tx:  # the same, plus the request it waits on, or its end
                        # PostgreSQL: the statements and the COMMIT in one round trip; a lost lease fails the
                        # fenced write itself, and with it the transaction (LeaseLostError)
                        with tx.pipeline(commit=True):
                            written = tx.checkpoints.write_later(checkpoint, new_tree, position, fence=fence)
                            if isinstance(next_node, SteeringPoint):
                                _paused(tx, wf, run, now, **fence.values, branch=branch)
                                transitions.open_requests(tx, run_id=run.id, wf=wf, checkpoint_seq=last_seq,
                                                          points=lgraph.points_asked(wf, next_node, new_tree),
                                                          now=now, steps=done, asked=asked,
                                                          paused=lgraph.paused_nodes(wf, new_tree))
                            else:
                                transitions.end_run(tx, run_id=run.id, status=RunStatus.COMPLETED, now=now,
                                                    by=SYSTEM, steps=done, asked=asked)
                        position = written.get()
            except UnicodeEncodeError as exc:  # the step's state holds text no database can store (a lone
                # surrogate): nothing was written; the step fails as if it had raised, and retries or fails the run
                result.status = self._failed(run, wf, node, token, attempt + 1, StepContractError(
                    f"step {node.name!r} returned a state that cannot be stored: {exc.reason} "
                    f"({exc.object[exc.start:exc.end]!r})"))
                return
            result.steps.append(node.name)  # only once its checkpoint is committed
            if status is not RunStatus.RUNNING:
                result.status = status
                self.on_outbox()
                return
            if hand_back is not None and hand_back.is_set():  # the process is stopping: hand the run back
                with self.store.transaction() as tx:
                    tx.runs.advance(run.id, token=token, now=self.clock(), status=RunStatus.READY)
                    tx.notify_ready(run.id)
                result.status = RunStatus.READY
                log.info("run %s handed back at checkpoint #%d: this process is stopping", run.id, last_seq)
                return
            state, seq, node_name, handoff, attempt = new_state, last_seq, next_name, {}, 0

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
            unknown = unknown_fields(wf.state, out)
            if unknown:  # pydantic would drop them without a word, and with them the step's work
                raise StepContractError(
                    f"step {step.name!r} returned {', '.join(map(repr, unknown))}, which {wf.state.__name__} does "
                    f"not declare (fields: {', '.join(wf.state.model_fields)})")
            try:
                return wf.codec.validate({**state.model_dump(), **out})
            except ValidationError as exc:
                raise StepContractError(f"step {step.name!r} returned fields that fail validation: {exc}") \
                    from exc
        raise StepContractError(f"step {step.name!r} must return {wf.state.__name__}, a dict of changed fields, "
                                f"or None; got {type(out).__name__}")

    def _failed(self, run: Run, wf: Workflow, step: Step, token: str, attempts: int,
                exc: BaseException) -> RunStatus:
        """Record that ``step``'s try number ``attempts`` (from 1) raised ``exc``: the run is ``ready`` again after
        its backoff while tries are left, else ``failed`` with ``attempt=attempts``. A ``StepContractError`` (a
        wrong return type, an undeclared field, a bad in-place assignment) fails it at once: not retried, and its
        stored ``attempt`` and log line say the try it was, not ``max_attempts``."""
        now = self.clock()
        message, trace = (self.redact(text) for text in described(exc))
        contract = isinstance(exc, StepContractError)  # fails the same way every time: not retried, and said so
        said = shown_error(message, run_id=run.id)  # (stored whole; a log line of megabytes helps nobody)
        if contract:  # (``attempts`` stays the tries made: the stored count and the log say what happened)
            log.warning("run %s step %s attempt %d failed, not retried (a contract error): %s", run.id, step.name,
                        attempts, said)
        else:
            log.warning("run %s step %s attempt %d/%d failed: %s", run.id, step.name, attempts, step.max_attempts,
                        said)
        if not contract and attempts < step.max_attempts:
            delay = step.backoff_for(attempts, self.rng)
            wake_at = now + timedelta(seconds=delay)
            with self.store.transaction() as tx:
                tx.runs.advance(run.id, token=token, now=now, status=RunStatus.READY, attempt=attempts,
                                wake_at=wake_at, error=message, error_traceback=trace)
                tx.events.add(action="step.retry_scheduled", actor=SYSTEM, now=now, run_id=run.id, step=step.name,
                              attempt=attempts, max_attempts=step.max_attempts, delay_sec=round(delay, 3),
                              error=message)
                tx.notify_deadline(wake_at)  # the scheduler wakes the workers then
            return RunStatus.READY
        with self.store.transaction() as tx:
            tx.runs.advance(run.id, token=token, now=now, status=RunStatus.FAILED, attempt=attempts,
                            error=message, error_traceback=trace)
            tx.events.add(action="step.failed", actor=SYSTEM, now=now, run_id=run.id, step=step.name,
                          attempts=attempts, error=message)
            transitions.progress(tx, run_id=run.id, now=now, event="failed", step=step.name, error=message)
        self.on_outbox()
        return RunStatus.FAILED


def described(exc: BaseException) -> tuple[str, str]:
    """``(message, traceback)`` of an error as a run stores it (``Type: text``, ``Type`` alone when its text is
    empty). Never raises: an exception whose ``str()`` (or traceback) raises, a ``BaseException`` included, is
    described by its type, the step's error still (it failed the run "outside a step", or ended the worker's
    thread). Storable on both databases: a NUL and a lone surrogate in the text are written as escapes (``\\x00``,
    ``\\udcff``), as PostgreSQL refuses the one and no database encodes the other (the run stayed ``running``).
    A database error (Hazel's own: a write of the run's state that failed; or one a step's code met) is described
    by the first line of its text, and so it is in the traceback (``errors.traceback_text``): its statement, its
    parameters and the driver's ``DETAIL:`` lines (a run's state, a person's text) would be shown on every
    channel that shows the run's error."""
    name = type(exc).__name__
    try:
        text = str(exc)
        text = shown_text(exc, text)
    except BaseException:  # noqa: BLE001  (a __str__ that raises, even a BaseException)
        text = "(its text could not be read: its __str__ raised)"
    message = f"{name}: {text}" if text else name
    try:
        trace = traceback_text(exc)
    except BaseException:  # noqa: BLE001
        trace = message
    return _storable(message), _storable(trace)


def _storable(text: str) -> str:
    """``text`` with NUL written ``\\x00`` and lone surrogates as ``\\udcff``: what every database can store."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _paused(tx: Any, wf: Workflow, run: Run, now: datetime, **values: Any) -> None:
    """Note in ``tx`` (``Tx.paused``) the run as this pause stores it: leased ``run`` with ``values`` set, left
    ``waiting`` with no lease. Once committed, it is kept beside the checkpoint and the request it waits at, and
    a decision taken in this process sends its writes without reading them first (``store.heads``). PostgreSQL
    only (on SQLite a read costs no round trip), and not for a LangGraph graph (its decisions read the other
    requests of their super-step)."""
    if tx.dialect.postgresql and not isinstance(wf, lgraph.LangGraphWorkflow):
        tx.paused[run.id] = run.model_copy(update={
            **values, "status": RunStatus.WAITING, "lease_owner": None, "lease_token": None,
            "lease_expires_at": None, "updated_at": now})
