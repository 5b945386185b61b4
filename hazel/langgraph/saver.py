"""``HazelSaver`` and ``AsyncHazelSaver``: LangGraph checkpointers on Hazel's store (SQLite or PostgreSQL).

::

    from hazel.langgraph import HazelSaver

    with HazelSaver.from_conn_string("sqlite:///hazel.db") as saver:      # or postgresql+psycopg://…
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"items": []}, {"configurable": {"thread_id": "t-1"}})

Each checkpoint is one row of ``hazel_lg_checkpoints`` written in one transaction: a snapshot, or what changed
since its parent (``hazel.langgraph.encoding``). The saver keeps the last checkpoint it wrote or read for each
thread and namespace in memory (``cache_size`` threads): a ``put`` whose parent is that checkpoint is written as
a change; any other is written as a snapshot, so a ``put`` never reads the database.

A Hazel run's graph thread (its ``thread_id`` is the run id) is written only by the run's steps, under their
lease (``store.models.LEASE_KEY`` in the config): a write without a lease into a run's thread is refused
(``RunStateError``), whatever the run's status, as ``copy_thread`` into it is. A run waiting at an
``interrupt()`` would otherwise take a script's ``Command(resume=...)`` stored against the checkpoint it waits
at (LangGraph replays a checkpoint's pending writes when its thread resumes) in place of the decision Hazel
records, and an ended run can be rewound or retried from that thread. The check is part of the one ``INSERT``
(``store.lgraph_writer``): no read of its own.
"""

from __future__ import annotations

import asyncio
import functools
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from sqlalchemy.exc import DatabaseError, DBAPIError
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from hazel.langgraph import encoding
from hazel.langgraph.deleting import Deleting
from hazel.langgraph.encoding import Position
from store import Store
from store.checkpoints import SnapshotPolicy
from store.lgraph import Key, LangGraphRepo, StoredRow, StoredWrite, no_nul
from store.errors import DatabaseOpenError, LeaseLostError, SchemaNotReadyError
from store.lgraph_writer import Fence, LangGraphWriter
from store.models import LEASE_KEY, STEP_KEYS, RunStatus


