"""The ``hazel_runs`` table: creation, claiming with leases, fenced advances, status changes."""

from __future__ import annotations

import hashlib
from datetime import datetime
from functools import lru_cache
from typing import Any, Iterable

from sqlalchemy import ColumnElement, Connection, and_, bindparam, false, func, literal, or_, select, update
from sqlalchemy.exc import IntegrityError

from store import fast
from store.dialect import Dialect
from store.errors import LeaseLostError
from store.models import Run, RunStatus
from store.schema import runs
from store.steering import NEXT_DECISION_ID

def fence_condition():  # noqa: ANN201
    """The run is still leased by the token in parameter ``fence_token`` (and not cancelled meanwhile)."""
    return ((runs.c.id == bindparam("fence_run_id")) & (runs.c.lease_token == bindparam("fence_token"))
            & (runs.c.status == RunStatus.RUNNING.value))


def advance_values(values: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The columns a fenced advance sets: ``values`` (a ``RunStatus`` as its value), ``updated_at``, and the
    lease cleared when the run leaves ``running``."""
    values = dict(values)
    if isinstance(values.get("status"), RunStatus):
        values["status"] = values["status"].value
    if values.get("status") not in (None, RunStatus.RUNNING.value):
        values.setdefault("lease_owner", None)
        values.setdefault("lease_token", None)
        values.setdefault("lease_expires_at", None)
    values["updated_at"] = now
    return values


@lru_cache(maxsize=128)
def _transition_statement(keys: tuple[str, ...], n_from: int, guard: bool = False):  # noqa: ANN202
    """The conditional UPDATE of ``RunRepo.transition`` for one set of columns and of starting statuses, built
    once (building it per call cost more than executing it). ``guard`` (PostgreSQL): as a statement that fails
    when it moved no run, answering one row (``store.fast.guarded``)."""
    values = {k: bindparam(f"v_{k}", type_=runs.c[k].type) for k in keys}
    stmt = update(runs).where(
        (runs.c.id == bindparam("run_id"))
        & runs.c.status.in_([bindparam(f"from_{i}") for i in range(n_from)])
    ).values(values)
    if not guard:
        return stmt
    moved = stmt.returning(runs.c.id).cte("moved")
    return fast.guarded(moved, select(moved.c.id))


_GET = select(runs).where(runs.c.id == bindparam("run_id"))
_DECISION_ID = "hazel_next_decision_id"
_LOCKED_RUN = select(runs).where(runs.c.id == bindparam("run_id")).with_for_update(key_share=True).subquery("r")
_GET_FOR_DECISION = select(_LOCKED_RUN, NEXT_DECISION_ID.label(_DECISION_ID))
"""PostgreSQL: the run, locked, and an id for the decision about to be recorded (``nextval`` of its sequence,
taken whether or not it is used, as a sequence's values are), in one statement. The id is taken once the lock
is held (the locking query is a subquery, which PostgreSQL does not pull up: its rows are locked before the
outer select computes ``nextval``), so that decisions on a run take their ids in the order they commit (a
refusal names the latest decision by id as the one that settled a request). Taken with the row before the
lock, a decision that waited for it held an older id than the one it waited for."""
_INSERT = runs.insert()
_BY_START_KEY = select(runs).where((runs.c.started_via == bindparam("channel"))
                                   & (runs.c.start_key == bindparam("start_key")))
"""The run started with a start key (``uq_hazel_runs_started_via_start_key``: its equality on ``start_key``
implies the partial index's ``start_key IS NOT NULL``, which SQLite needs to use it)."""

_GET_LOCKED: dict[str, Any] = {}
_KNOWN = (runs.c.id == bindparam("run_id")) & (runs.c.status == RunStatus.WAITING.value) & (
    runs.c.last_seq == bindparam("last_seq")) & (runs.c.workflow_version == bindparam("workflow_version"))
_LOCKED_AS_KNOWN = select(runs.c.id).where(_KNOWN).with_for_update(key_share=True).cte("locked")
_LOCK_AS_KNOWN = fast.guarded(_LOCKED_AS_KNOWN, select(_LOCKED_AS_KNOWN.c.id))
"""PostgreSQL: the waiting run locked as a decision locks it (``FOR NO KEY UPDATE``), failing the statement
unless it is still as the caller knows it (``RunRepo.lock_as_known``)."""


_ADVANCE = update(runs).where(fence_condition())
"""The fenced per-step UPDATE, built once: executed with a parameter dict whose keys (besides the two fence
parameters) are the columns to set, SQLAlchemy reuses its compiled form for each set of keys."""


def of_versions(runnable: Iterable[tuple[str, Iterable[int]]]) -> ColumnElement[bool]:
    """SQL: the run (a row of ``hazel_runs``) is of one of ``runnable``'s workflow versions (``(name,
    versions)`` pairs, as ``versions.runnable_versions`` gives them; none: false). What a worker's claim and its
    scheduler's due requests are limited to. Each version its own literal bind, not an expanding ``IN`` (which
    ``store.fast`` cannot compile ahead)."""
    return or_(false(), *(and_(runs.c.workflow == name, runs.c.workflow_version.in_([literal(v) for v in versions]))
                          for name, versions in runnable))


@lru_cache(maxsize=256)
def _claim_statement(dialect: Dialect, targeted: bool, runnable: tuple[tuple[str, tuple[int, ...]], ...] | None):
    """The claiming UPDATE for one shape (a given run or the oldest due one; the runnable workflow versions),
    built once per shape and executed with ``claim_*`` parameters (see ``RunRepo.claim``)."""
    now = bindparam("claim_now", type_=runs.c.wake_at.type)
    due = (runs.c.status == RunStatus.READY.value) & (runs.c.wake_at.is_(None) | (runs.c.wake_at <= now))
    if runnable is not None:
        due &= of_versions(runnable)
    if targeted:
        target = runs.c.id == bindparam("claim_run_id")
    else:
        pick = dialect.lock(select(runs.c.id).where(due).order_by(runs.c.updated_at).limit(1), skip_locked=True)
        target = runs.c.id == pick.scalar_subquery()
    return update(runs).where(target & due).values(
        status=RunStatus.RUNNING.value, lease_owner=bindparam("claim_owner"), lease_token=bindparam("claim_token"),
        lease_expires_at=bindparam("claim_until", type_=runs.c.lease_expires_at.type), wake_at=None,
        updated_at=now,
    ).returning(*runs.c)


def start_key(delivery_id: str) -> str:
    """What ``hazel_runs.start_key`` holds for a start sent with ``delivery_id``: its SHA-256, hex (64
    characters, whatever the length of the id; the id itself is not stored)."""
    return hashlib.sha256(delivery_id.encode("utf-8", "surrogatepass")).hexdigest()


def duplicate_start(exc: IntegrityError) -> bool:
    """Whether ``exc`` broke the unique key of starts (``uq_hazel_runs_started_via_start_key``): a run was
    started with the same delivery id on the same channel, and committed, first. SQLite names the columns
    (``…hazel_runs.start_key``), PostgreSQL the index; both mention ``start_key`` for that key only."""
    text_ = str(exc.orig)
    return "hazel_runs" in text_ and "start_key" in text_


def _validated(row: dict[str, Any] | None) -> Run | None:
    return Run.model_validate(row) if row else None


def _run(row: Any) -> Run:
    return Run.model_validate(dict(row._mapping))


class RunRepo:
    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def insert(self, *, run_id: str, workflow: str, workflow_version: int, started_by: str,
               started_via: str, now: datetime, started_by_person: str | None = None,
               status: RunStatus = RunStatus.READY, lease: tuple[str, str, datetime] | None = None,
               delivery_id: str | None = None) -> Run:
        """Insert a new run at checkpoint #0 (``status``; with ``lease`` = ``(owner, token, expires_at)`` it is
        inserted ``running``, already leased: nobody else can have claimed a run no one else has seen yet).
        ``delivery_id``: the channel's id of this start (a REST ``Idempotency-Key`` scoped to its caller), kept
        as its ``start_key``: one run per id and channel. Returns the run as stored (nothing is read back).

        Raises:
            sqlalchemy.exc.IntegrityError: ``duplicate_start`` when a run was started with ``delivery_id`` on
                ``started_via`` before (inside ``Tx.pipeline``, when the pipeline ends). The transaction is
                then unusable on PostgreSQL: let it roll back, then read that run (``by_start_key``).
        """
        values = dict(
            id=run_id, workflow=workflow, workflow_version=workflow_version, status=status.value,
            head_seq=0, last_seq=0, branch=0, last_branch=0, started_by=started_by, started_via=started_via,
            started_by_person=started_by_person, created_at=now, updated_at=now, attempt=0,
        )
        if delivery_id is not None:  # (only then: a start without one runs the INSERT it always ran)
            values["start_key"] = start_key(delivery_id)
        if lease is not None:
            owner, token, expires_at = lease
            values.update(status=RunStatus.RUNNING.value, lease_owner=owner, lease_token=token,
                          lease_expires_at=expires_at)
        fast.execute(self.conn, _INSERT, values)
        return Run.model_validate(values)

    def by_start_key(self, channel: str, delivery_id: str) -> Run | None:
        """The run started on ``channel`` with ``delivery_id`` (``insert``'s), as it is now; None if none was
        (retention keeps runs: a key stays taken)."""
        res = fast.execute(self.conn, _BY_START_KEY, {"channel": channel, "start_key": start_key(delivery_id)})
        return _validated(res.one())

    def get(self, run_id: str, *, for_update: bool = False) -> Run | None:
        return self.get_later(run_id, for_update=for_update).get()

    def get_later(self, run_id: str, *, for_update: bool = False) -> fast.Later[Run | None]:
        """``get``, its answer read when asked (``store.fast.pipeline``)."""
        stmt = _GET
        if for_update:
            # FOR NO KEY UPDATE on PostgreSQL: does not wait for the KEY SHARE locks that inserting child rows
            # (checkpoints, decisions) takes on the run, so concurrent deciders cannot deadlock on it.
            stmt = _GET_LOCKED.get(self.dialect.name)
            if stmt is None:
                stmt = _GET_LOCKED.setdefault(self.dialect.name, self.dialect.lock(_GET, key_share=True))
        res = fast.execute(self.conn, stmt, {"run_id": run_id})
        return fast.Later(lambda: _validated(res.one()))

    def get_for_decision_later(self, run_id: str) -> fast.Later[tuple[Run | None, int | None]]:
        """The run locked for a decision (``get_later(for_update=True)``) and, on PostgreSQL, an id for the
        decision (``DecisionRepo.next_id``'s) in the same statement; None on SQLite (the insert answers at
        once)."""
        if not self.dialect.postgresql:
            run = self.get_later(run_id, for_update=True)
            return fast.Later(lambda: (run.get(), None))
        res = fast.execute(self.conn, _GET_FOR_DECISION, {"run_id": run_id})

        def read() -> tuple[Run | None, int | None]:
            row = res.one()
            if row is None:
                return None, None
            decision_id = row.pop(_DECISION_ID)
            return Run.model_validate(row), int(decision_id)
        return fast.Later(read)

    def lock_as_known(self, run: Run) -> fast.Later[bool]:
        """PostgreSQL, inside a transaction that commits with its statements (``store.fast.pipeline(commit=
        True)``): lock waiting ``run`` as a decision does (``get_for_decision_later``), without reading it: the
        statement fails, and the transaction with it (``store.ChangedMeanwhileError``), unless the run is
        still ``waiting`` at ``run.last_seq`` and ``run.workflow_version``: no checkpoint written, no rewind,
        cancel or migration since ``run`` was known. Locked first, as every writer of its requests locks it.
        Its row lock is taken before the check, which PostgreSQL repeats on the row as the lock found it
        (READ COMMITTED).

        Returns its answer, True once the transaction committed (read it then: its cursor is closed).

        Raises:
            RuntimeError: outside such a transaction (its failure would otherwise go unseen).
        """
        if not getattr(self.conn, "guarding", False):
            raise RuntimeError("lock_as_known needs a transaction that commits with its statements")
        res = fast.execute(self.conn, _LOCK_AS_KNOWN, {"run_id": run.id, "last_seq": run.last_seq,
                                                       "workflow_version": run.workflow_version})
        return fast.Later(lambda: res.scalar() is not None)

    def find_by_prefix(self, prefix: str, *, limit: int = 2) -> list[str]:
        """Up to ``limit`` ids starting with ``prefix``, smallest first: a range of the primary key (see
        ``store.listing``), so only the matching ids are read. On SQLite ASCII letters match either case, as
        its LIKE did (run ids are lowercase hex)."""
        from store.listing import prefix_statement

        rows = self.conn.execute(prefix_statement(prefix, fold_ascii_case=not self.dialect.postgresql), {
            "limit": limit})
        return [r.id for r in rows]

    def list(self, *, statuses: Iterable[str] | None = None, workflow: str | None = None,
             limit: int = 100, offset: int = 0, newest_first: bool = True) -> list[Run]:
        """Runs by ``created_at`` (newest first unless ``newest_first=False``), ties by id, in ``statuses``
        and of ``workflow`` when given; each status read from its own index range (``store.listing``)."""
        from store.listing import run_list_params, run_list_statement

        wanted = list(statuses) if statuses else None
        shaped = run_list_params(wanted, workflow, limit, offset) if wanted != [] else None
        if shaped is None:  # statuses asked for, none a run can have (or an iterable that held none)
            return []
        shape, params = shaped
        return [_run(r) for r in self.conn.execute(run_list_statement(*shape, newest_first), params)]

    def count_by_status(self) -> dict[str, int]:
        """Runs per status, from the counters the triggers keep (``store.schema.run_counts``)."""
        from store.schema import run_counts

        n = func.sum(run_counts.c.n)
        rows = self.conn.execute(select(run_counts.c.status, n).group_by(run_counts.c.status).having(n != 0))
        return {status: int(count) for status, count in rows}

    def count_by_version(self, statuses: Iterable[str]) -> list[tuple[str, int, str, int]]:
        """``(workflow, version, status, count)`` for runs in ``statuses``, by workflow, version and status
        (from the counters, ``store.schema.run_counts``)."""
        from store.schema import run_counts

        c = run_counts.c
        n = func.sum(c.n)
        rows = self.conn.execute(
            select(c.workflow, c.workflow_version, c.status, n).where(c.status.in_(list(statuses)))
            .group_by(c.workflow, c.workflow_version, c.status).having(n != 0)
            .order_by(c.workflow, c.workflow_version, c.status))
        return [(w, v, s, int(count)) for w, v, s, count in rows]

    # -- claiming -------------------------------------------------------------------------------------

    def claim(self, *, owner: str, token: str, now: datetime, lease_until: datetime,
              run_id: str | None = None, runnable: dict[str, list[int]] | None = None) -> Run | None:
        """Lease one ``ready`` run whose ``wake_at`` has come (``run_id`` to ask for a specific one), among
        the workflow versions in ``runnable`` (``{name: [versions]}``; None: any). Returns the run as leased,
        or None when there is none (or another worker got it first)."""
        return self.claim_later(owner=owner, token=token, now=now, lease_until=lease_until, run_id=run_id,
                                runnable=runnable).get()

    def claim_later(self, *, owner: str, token: str, now: datetime, lease_until: datetime,
                    run_id: str | None = None, runnable: dict[str, list[int]] | None = None
                    ) -> fast.Later[Run | None]:
        """``claim``, its answer read when asked: inside ``Tx.pipeline(commit=True)`` on PostgreSQL, the
        transaction's ``BEGIN``, this ``UPDATE … RETURNING`` and ``COMMIT`` go in one round trip (three
        through SQLAlchemy's ``Connection``, which waits for each)."""
        if runnable is not None and not runnable:
            return fast.Later(lambda: None)
        key = None if runnable is None else tuple(sorted((n, tuple(sorted(v))) for n, v in runnable.items()))
        stmt = _claim_statement(self.dialect, run_id is not None, key)
        params = {"claim_now": now, "claim_owner": owner, "claim_token": token, "claim_until": lease_until}
        if run_id is not None:
            params["claim_run_id"] = run_id
        res = fast.execute(self.conn, stmt, params)
        return fast.Later(lambda: _validated(res.one()))

    def renew_leases(self, *, tokens: list[str], lease_until: datetime) -> int:
        if not tokens:
            return 0
        res = self.conn.execute(  # (a run cancelled while its step executes stays held until the step ends)
            update(runs).where(runs.c.lease_token.in_(tokens)
                               & runs.c.status.in_([RunStatus.RUNNING.value, RunStatus.CANCELLED.value]))
            .values(lease_expires_at=lease_until)
        )
        return res.rowcount

    def drop_lease(self, run_id: str, *, token: str) -> bool:
        """Clear the lease ``token`` still holds on a run that left ``running`` under it (cancelled while its
        step executed: ``transitions.end_run``'s ``keep_lease``), once that step has ended. False when the run
        holds another lease or none."""
        res = self.conn.execute(
            update(runs).where((runs.c.id == run_id) & (runs.c.lease_token == token)
                               & (runs.c.status != RunStatus.RUNNING.value))
            .values(lease_owner=None, lease_token=None, lease_expires_at=None))
        return res.rowcount == 1

    def running(self) -> list[Run]:
        return [_run(r) for r in self.conn.execute(
            select(runs).where(runs.c.status == RunStatus.RUNNING.value))]

    def release_to_ready(self, run_id: str, *, now: datetime, only_token: str | None = None,
                         expired_before: datetime | None = None, error: str | None = None) -> bool:
        """Hand a ``running`` run back to the queue (its worker died or gave it up); with ``error``, end it
        ``failed`` with that error instead (a step whose process keeps dying: ``Leases.recover``)."""
        cond = (runs.c.id == run_id) & (runs.c.status == RunStatus.RUNNING.value)
        if only_token is not None:
            cond &= runs.c.lease_token == only_token
        if expired_before is not None:
            cond &= runs.c.lease_expires_at < expired_before
        ended = {} if error is None else {"status": RunStatus.FAILED.value, "error": error, "error_traceback": None}
        res = self.conn.execute(update(runs).where(cond).values(**{
            "status": RunStatus.READY.value, "lease_owner": None, "lease_token": None, "lease_expires_at": None,
            "updated_at": now, **ended}))
        return res.rowcount == 1

    # -- fenced writes by the lease holder ----------------------------------------------------------------

    def advance(self, run_id: str, *, token: str, now: datetime, **values: Any) -> None:
        """Update the leased run (head, status, …) only while ``token`` still holds its lease.

        Raises:
            LeaseLostError: the lease moved to another worker, or the run was cancelled meanwhile.
        """
        res = fast.execute(self.conn, _ADVANCE, {**advance_values(values, now), "fence_run_id": run_id,
                                                 "fence_token": token})
        if res.rowcount != 1:
            raise LeaseLostError(f"run {run_id} is no longer leased by this worker")

    # -- conditional transitions (decisions, retry, cancel, rewind) ------------------------------------------

    def transition(self, run_id: str, *, from_statuses: Iterable[str], now: datetime, **values: Any) -> bool:
        """Set ``values`` if the run is in one of ``from_statuses``; False when it was not (someone else won)."""
        return self.transition_later(run_id, from_statuses=from_statuses, now=now, **values).get()

    def transition_later(self, run_id: str, *, from_statuses: Iterable[str], now: datetime,
                         **values: Any) -> fast.Later[bool]:
        """``transition``, its answer read when asked (after a ``pipeline``: no round trip of its own). In a
        transaction that commits with its statements (``store.fast.pipeline(commit=True)``) a run not in
        ``from_statuses`` fails the transaction instead (``store.ChangedMeanwhileError``)."""
        values = {**values, "updated_at": now}
        if isinstance(values.get("status"), RunStatus):
            values["status"] = values["status"].value
        statuses = [getattr(s, "value", s) for s in from_statuses]
        keys = tuple(sorted(values))
        params = {f"v_{k}": values[k] for k in keys}
        params.update({f"from_{i}": s for i, s in enumerate(statuses)}, run_id=run_id)
        if getattr(self.conn, "guarding", False):  # (the database fails the transaction if it moved nothing)
            res = fast.execute(self.conn, _transition_statement(keys, len(statuses), True), params)
            return fast.Later(lambda: res.scalar() is not None)
        res = fast.execute(self.conn, _transition_statement(keys, len(statuses)), params)
        return fast.Later(lambda: res.rowcount == 1)
