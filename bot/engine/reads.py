"""The reading half of the engine's boundary (``Hazel`` inherits it): runs, their requests, checkpoints,
decisions, audit log and states; the outbox; health and metrics. Every method is keyword-only and opens one
read transaction; none changes anything but ``retry_dead_outbox``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable

from pydantic import BaseModel

from bot.engine.errors import AmbiguousRunIdError, CheckpointNotFoundError, RunNotFoundError, no_checkpoint, no_run
from bot.engine.errors import quoted
from bot.engine.versions import asked_at, decode_state, target_workflow
from store.codec import is_text
from store.models import AuditEvent, CheckpointInfo, Decision, OutboxMessage, Run, SteeringRequest

if TYPE_CHECKING:
    from bot.engine.registry import Registry
    from bot.engine.workflow import Workflow
    from store import Health, Store, Tx
    from store.metrics import MetricsSnapshot  # imported by Tx.metrics when /metrics is first scraped

MIN_PREFIX = 4
"""Characters a shortened run id needs."""


@dataclass(frozen=True)
class Shown:
    """What a steering request shows: ``field`` (None: the whole state) and its ``value`` as a JSON tree, at
    the checkpoint the request was asked on."""

    field: str | None
    value: Any
    actions: tuple[str, ...] = ()
    """The decisions its steering point allows (``edit`` among them or not)."""
    migration_error: str | None = None
    """Why the state cannot be migrated to the version a decision on the request is made on (the run's version
    is no longer deployed, the deployed one's migration from it fails): ``versions.migrate_tree``'s message,
    with which every decision on the request is refused; ``value`` is then read from the state as stored (the
    old version's), not the value a decision would change. None: nothing failed."""
    title: str | None = None
    """The title the version a decision is made on gives the steering point, when that is not the run's own
    version (a run to migrate: v2's title, not the one v1 asked with; s33 F9); None otherwise."""
    problem: str | None = None
    """With ``shown(check=True)``: why deciding the request would fail, seen before anyone decides: the version
    the run goes on with has no such steering point (every decision is refused), or the stored state no longer
    loads as its state model (an edit is refused; an approval, a rejection or feedback is recorded and then fails
    the run). None: neither (a fresh-user finding, s30 F4, F8: ``hazel show`` said nothing)."""


def run_in(tx: "Tx", run_id: str, *, for_update: bool = False) -> Run:
    """Run ``run_id`` read in ``tx`` (locked with ``for_update``).

    Raises:
        RunNotFoundError: there is no such run.
    """
    run = tx.runs.get(run_id, for_update=for_update)
    if run is None:
        raise no_run(run_id)
    return run


def missing_checkpoint_in(tx: "Tx", run: Run, seq: int) -> CheckpointNotFoundError:
    """``Reads.missing_checkpoint`` inside the read transaction ``tx`` (rewind's too)."""
    stored = tx.checkpoints.list(run.id)
    return no_checkpoint(run.id, seq, last_seq=run.last_seq, kept=[c.seq for c in stored[-5:]],
                         pruned=len(stored) < run.last_seq + 1)


class Reads:
    """Reading methods of ``Hazel`` (needs ``self.store``, ``self.registry``, ``self.clock``, ``self._deadline``)."""

    store: "Store"
    registry: "Registry"
    _deadline: Callable[[datetime], None]

    def resolve(self, *, ref: str) -> str:
        """A run id from an id or a unique prefix of at least 4 characters.

        Raises:
            RunNotFoundError: no run.
            AmbiguousRunIdError (a RunNotFoundError): the prefix starts several runs' ids.
        """
        ref = (ref or "").strip()
        if "\x00" in ref or not is_text(ref):  # no run id holds one (and neither database takes it in a query)
            raise no_run(ref)
        with self.store.read() as tx:
            if ref and tx.runs.get(ref) is not None:
                return ref
            matches = tx.runs.find_by_prefix(ref, limit=6) if len(ref) >= MIN_PREFIX else []
        if len(matches) == 1:
            return matches[0]
        if matches:
            listed = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
            raise AmbiguousRunIdError(f"run id {quoted(ref)} is ambiguous: it starts {listed}; give more of it")
        if 0 < len(ref) < MIN_PREFIX:
            raise RunNotFoundError(f"no run {quoted(ref)}: a shortened run id needs at least {MIN_PREFIX} characters")
        raise no_run(ref)

    def get(self, *, run_id: str) -> Run:
        """The run.

        Raises:
            RunNotFoundError.
        """
        with self.store.read() as tx:
            return run_in(tx, run_id)

    def runs(self, *, statuses: Iterable[str] | None = None, limit: int = 100, offset: int = 0,
             workflow: str | None = None) -> list[Run]:
        """Runs, newest first, filtered by status and workflow (a name no workflow can have, one holding NUL or
        text that is not Unicode, lists none: PostgreSQL refuses NUL in a query; so does ``""``, never every
        run)."""
        if workflow is not None and (not workflow or "\x00" in workflow or not is_text(workflow)):
            return []
        with self.store.read() as tx:
            return tx.runs.list(statuses=list(statuses) if statuses else None, limit=limit, offset=offset,
                                workflow=workflow)

    def workflow(self, *, name: str, version: int | None = None) -> "Workflow":
        """The registered workflow ``name`` (its latest version unless ``version``).

        Raises:
            UnknownWorkflowError: not registered (the message lists what is).
        """
        return self.registry.get(name, version)

    def workflows(self) -> list["Workflow"]:
        """Every registered workflow version, by name and version."""
        return self.registry.all()

    def workflow_names(self) -> list[str]:
        """The registered workflows' names, sorted, each once."""
        return self.registry.names()

    @property
    def database(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.store.dialect

    def count_by_version(self) -> list[tuple[str, int, str, int]]:
        """``(workflow, version, status, count)`` of every run."""
        from store.models import RunStatus

        with self.store.read() as tx:
            return tx.runs.count_by_version([s.value for s in RunStatus])

    def ready_not_runnable(self) -> list[tuple[str, int, int]]:
        """``(workflow, version, count)`` of the ready runs (due or not) of versions this process cannot execute
        (``versions.runnable_versions``: neither registered nor migrated from): what a worker here leaves
        for one that has them (a fresh-user finding, s30 F6: ``hazel worker --until-idle`` said "none is
        ready now" while such runs were)."""
        from bot.engine.versions import runnable_versions
        from store.models import RunStatus

        runnable = runnable_versions(self.registry)
        with self.store.read() as tx:
            counts = tx.runs.count_by_version([RunStatus.READY.value])
        return sorted((w, v, n) for w, v, _, n in counts if v not in runnable.get(w, ()))

    def pending_request(self, *, run_id: str) -> SteeringRequest | None:
        """The run's pending steering request, if it waits on one."""
        with self.store.read() as tx:
            return tx.requests.pending_for_run(run_id)

    def pending_requests(self, *, run_ids: Iterable[str]) -> dict[str, SteeringRequest]:
        """The pending request of each of ``run_ids`` that has one, by run id."""
        with self.store.read() as tx:
            return {r.run_id: r for r in tx.requests.pending(run_ids=list(run_ids))}

    def pending_requests_of(self, *, run_id: str) -> list[SteeringRequest]:
        """Every pending steering request of the run, oldest first (ties by id): at most one for a native
        workflow, one per interrupt of a LangGraph super-step whose parallel nodes asked at once
        (``pending_request`` is the newest of them: the one a decision naming no request settles)."""
        return self.pending_requests_by_run(run_ids=[run_id]).get(run_id, [])

    def pending_requests_by_run(self, *, run_ids: Iterable[str]) -> dict[str, list[SteeringRequest]]:
        """``pending_requests_of`` for each of ``run_ids`` that has any, by run id; one read."""
        out: dict[str, list[SteeringRequest]] = {}
        with self.store.read() as tx:
            for request in tx.requests.pending(run_ids=list(run_ids)):
                out.setdefault(request.run_id, []).append(request)
        return out

    def requests(self, *, run_id: str) -> list[SteeringRequest]:
        """Every steering request of the run, oldest first."""
        with self.store.read() as tx:
            return tx.requests.for_run(run_id)

    def checkpoints(self, *, run_id: str) -> list[CheckpointInfo]:
        """Every checkpoint of the run, all branches, by sequence number (metadata; states: ``state_at``).

        Raises:
            RunNotFoundError.
        """
        with self.store.read() as tx:
            found = tx.checkpoints.list(run_id)
            if not found and tx.runs.get(run_id) is None:  # every run has its checkpoint #0
                raise no_run(run_id)
            return found

    def decisions(self, *, run_id: str) -> list[Decision]:
        """Every decision on the run (votes and rewinds included), oldest first."""
        with self.store.read() as tx:
            return tx.decisions.for_run(run_id)

    def audit(self, *, run_id: str) -> list[AuditEvent]:
        """The run's audit log: who (person and channel identity) did what, when.

        Raises:
            RunNotFoundError.
        """
        with self.store.read() as tx:
            if tx.runs.get(run_id) is None:
                raise no_run(run_id)
            return tx.events.for_run(run_id)

    def state_at(self, *, run_id: str, seq: int | None = None) -> BaseModel:
        """The run's state at checkpoint ``seq`` (default: its head), as its workflow's model.

        Raises:
            RunNotFoundError, CheckpointNotFoundError, VersionUnavailableError.
        """
        run, loaded = self._load(run_id, seq)
        if loaded is None:
            raise self.missing_checkpoint(run_id=run_id, seq=run.head_seq if seq is None else seq)
        return decode_state(self.registry, run, loaded.info.workflow_version, loaded.tree)

    def declared_fields(self, *, run_id: str) -> dict[str, Any]:
        """The state fields the run's workflow declares (the version it continues on: its pinned one while
        registered, else the one that migrates it, as a rewind forks on it), each with the value a new value
        for it is parsed like: ``""`` for a text field (``--set`` takes the text as it is), else None (JSON);
        for a LangGraph run, the channels its graph declares, written yet or not (``hazel rewind --set`` of a
        channel no node has written yet: ``Workflow.declared_fields``). ``{}`` when no such version is
        registered here.

        Raises:
            RunNotFoundError.
        """
        wf = self._continued_on(run_id)
        return wf.declared_fields() if wf is not None else {}

    def declared_entries(self, *, run_id: str) -> dict[str, Any]:
        """The mapping fields of the run's workflow (the version it continues on, as ``declared_fields``), each
        with the value a new entry is parsed like (``""``: text, None: JSON; ``Workflow.declared_entries``):
        ``hazel rewind --set F.KEY=…`` of a mapping still empty. ``{}`` when no such version is registered here, or for a LangGraph run.

        Raises:
            RunNotFoundError.
        """
        wf = self._continued_on(run_id)
        return wf.declared_entries() if wf is not None else {}

    def _continued_on(self, run_id: str) -> "Workflow | None":
        """The definition run ``run_id`` continues on (``versions.target_workflow``; None: none here).

        Raises:
            RunNotFoundError.
        """
        return target_workflow(self.registry, self.get(run_id=run_id))

    def state_tree_at(self, *, run_id: str, seq: int | None = None) -> Any:
        """The run's state at checkpoint ``seq`` (default: its head) as a JSON tree, as people see it (None: no
        such checkpoint): the stored tree for a native workflow; for a LangGraph run, the graph's values at the
        graph checkpoint that Hazel checkpoint points at (``Workflow.state_view``), or the stored tree when the
        checkpoint's workflow version is not registered here or the graph checkpoint is not found.
        (``state_at`` gives the stored state as the workflow's model: a LangGraph run's ``GraphRunState``.)

        Raises:
            RunNotFoundError.
        """
        run, loaded = self._load(run_id, seq)
        return None if loaded is None else self._viewed(run, loaded)

    def _viewed(self, run: Run, loaded: Any) -> Any:
        """``loaded``'s state tree as people see it: through its version's ``Workflow.state_view`` when that
        version is registered here, else as stored."""
        wf = self.registry.find(run.workflow, loaded.info.workflow_version)
        return loaded.tree if wf is None else wf.state_view(loaded.tree, run_id=run.id)

    def rewind_tree(self, *, run_id: str, seq: int) -> Any:
        """The state at checkpoint ``seq`` as a rewind to it edits it (a JSON tree; None: no such checkpoint):
        migrated to the workflow version the run continues on (``target_workflow``) when the checkpoint holds
        an older version's state that version declares a migration from, as the rewind migrates it before its
        edits apply (so a ``--set`` value is read by the field's type in that version: ``plan=["a"]`` for a
        ``list[str]`` that was a ``str``); else as ``state_tree_at``.

        Raises:
            RunNotFoundError. VersionUnavailableError: the migration failed (as the rewind would).
        """
        from bot.engine.versions import migrate_tree

        run, loaded = self._load(run_id, seq)
        if loaded is None:
            return None
        version, target = loaded.info.workflow_version, target_workflow(self.registry, run)
        if target is not None and version != target.version and version in target.migrations:
            return target.state_view(migrate_tree(target, version, loaded.tree, run_id=run.id), run_id=run.id)
        return self._viewed(run, loaded)

    def missing_checkpoint(self, *, run_id: str, seq: int) -> CheckpointNotFoundError:
        """The error to raise for checkpoint ``seq`` of run ``run_id`` that a read did not find: "checkpoint #1
        of run R was pruned (kept: #3)" for one ``hazel prune`` removed, else "run R has no checkpoint #9 (it
        has #0..#3)" (``errors.no_checkpoint``: the wording rewind uses too). Reads only on that error path.

        Raises:
            RunNotFoundError.
        """
        with self.store.read() as tx:
            return missing_checkpoint_in(tx, run_in(tx, run_id), seq)

    def previous_checkpoint(self, *, run_id: str, seq: int) -> int:
        """The checkpoint to compare checkpoint ``seq`` with when no other is named (a diff's default): its
        parent, else (its parent was pruned) the nearest earlier checkpoint kept.

        Raises:
            RunNotFoundError; CheckpointNotFoundError: checkpoint ``seq`` is not stored (``missing_checkpoint``),
                or nothing earlier is: "checkpoint #0 of run R is its first: there is nothing earlier to
                compare it with", "… is the earliest kept (#0..#2 were pruned): …".
        """
        with self.store.read() as tx:
            run = run_in(tx, run_id)
            stored = {c.seq: c for c in tx.checkpoints.list(run.id)}
            if seq not in stored:
                raise missing_checkpoint_in(tx, run, seq)
        parent = stored[seq].parent_seq
        if parent is not None and parent in stored:
            return parent
        earlier = [n for n in stored if n < seq]
        if earlier:
            return max(earlier)
        why = "is its first" if seq == 0 else f"is the earliest kept (#0..#{seq - 1} were pruned)"
        raise CheckpointNotFoundError(f"checkpoint #{seq} of run {run_id} {why}: there is nothing earlier to "
                                      "compare it with")

    def _load(self, run_id: str, seq: int | None):  # noqa: ANN202
        with self.store.read() as tx:
            run = run_in(tx, run_id)
            return run, tx.checkpoints.load(run_id, run.head_seq if seq is None else seq)

    def shown(self, *, request_id: int, check: bool = False) -> Shown:
        """The field a request shows and its value when it was asked, in the version a decision on it is made
        on: for a run whose version is no longer deployed, the one that migrates it (the point as that
        version declares it, the value migrated to it: ``versions.asked_at``). When that migration fails,
        ``Shown.migration_error`` says why and the value is read from the state as stored. ``check``: also
        look for what a decision would fail on (``Shown.problem``; it decodes the state: for ``hazel show``).

        Raises:
            NoPendingRequestError: no such request.
        """
        from bot.engine.errors import NoPendingRequestError

        with self.store.read() as tx:
            request = tx.requests.get(request_id)
            run = tx.runs.get(request.run_id) if request is not None else None
            if request is None or run is None:
                raise NoPendingRequestError(f"no steering request {request_id}")
            loaded = tx.checkpoints.load(run.id, request.checkpoint_seq)
        wf = target_workflow(self.registry, run)
        point, tree, failed = asked_at(wf, run, request, loaded)
        field = getattr(point, "show", None)
        problem = _problem(self.registry, wf, run, request, tree) if check and loaded is not None \
            and failed is None and request.status.value == "pending" else None
        return Shown(field, tree.get(field) if field and isinstance(tree, dict) else tree,
                     tuple(getattr(point, "actions", ()) or ()), migration_error=failed, problem=problem,
                     title=getattr(point, "title", None) if wf is not None and wf.version != run.workflow_version
                     and failed is None else None)

    # -- operations -----------------------------------------------------------------------------------------

    def outbox_messages(self, *, status: str | None = None, run_id: str | None = None,
                        limit: int = 100) -> list[OutboxMessage]:
        """Outbox messages, newest first (``status``: pending, sent, dead, superseded: ``OutboxStatus``)."""
        with self.store.read() as tx:
            return tx.outbox.list(status=status, run_id=run_id, limit=limit)

    def outbox_backlog(self) -> dict[str, int]:
        """Outbox messages per status (pending, sent, dead, superseded: ``OutboxStatus``), e.g. ``{"sent": 40,
        "pending": 2}``."""
        with self.store.read() as tx:
            return tx.outbox.backlog()

    def retry_dead_outbox(self, *, message_id: int | None = None) -> int:
        """Queue dead outbox messages (or the dead message ``message_id``) for delivery again. Returns how many.

        Raises:
            InvalidInputError: ``message_id`` is not a dead message (the message says what it is).
        """
        from bot.engine.errors import InvalidInputError
        from store.models import OutboxStatus

        with self.store.transaction() as tx:
            if message_id is not None:
                message = tx.outbox.get(message_id)
                if message is None or message.status is not OutboxStatus.DEAD:
                    raise InvalidInputError(f"no dead outbox message {message_id}" + (
                        f" (it is {message.status.value})" if message is not None else ""))
            return tx.outbox.retry_dead(now=self.clock(), message_id=message_id)  # type: ignore[attr-defined]

    def ready_listener(self, *, on_ready: Callable[[str], None]) -> Any:
        """A not yet started listener for runs made ready by other processes (PostgreSQL ``LISTEN``; call
        ``start()``/``stop()``), or None on SQLite. The same connection hears the deadlines other processes
        commit and hands them to the ``on_deadline`` listeners (the scheduler of this process)."""
        return self.store.ready_listener(on_ready, on_deadline=self._deadline)

    def health(self) -> Health:
        """Whether this process can work on the database (``store.Store.health``, one query): ``error``, the
        class name of why it did not answer; ``schema``, why its schema revision is older than the one this
        Hazel needs ("the database is at schema revision 0005, this Hazel needs 0007: run `hazel db upgrade`";
        a newer one is fine for a running process: migrations only add); both None when it can."""
        return self.store.health()

    def schema_behind(self, exc: BaseException) -> str | None:
        """Why ``exc`` (an error a worker, the scheduler or an adapter met) happened when the database's schema
        is older than this Hazel needs, in ``health``'s words; None when that is not why (``runner.schema_behind``:
        one query, only after a database error that is not an outage)."""
        from bot.engine.runner import schema_behind

        return schema_behind(self.store, exc)

    def metrics_snapshot(self, *, now: datetime, age_bounds_sec: tuple[float, ...]) -> MetricsSnapshot:
        """What ``/metrics`` shows of the database (``store.metrics``)."""
        with self.store.read() as tx:
            return tx.metrics.snapshot(now=now, age_bounds_sec=age_bounds_sec)


def _problem(registry: Any, wf: Any, run: Run, request: SteeringRequest, tree: Any) -> str | None:
    """``Shown.problem`` of ``request`` of ``run`` in ``wf`` (None: no version here goes on with it), the state
    tree at hand (migrated where it was)."""
    from bot.engine import lgraph
    from bot.engine.errors import RunStateError, VersionUnavailableError
    from bot.engine.versions import decode_stored, point_in, resolve_workflow

    if wf is None:  # (s31 F7: not deployed, and no deployed version migrates it: every decision is refused)
        try:
            resolve_workflow(registry, run)
        except VersionUnavailableError as exc:
            return f"{exc.message}: every decision on it is refused"
        return None
    try:
        point_in(wf, request.point, run, tree=tree)
    except VersionUnavailableError as exc:
        again = (f"deploy the definition of {wf.label} that has it" if wf.version == run.workflow_version
                 else f"deploy v{run.workflow_version} again beside {wf.label}")
        return f"{exc.message}: every decision on it is refused ({again}, or cancel the run)"
    if isinstance(wf, lgraph.LangGraphWorkflow):
        return None
    try:
        decode_stored(wf, tree)
    except RunStateError as exc:
        return (f"{exc.message} (an edit is refused; an approval, a rejection or feedback would be recorded and "
                "then fail the run)")
    return None