def _schema_checked(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` of a saver, a database error it raises told as ``SchemaNotReadyError`` when the schema is
    behind this Hazel's (a ``hazel db downgrade`` under a running process: "column stamp does not exist" with
    the whole statement, where every command says ``run `hazel db upgrade```)."""

    @functools.wraps(method)
    def checked(self: "HazelSaver", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except DBAPIError as exc:
            self._raise_if_behind(exc)
            raise

    return checked


def _holds_nul(value: Any) -> bool:
    """Whether a JSON-like value holds a NUL character in a string, a key or a value, at any depth."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_nul(v) for v in value)
    return False


def _key_of(config: RunnableConfig) -> tuple[str, str, str | None]:
    conf = config["configurable"]
    return (no_nul("thread_id", str(conf["thread_id"])),
            no_nul("checkpoint_ns", conf.get("checkpoint_ns", "") or ""), get_checkpoint_id(config))


def _fence_of(config: RunnableConfig) -> Fence | None:
    """``(run_id, lease_token)`` when ``config`` is a Hazel run's step's (``store.models.LEASE_KEY``)."""
    conf = config["configurable"]
    token = conf.get(LEASE_KEY)
    return None if token is None else (str(conf["thread_id"]), str(token))


def _config(key: Key, keep: dict[str, Any] | None = None) -> RunnableConfig:
    return {"configurable": {"thread_id": key[0], "checkpoint_ns": key[1], "checkpoint_id": key[2], **(keep or {})}}


def _step_keys(config: RunnableConfig) -> dict[str, Any]:
    """The keys of a Hazel run's step (``store.models.STEP_KEYS``: its lease token and tags) ``config`` carries;
    ``{}`` for any other config."""
    conf = config.get("configurable") or {}
    return {k: conf[k] for k in STEP_KEYS if k in conf}


class HazelSaver(Deleting, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer storing checkpoints in Hazel's database.

    Args:
        store: Hazel's ``store.Store`` (its snapshot policy applies).
        serde: how channel values and writes are serialized (LangGraph's ``JsonPlusSerializer`` by default).
        cache_size: threads whose last checkpoint is kept in memory as the base of the next one's change.
        durable_writes: whether ``put_writes`` waits for the disk. By default it does not (SQLite
            ``synchronous=NORMAL``, PostgreSQL ``synchronous_commit=off`` for that transaction only): a task's
            writes survive a crash of the process at once, and a power loss from the next checkpoint's commit
            on (every ``put`` waits for the disk, and so makes the writes before it durable too). A power loss
            in between loses only the writes of tasks since the last checkpoint, and LangGraph runs those tasks
            again, as after a crash during them. True: each ``put_writes`` waits, as LangGraph's savers do.

    The async methods run the sync ones in a worker thread (``asyncio.to_thread``).
    """

    def __init__(self, store: Store, *, serde: SerializerProtocol | None = None, cache_size: int = 1024,
                 durable_writes: bool = False) -> None:
        super().__init__(serde=serde)
        self.store = store
        self.durable_writes = durable_writes
        self.policy: SnapshotPolicy = store.policy
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], Position] = OrderedDict()
        self._lock = threading.Lock()
        self._writer = LangGraphWriter(store.engine, synchronous=getattr(store, "sqlite_synchronous", "FULL"),
                                       relaxed=None if durable_writes else store.relaxed_engine)

    # -- construction -----------------------------------------------------------------------------------------

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str | None = None, *, serde: SerializerProtocol | None = None,
                         durable_writes: bool = False, **store_options: Any) -> Iterator["HazelSaver"]:
        """A saver on the database at ``conn_string`` (Hazel's form: ``sqlite:///hazel.db``,
        ``postgresql+psycopg://user@host:5432/db``; None: ``HAZEL_DATABASE_URL`` from Hazel's settings), its
        schema created when the database is empty; the database is closed when the block ends.
        ``durable_writes``: as the constructor's; ``store_options`` go to ``store.Store``
        (``sqlite_synchronous``, ``snapshot_policy``, ``pool_size``).

        Raises:
            store.SchemaNotReadyError: the database holds an older Hazel schema (run ``hazel db upgrade``).
        """
        store = _open_store(conn_string, store_options)
        try:
            yield cls(store, serde=serde, durable_writes=durable_writes)
        finally:
            store.dispose()

    def setup(self) -> None:
        """Bring the schema to the latest revision (as ``hazel db upgrade``; LangGraph's savers' ``setup``)."""
        self.store.upgrade()

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """A write transaction of the store (on SQLite it takes this process's turn to write: ``store.db``;
        LangGraph calls ``put_writes`` and ``put`` from two threads at once, and a writer waiting in SQLite's
        busy handler would sleep 1, 2, 5, 10 ms … instead of starting when the other commits)."""
        with self.store.transaction() as tx:
            yield tx

    # -- the cache of chain positions ------------------------------------------------------------------------

    def _remember(self, thread_id: str, checkpoint_ns: str, position: Position) -> None:
        with self._lock:
            self._cache[(thread_id, checkpoint_ns)] = position
            self._cache.move_to_end((thread_id, checkpoint_ns))
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _recall(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> Position | None:
        if checkpoint_id is None:
            return None
        with self._lock:
            position = self._cache.get((thread_id, checkpoint_ns))
        return position if position is not None and position.checkpoint_id == checkpoint_id else None

    def _forget(self, thread_ids: Sequence[str]) -> None:
        wanted = set(thread_ids)
        with self._lock:
            for key in [k for k in self._cache if k[0] in wanted]:
                del self._cache[key]

    # -- reading ---------------------------------------------------------------------------------------------

    @_schema_checked
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its newest in the thread's namespace without a ``checkpoint_id``),
        with its pending writes; None when there is none. One read transaction, two queries. The configs it
        hands back keep the lease and tags of a Hazel run's step (``store.models.STEP_KEYS``) ``config``
        carries: what LangGraph writes from them is fenced and tagged as the step's other writes."""
        thread_id, ns, checkpoint_id = _key_of(config)
        with self.store.read() as tx:
            repo = LangGraphRepo(tx.conn, tx.dialect)
            rows = repo.chain(thread_id, ns, checkpoint_id, max_depth=self.policy.max_chain + 1)
            if not rows:
                return None
            writes = repo.writes(rows[-1].key)
        position = encoding.decode_chain(rows, self.serde)
        self._remember(thread_id, ns, position)
        return self._tuple(rows[-1], position, writes, _step_keys(config))

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (and namespace, when it names one; every thread
        when ``config`` is None), whose metadata holds ``filter``'s keys and values, before ``before``'s
        checkpoint id, at most ``limit``. Each row of their chains is read and decoded once."""
        conf = (config or {}).get("configurable") or {}
        thread_id = conf.get("thread_id")
        if conf.get("checkpoint_ns"):
            no_nul("checkpoint_ns", str(conf["checkpoint_ns"]))
        if filter and _holds_nul(filter):  # (no stored metadata holds one: PostgreSQL's JSONB refuses it)
            raise ValueError("filter holds a NUL character (\\x00), which Hazel's database cannot store")
        try:
            found = self._found(thread_id, conf, filter, before, limit)
        except DBAPIError as exc:
            self._raise_if_behind(exc)
            raise
        if found is None:
            return
        keys, rows, writes = found
        positions = encoding.decode_many(rows, sorted(keys, key=lambda k: k[2]), self.serde)
        for key in keys:
            yield self._tuple(rows[key], positions[key], writes.get(key, []))

    def _found(self, thread_id: Any, conf: dict[str, Any], filter: dict[str, Any] | None,
               before: RunnableConfig | None, limit: int | None) -> Any:
        """``list``'s reads: the keys found, their rows with their ancestors', their writes; None: none found."""
        with self.store.read() as tx:
            repo = LangGraphRepo(tx.conn, tx.dialect)
            keys = repo.search(thread_id=None if thread_id is None else no_nul("thread_id", str(thread_id)),
                               checkpoint_ns=conf.get("checkpoint_ns"), checkpoint_id=conf.get("checkpoint_id"),
                               metadata_filter=filter, before_id=get_checkpoint_id(before) if before else None,
                               limit=limit)
            if not keys:
                return None
            return keys, repo.with_ancestors(keys), repo.writes_of(keys)

    def _raise_if_behind(self, exc: BaseException) -> None:
        """Raise ``SchemaNotReadyError`` (from ``exc``) when the database's schema is older than this Hazel's
        (``Store.health``: one query); return when it is not (``exc`` is raised as it is)."""
        behind = self.store.health().schema
        if behind is not None:
            raise SchemaNotReadyError(behind) from exc

    def _tuple(self, row: StoredRow, position: Position, writes: list[StoredWrite],
               keep: dict[str, Any] | None = None) -> CheckpointTuple:
        pending = [(w.task_id, w.channel, self.serde.loads_typed((w.type, w.blob)))
                   for w in sorted(writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))]
        parent = row.parent_key
        return CheckpointTuple(config=_config(row.key, keep),
                               checkpoint=position.checkpoint(),  # type: ignore[arg-type]
                               metadata=row.metadata,  # type: ignore[arg-type]
                               parent_config=_config(parent, keep) if parent is not None else None,
                               pending_writes=pending)

    # -- writing ---------------------------------------------------------------------------------------------

    @_schema_checked
    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Store ``checkpoint`` as a child of ``config``'s checkpoint, in ONE transaction of one INSERT: a
        change against its parent when the saver holds the parent's position (and the parent is still stored),
        else a snapshot. Returns the checkpoint's config.

        Raises:
            store.LeaseLostError: ``config`` is a step's of a Hazel run (its lease token under ``LEASE_KEY``) and
                the run is no longer leased by that token; nothing was written.
            RunStateError: ``config`` carries no step's lease and its thread is a Hazel run's (its id), ended or
                not: only the run's steps write there (a waiting run is answered through Hazel: ``hazel
                approve``, its request); nothing was written."""
        thread_id, ns, parent_id = _key_of(config)
        key = (thread_id, ns, checkpoint["id"])
        parent = self._recall(thread_id, ns, parent_id) if parent_id != checkpoint["id"] else None
        stamp = random.getrandbits(63) or 1  # (0 is the stamp of rows older than the column)
        enc, position = encoding.encode(checkpoint, parent, new_versions, self.serde, self.policy, stamp)
        meta = get_serializable_checkpoint_metadata(config, metadata)
        run_id = meta.get("run_id")
        row = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"],
               "parent_checkpoint_id": parent_id, "run_id": None if run_id is None else str(run_id),
               "metadata": meta, "stamp": stamp, **enc.columns()}
        fence = _fence_of(config)
        inserted = self._writer.insert_checkpoint(  # (it takes the turn to write, as ``_write``)
            row, parent_stamp=0 if parent is None else parent.stamp, fence=fence)
        if not inserted:  # rare: a re-put of a stored checkpoint, the parent deleted or re-put by another saver
            tree, extras = encoding._tree_of(checkpoint)  # since this one read it (or the fence failed, or the
            enc, position = encoding.snapshot(checkpoint["id"], tree,  # thread is a run's and there is none)
                                              encoding._own(checkpoint.get("channel_values") or {}), extras,
                                              self.serde, stamp)
            with self._write() as tx:
                if fence is not None:  # refused by it? (the run's row locked: no takeover until this commits)
                    run = tx.runs.get(fence[0], for_update=True)
                    if run is None or run.lease_token != fence[1] or run.status is not RunStatus.RUNNING:
                        raise LeaseLostError(f"run {fence[0]} is no longer leased by this worker")
                else:
                    _refuse_run_thread(tx, thread_id)
                repo = LangGraphRepo(tx.conn, tx.dialect)
                if repo.exists(key):  # rewrite it whole, and first what hangs on its old content
                    self._snapshot_children(repo, [key])
                    repo.replace(key, {**row, **enc.columns()})
                else:
                    repo.insert({**row, **enc.columns()})
        self._remember(thread_id, ns, position)
        return _config(key)

    @_schema_checked
    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        """Store a task's writes against ``config``'s checkpoint (one transaction). Special channels (errors,
        interrupts, resumes) replace what the task stored under them before; others are written once.

        Raises:
            store.LeaseLostError: as ``put``'s; nothing was written.
            RunStateError: as ``put``'s; nothing was written."""
        thread_id, ns, checkpoint_id = _key_of(config)
        rows = []
        for i, (channel, value) in enumerate(writes):
            type_, blob = self.serde.dumps_typed(value)
            rows.append({"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id,
                         "task_id": task_id, "idx": WRITES_IDX_MAP.get(channel, i), "channel": channel,
                         "type": type_, "blob": blob, "task_path": task_path})
        if not rows:
            return
        fence = _fence_of(config)
        written = self._writer.insert_writes(rows, upsert=all(w[0] in WRITES_IDX_MAP for w in writes),
                                             durable=self.durable_writes, fence=fence)
        if not written:  # all kept as they were, or refused: by the fence, or as the thread is a run's
            if fence is not None:
                self._check_fence(fence)
            else:
                with self.store.read() as tx:
                    _refuse_run_thread(tx, thread_id)

    def _check_fence(self, fence: Fence) -> None:
        """Raise ``LeaseLostError`` when the run of ``fence`` is no longer leased by its token."""
        if not self._writer.fence_held(fence):
            raise LeaseLostError(f"run {fence[0]} is no longer leased by this worker")

    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """A channel's next version: ``<n, 32 digits>.<random>``, as LangGraph's PostgreSQL saver makes them
        (ordered as strings; unique, so that a fork never reuses a version of the branch it left)."""
        if current is None:
            n = 0
        elif isinstance(current, (int, float)):
            n = int(current)
        else:
            n = int(str(current).split(".")[0])
        return f"{n + 1:032}.{random.random():016}"

    # -- async: the sync methods in a worker thread -----------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(lambda: [*self.list(config, filter=filter, before=before, limit=limit)])
        for item in found:
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)


class AsyncHazelSaver(HazelSaver):
    """``HazelSaver`` for async graphs: ``async with AsyncHazelSaver.from_conn_string(url) as saver``. Its async
    methods run the store's work in a worker thread, so the event loop never waits on the database; the sync
    methods work too."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(cls, conn_string: str | None = None, *,  # type: ignore[override]
                               serde: SerializerProtocol | None = None, durable_writes: bool = False,
                               **store_options: Any) -> AsyncIterator["AsyncHazelSaver"]:
        """As ``HazelSaver.from_conn_string``, as an async context manager.

        Raises:
            store.SchemaNotReadyError: the database holds an older Hazel schema (run ``hazel db upgrade``).
        """
        store = await asyncio.to_thread(_open_store, conn_string, store_options)
        try:
            yield cls(store, serde=serde, durable_writes=durable_writes)
        finally:
            await asyncio.to_thread(store.dispose)

    async def asetup(self) -> None:
        """``setup`` in a worker thread."""
        await asyncio.to_thread(self.setup)


def _refuse_run_thread(tx: Any, thread_id: str) -> None:
    """Raise ``RunStateError`` when ``thread_id`` is a Hazel run's id (for a write without a step's lease, which
    the ``INSERT`` refused or found already stored: one primary-key read, and for a waiting run the points it
    waits at), saying how to do it through Hazel; return when it is no run's."""
    from bot.engine.errors import RunStateError

    run = tx.runs.get(thread_id)
    if run is None:
        return
    said = f"thread {thread_id} is the graph thread of Hazel run {thread_id}, which"
    if run.status is RunStatus.WAITING:
        points = sorted({r.point for r in tx.requests.pending(run_ids=[thread_id])})
        at = " and ".join(repr(p) for p in points) or "its steering point"
        answer = f"hazel approve {thread_id}" + (f" --at {points[0]}" if points else "")
        raise RunStateError(f"{said} is waiting for a decision at {at}: LangGraph would take a write made outside "
                            f"the run's steps when the run resumes, in place of the decision Hazel records; answer "
                            f"it through Hazel instead ({answer}, or reject, edit, feedback; or its request in its "
                            f"channel, or POST /api/runs/{thread_id}/decisions); nothing was written")
    if not run.status.ended:
        raise RunStateError(f"{said} is {run.status.value}: only its own steps write to its thread, under their "
                            f"lease; let it end, or cancel it (hazel cancel {thread_id}); nothing was written")
    raise RunStateError(f"{said} has ended ({run.status.value}): it can still be rewound (a failed run retried) "
                        f"from its thread, and LangGraph would take what is written there; copy the thread into a "
                        f"new thread id (copy_thread) and write there; nothing was written")


def _open_store(conn_string: str | None, options: dict[str, Any]) -> Store:
    if conn_string is None:
        from bot.settings import Settings

        settings = Settings()
        conn_string = settings.database_url
        options = {"sqlite_synchronous": settings.sqlite_synchronous,
                   "wal_preallocate_pages": settings.sqlite_wal_preallocate_pages, **options}
    store = Store(conn_string, **options)
    try:
        store.ensure_schema()
    except DatabaseError as exc:  # (SQLite says no more than this: say what stands in the way, as the CLI)
        store.dispose()
        said = str(exc.orig)
        if "unable to open database file" not in said and "file is not a database" not in said:
            raise
        from store.db import unopened_why

        shown = store.engine.url.render_as_string(hide_password=True)
        why = unopened_why(conn_string) if "unable to open" in said else ""
        raise DatabaseOpenError(f"database {shown}: {said}{why}") from None
    except BaseException:
        store.dispose()
        raise
    return store
