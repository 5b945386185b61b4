"""Hazel's persistence: runs, checkpoints, steering requests, decisions, the audit log and the outbox.

``Store`` owns the engine; ``Store.transaction()`` yields a ``Tx`` whose repositories (``tx.runs``,
``tx.checkpoints``, ``tx.requests``, ``tx.decisions``, ``tx.events``, ``tx.outbox``, ``tx.hooks``, …) all
write in that one transaction. Every SQL statement of the project lives in this package; what differs between
SQLite and PostgreSQL is in ``store.dialect``. The store never reads the environment and never imports
``bot``, ``integrations`` or ``hazel``.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import cached_property
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from store import db, fast
from store.audit import EventRepo
from store.checkpoints import ChainPosition, CheckpointRepo, Fence, NewCheckpoint, SnapshotPolicy
from store.dialect import Dialect, dialect_named
from store.errors import (
    ChangedMeanwhileError,
    DuplicateDecisionError,
    LeaseLostError,
    SchemaNotReadyError,
    StoreError,
)
from store.heads import HeadCache, published
from store.hooks import HookRepo
from store.notify import ReadyListener, notify_deadline, notify_ready
from store.outbox import OutboxRepo
from store.runs import RunRepo
from store.steering import DecisionRepo, RequestRepo, duplicate_decision
from store.steps import StepWriter
from store.timers import TimerRepo

if TYPE_CHECKING:  # imported where first used: a CLI command that neither scrapes nor prunes skips them
    from store.metrics import MetricsRepo
    from store.models import Run, SteeringRequest
    from store.retention import RetentionRepo

__all__ = [
    "ChainPosition", "ChangedMeanwhileError", "Dialect", "DuplicateDecisionError", "Fence", "Health",
    "LeaseLostError", "NewCheckpoint", "SchemaNotReadyError", "SnapshotPolicy", "Store", "StoreError", "Tx",
]


class Tx:
    """The repositories of one open transaction (each built on first use)."""

    def __init__(self, conn: Connection, policy: SnapshotPolicy, dialect: Dialect,
                 hook_urls: tuple[str, ...] = ()) -> None:
        self.conn = conn
        self.policy = policy
        self.dialect = dialect
        self.hook_urls = hook_urls
        self._piped = False
        self.written: dict[str, tuple[NewCheckpoint, ChainPosition, int]] = {}
        """The checkpoints this transaction wrote, the latest of each run (``store.heads``)."""
        self.opened: dict[str, tuple[SteeringRequest, int] | None] = {}
        """PostgreSQL: the request each run was asked in this transaction (``RequestRepo.opened``)."""
        self.paused: dict[str, Run] = {}
        """Runs this transaction leaves waiting, as they will be stored, when the caller knows them whole (the
        runner's pause): with ``opened``, what a decision in this process needs of them (``store.heads``)."""
        self.deadline: datetime | None = None
        """The earliest deadline this transaction set (``notify_deadline``): once it commits, ``Store`` tells
        this process's scheduler (``Store.on_deadline``; other processes hear the ``NOTIFY``)."""
        self._schema_guard: fast.Result | None = None  # (``require_schema``'s guard, sent: a pipeline's failure
        # may be its; read once the pipeline has ended, so that its cursor is released then)

    @cached_property
    def runs(self) -> RunRepo:
        return RunRepo(self.conn, self.dialect)

    @cached_property
    def checkpoints(self) -> CheckpointRepo:
        return CheckpointRepo(self.conn, self.policy, self.dialect, self.written)

    @cached_property
    def requests(self) -> RequestRepo:
        return RequestRepo(self.conn, self.dialect, self.opened)

    @cached_property
    def decisions(self) -> DecisionRepo:
        return DecisionRepo(self.conn)

    @cached_property
    def events(self) -> EventRepo:
        return EventRepo(self.conn)

    @cached_property
    def outbox(self) -> OutboxRepo:
        return OutboxRepo(self.conn, self.dialect)

    @cached_property
    def hooks(self) -> HookRepo:
        return HookRepo(self, self.hook_urls)

    @cached_property
    def metrics(self) -> MetricsRepo:
        from store.metrics import MetricsRepo
        return MetricsRepo(self.conn, self.dialect)

    @cached_property
    def timers(self) -> TimerRepo:
        return TimerRepo(self.conn, self.dialect)

    @cached_property
    def retention(self) -> RetentionRepo:
        from store.retention import RetentionRepo
        return RetentionRepo(self.conn, self.checkpoints)

    @contextmanager
    def pipeline(self, *, commit: bool = False) -> Iterator[None]:
        """Statements executed inside are sent without waiting for each answer (``store.fast.pipeline``):
        on PostgreSQL the block costs one round trip, plus one per answer read inside it; on SQLite it changes
        nothing. Not nested: a block inside another one is part of it.

        ``commit``: the transaction commits with the block's statements, in the same round trip, when the block
        ends without raising (PostgreSQL; on SQLite when the transaction ends, as always). Execute nothing
        after it. Every check that would roll the transaction back must then be made by the database: inside
        the block, the fenced checkpoint write (``CheckpointRepo.write_later``), ``RunRepo.transition_later``
        and ``RequestRepo.vote_later`` fail their statement when they change no row, instead of leaving it to
        the caller's ``Later`` (``store.fast.guarded``).

        Raises:
            DuplicateDecisionError: a decision inserted inside broke a unique key (the transaction must then
                roll back). With ``commit``: LeaseLostError when a fenced checkpoint write found the run no
                longer leased, SchemaNotReadyError when ``require_schema``'s guard found an older schema,
                ChangedMeanwhileError when another guarded write changed no row (nothing was written). Other
                errors of the database as ``sqlalchemy.exc.DBAPIError``.
        """
        if self._piped:
            yield
            return
        self._piped = True
        try:
            with fast.pipeline(self.conn, commit=commit):
                yield
            if self._schema_guard is not None:  # (its one row, received with the pipeline's end: no round trip)
                self._schema_guard.scalar()
        except IntegrityError as exc:
            raise duplicate_decision(exc) or exc
        except DBAPIError as exc:
            if self._schema_guard is not None:  # (asked only after a guard's failure: ``store.migrate.refusal``)
                from store.migrate import refusal

                refused = refusal(self.conn.engine, exc)
                if refused is not None:
                    raise refused from exc
            if not (commit and fast.guard_failed(exc)):
                raise
            fenced = getattr(self.conn, "fenced", None)
            if fenced is not None:
                raise LeaseLostError(f"run {fenced} is no longer leased by this worker") from exc
            raise ChangedMeanwhileError("the run or its request changed meanwhile; nothing was written") from exc
        finally:
            self._piped = False
            self._schema_guard = None

    def require_schema(self) -> None:
        """Refuse this transaction unless the database is at the schema revision this Hazel needs or a newer one
        (``store.migrate.require_head``: one statement of the version table's one row). For a write that makes new
        work, a run's start: its own statements may fit an older schema (a start without a key writes only
        columns every revision has), and a ``hazel db downgrade`` under a running process would then leave runs
        that no worker can carry on. Inside ``pipeline(commit=True)`` on PostgreSQL it goes with the other
        statements (no round trip of its own) and fails the transaction, nothing written.

        Raises:
            SchemaNotReadyError: the schema is older (``store.migrate.behind``'s words: "the database is at
                schema revision 0005, this Hazel needs 0009: run `hazel db upgrade`"), or has no version table;
                inside a PostgreSQL pipeline, when the pipeline ends.
        """
        from store.migrate import require_head

        self._schema_guard = require_head(self.conn)

    def notify_ready(self, run_id: str) -> None:
        """Wake workers in other processes once this transaction commits (PostgreSQL ``NOTIFY``)."""
        if self.dialect.notifies:
            notify_ready(self.conn, run_id)

    def notify_deadline(self, at: datetime) -> None:
        """Record that this transaction sets something due at ``at`` (timezone-aware: a steering request's next
        reminder, escalation or timeout, a retry's wake-up) in ``deadline`` (the earliest such), and tell the
        schedulers of other processes once it commits (PostgreSQL ``NOTIFY hazel_deadline``; only a time
        earlier than one already sent by this transaction is sent)."""
        if self.deadline is not None and self.deadline <= at:
            return
        self.deadline = at
        if self.dialect.notifies:
            notify_deadline(self.conn, at)


class Health(NamedTuple):
    """``Store.health``: ``error``, the class name of the error that kept the database from answering (None:
    it answered); ``schema``, why its schema revision is older than this Hazel's (None: it is not, or unknown
    because the database did not answer)."""

    error: str | None
    schema: str | None


class Store:
    """Hazel's database.

    Args:
        url: SQLAlchemy URL, ``sqlite:///hazel.db`` or ``postgresql+psycopg://user@host:5432/db``.
        sqlite_synchronous: SQLite ``PRAGMA synchronous`` (``FULL`` or ``NORMAL``); ignored on PostgreSQL.
        snapshot_policy: when checkpoints store a full snapshot instead of a patch.
        hook_urls: where run events are posted (``store.hooks``); empty: no hook rows are written.
        pool_size: connections kept open by the pool.
        head_cache_bytes: stored bytes of the checkpoints kept in memory for this process's own decisions
            (``store.heads``; 0: none).
        wal_preallocate_pages: SQLite: the frames its log is grown to before this process's first write
            (``store.wal``; 0: not grown); ignored on PostgreSQL.
    """

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL",
                 snapshot_policy: SnapshotPolicy | None = None, hook_urls: tuple[str, ...] = (),
                 pool_size: int = 10, head_cache_bytes: int = 4 << 20,
                 wal_preallocate_pages: int = db.WAL_PREALLOCATE_PAGES) -> None:
        self.url = url
        self.sqlite_synchronous = sqlite_synchronous.upper()
        self.wal_preallocate_pages = wal_preallocate_pages
        self.engine: Engine = db.make_engine(url, sqlite_synchronous=sqlite_synchronous, pool_size=pool_size,
                                             wal_preallocate_pages=wal_preallocate_pages)
        self.policy = snapshot_policy or SnapshotPolicy()
        self.hook_urls = tuple(hook_urls)
        self.dialect_hooks = dialect_named(self.engine.dialect.name)
        self.heads = HeadCache(max_bytes=head_cache_bytes)
        """The latest checkpoint this process committed for each run (bounded; ``store.heads``)."""
        self.on_deadline: Callable[[datetime], None] | None = None
        """Called with ``Tx.deadline`` after each commit of a transaction that set one (the engine hands it to
        this process's scheduler; other processes hear the ``NOTIFY``)."""

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @cached_property
    def relaxed_engine(self) -> Engine:
        """Where commits that need not wait for the disk go (``transaction(durable=False)``, the LangGraph
        saver's pending writes). On SQLite at ``synchronous`` FULL or EXTRA: a second, small pool on the same
        file whose connections stay at NORMAL, so that no connection switches its level back and forth (the
        pool lends its most recently used connection first: one connection would switch twice per LangGraph
        step, two ``PRAGMA`` more per step). Anywhere else: ``engine``."""
        relaxed = db.relaxed_level(self.sqlite_synchronous)
        if self.dialect != "sqlite" or relaxed == self.sqlite_synchronous:
            return self.engine
        return db.make_engine(self.url, sqlite_synchronous=relaxed, pool_size=2,
                              wal_preallocate_pages=self.wal_preallocate_pages)

    @contextmanager
    def transaction(self, *, write: bool = True, durable: bool = True, snapshot: bool = True) -> Iterator[Tx]:
        """One transaction; commits when the block ends, rolls back if it raises. ``durable=False``: its commit
        does not wait for the disk (``store.db.transaction``): it survives a process crash at once, a power
        loss from the next durable commit on."""
        engine = self.engine if durable else self.relaxed_engine
        with db.transaction(engine, write=write, durable=durable, snapshot=snapshot) as conn:
            tx = Tx(conn, self.policy, self.dialect_hooks, self.hook_urls)
            yield tx
        if tx.written or tx.paused:  # committed: what it wrote is what a decision in this process reads next
            published(tx.written, self.heads, paused=tx.paused, opened=tx.opened)
        if tx.deadline is not None and self.on_deadline is not None:
            self.on_deadline(tx.deadline)

    def read(self, *, snapshot: bool = True) -> "contextmanager[Tx]":
        """A read-only transaction: no write lock on SQLite (whose transactions read one snapshot); on
        PostgreSQL at REPEATABLE READ, so that its statements read one snapshot too (a run and its requests as
        of one moment). ``snapshot=False``: READ COMMITTED on PostgreSQL, for a reader that takes row locks
        (``FOR UPDATE SKIP LOCKED`` at REPEATABLE READ raises a serialization failure on a row committed after
        its snapshot). Write nothing in it."""
        return self.transaction(write=False, snapshot=snapshot)

    def step_writer(self) -> "StepWriter":
        """A writer for the steps of one drive that keep their run running (``store.steps``); close it when
        the drive stops."""
        return StepWriter(self.engine, self.policy)

    def ready_listener(self, on_ready: "Callable[[str], None]", *,
                       on_deadline: "Callable[[datetime], None] | None" = None) -> "ReadyListener | None":
        """A ``LISTEN hazel_ready`` connection calling ``on_ready(run_id)`` (and, with ``on_deadline``, also
        ``LISTEN hazel_deadline`` calling ``on_deadline(at)``; see ``store.notify``), not started; or None where
        the database has no notifications (SQLite: workers share a process or sweep, schedulers tick)."""
        if not self.dialect_hooks.notifies:
            return None
        return ReadyListener(self.url, on_ready, on_deadline=on_deadline)

    def clock_skew_sec(self) -> float | None:
        """How far this process's clock (``time.time``) is ahead of the database server's (seconds; negative:
        behind), from one read of its ``clock_timestamp()`` (against the midpoint of the round trip); None on
        SQLite (the database is a file on this host: there is no other clock). Leases, recovery and deadlines
        are judged by each process's own clock, so a host whose clock runs ahead takes live runs as abandoned.

        Raises:
            sqlalchemy.exc.DBAPIError: the database failed (unreachable)."""
        if not self.dialect_hooks.notifies:  # (SQLite: no server)
            return None
        import time

        with self.engine.connect() as conn:
            sent = time.time()
            server = conn.exec_driver_sql("SELECT extract(epoch FROM clock_timestamp())").scalar()
            back = time.time()
        return (sent + back) / 2 - float(server)

    def health(self) -> Health:
        """Whether this process can work on the database, with one query (the schema version table): its
        ``error`` (the class name of why the database did not answer, no connection details: health checks
        show it) or, when it answered, its ``schema`` problem (``store.migrate.behind``: the revision is older
        than the one this Hazel needs). Never raises."""
        from store.migrate import behind, current_revision

        try:
            current = current_revision(self.engine)  # (None: no version table, no schema)
        except Exception as exc:  # report, never raise: load balancers read the answer
            return Health(error=type(exc).__name__, schema=None)
        return Health(error=None, schema=behind(current))

    def upgrade(self) -> str | None:
        """Bring the schema to the latest Alembic revision (idempotent); returns the revision it was at (None:
        empty), read under the schema lock."""
        from store.migrate import upgrade

        return upgrade(self.engine)

    def ensure_schema(self, *, upgrade_if_empty: bool = True) -> None:
        """Check the schema is current; create it on an empty database.

        Raises:
            SchemaNotReadyError: the database holds an older (or unknown) revision: run ``hazel db upgrade``.
        """
        from store.migrate import ensure

        ensure(self.engine, upgrade_if_empty=upgrade_if_empty)

    def dispose(self) -> None:
        self.engine.dispose()
        relaxed = self.__dict__.get("relaxed_engine")
        if relaxed is not None and relaxed is not self.engine:
            relaxed.dispose()
