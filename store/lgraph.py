"""The ``hazel_lg_checkpoints`` and ``hazel_lg_writes`` tables: LangGraph's checkpoints, stored as Hazel stores a
run's state (``hazel.langgraph.HazelSaver`` encodes and decodes them; every statement is here).

A row is a LangGraph checkpoint ``(thread_id, checkpoint_ns, checkpoint_id)``: either a full snapshot
(``chain_len`` 0) or what changed since its parent ``parent_checkpoint_id`` (``chain_len`` > 0, the number of
changes back to the snapshot). Loading a checkpoint reads it and its ancestors back to their snapshot in ONE
recursive query (``chain``), whatever the length of the thread's history; the saver's snapshot policy bounds
the chain. A delta row's parent always exists: whatever deletes a checkpoint first rewrites the deltas that
hang on it as snapshots (``children`` finds them; the saver rewrites them with ``replace``).

The payload columns are opaque here: ``payload``/``compressed`` is a JSON tree or patch (``store.codec``),
``channel_type``/``channel_blob`` what LangGraph's serializer made of the channel values. The saver's two hot
writes (``put``, ``put_writes``) go through ``store.lgraph_writer`` instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Any, Callable, Iterable, Mapping, Sequence

from sqlalchemy import Connection, and_, bindparam, delete, func, insert, select, text, tuple_, update

from store import fast
from store.dialect import Dialect
from store.schema import lg_checkpoints as cps
from store.schema import lg_writes as wr

Key = tuple[str, str, str]
"""``(thread_id, checkpoint_ns, checkpoint_id)``."""

Snapshots = Callable[[Mapping[Key, "StoredRow"], Sequence[Key]], dict[Key, dict[str, Any]]]
"""``(rows, keys) -> {key: columns}``: the stored columns (``chain_len`` 0, ``stored_bytes``, ``compressed``,
``payload``, ``channel_type``, ``channel_blob``) of each of ``keys`` rewritten as a standalone snapshot, given
``rows`` holding them and their ancestors back to their snapshots (``with_ancestors``). Decoding needs the
saver's serializer, so the saver makes it (``hazel.langgraph.HazelSaver.snapshots``); the store only stores."""

ROW_COLUMNS = ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "run_id", "chain_len",
               "stored_bytes", "compressed", "payload", "channel_type", "channel_blob", "metadata", "stamp")
_CHAIN_COLUMNS = ("checkpoint_id", "parent_checkpoint_id", "chain_len", "compressed", "payload", "channel_type",
                  "channel_blob", "metadata", "stamp")


def no_nul(name: str, value: str) -> str:
    """``value``, refused when it holds a NUL character (PostgreSQL cannot store one in text: psycopg's
    ``DataError`` quoting the SQL, LangGraph's ``PostgresSaver`` alike; SQLite would keep it on one database and
    not the other). Every ``HazelSaver`` method checks the thread ids and namespaces it is given so.

    Raises:
        ValueError: ``thread_id holds a NUL character (\\x00), which Hazel's database cannot store``."""
    if "\x00" in value:
        raise ValueError(f"{name} holds a NUL character (\\x00), which Hazel's database cannot store")
    return value


@dataclass(frozen=True)
class StoredRow:
    """One row of ``hazel_lg_checkpoints`` as read back (``metadata`` decoded; bytes as stored; ``stamp``: drawn
    at the last write of its content, ``store.schema``)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    chain_len: int
    compressed: bool
    payload: bytes
    channel_type: str | None
    channel_blob: bytes | None
    metadata: dict[str, Any]
    stamp: int = 0

    @property
    def key(self) -> Key:
        return (self.thread_id, self.checkpoint_ns, self.checkpoint_id)

    @property
    def parent_key(self) -> Key | None:
        if self.parent_checkpoint_id is None:
            return None
        return (self.thread_id, self.checkpoint_ns, self.parent_checkpoint_id)


@dataclass(frozen=True)
class ThreadSize:
    """What one thread holds: ``checkpoints`` rows of ``stored_bytes`` payload bytes, and ``writes`` pending
    writes of ``write_bytes`` serialized bytes (row and index overhead not counted)."""

    checkpoints: int = 0
    stored_bytes: int = 0
    writes: int = 0
    write_bytes: int = 0

    @property
    def bytes(self) -> int:
        return self.stored_bytes + self.write_bytes


@dataclass(frozen=True)
class StoredWrite:
    """One pending write (``hazel_lg_writes``)."""

    task_id: str
    channel: str
    type: str | None
    blob: bytes | None
    task_path: str
    idx: int


def _chain_sql(postgresql: bool, latest: bool) -> Any:
    """A checkpoint and its ancestors back to their snapshot, snapshot first, in one query. ``latest``: the
    thread's newest checkpoint in the namespace (``:checkpoint_id`` unused). On PostgreSQL each step is a
    primary-key lookup (LATERAL ... LIMIT 1), as ``store.checkpoints`` does; ``:max_depth`` stops a chain that
    a re-put turned into a loop."""
    cols = ", ".join(_CHAIN_COLUMNS)
    seed = ("(SELECT max(checkpoint_id) FROM hazel_lg_checkpoints WHERE thread_id = :thread_id"
            " AND checkpoint_ns = :checkpoint_ns)" if latest else ":checkpoint_id")
    c_cols = ", ".join(f"c.{c}" for c in _CHAIN_COLUMNS)
    step = ("FROM chain CROSS JOIN LATERAL (SELECT " + cols + " FROM hazel_lg_checkpoints"
            " WHERE thread_id = :thread_id AND checkpoint_ns = :checkpoint_ns"
            " AND checkpoint_id = chain.parent_checkpoint_id LIMIT 1) c"
            if postgresql else
            "FROM chain JOIN hazel_lg_checkpoints c ON c.thread_id = :thread_id"
            " AND c.checkpoint_ns = :checkpoint_ns AND c.checkpoint_id = chain.parent_checkpoint_id")
    sql = (f"WITH RECURSIVE chain({cols}, depth) AS ("
           f" SELECT {cols}, 0 FROM hazel_lg_checkpoints"
           f"  WHERE thread_id = :thread_id AND checkpoint_ns = :checkpoint_ns AND checkpoint_id = {seed}"
           " UNION ALL"
           f" SELECT {c_cols}, chain.depth + 1 {step}"
           "  WHERE chain.chain_len > 0 AND chain.depth < :max_depth"
           f") SELECT {cols} FROM chain ORDER BY depth DESC")
    return text(sql).columns(compressed=cps.c.compressed.type, metadata=cps.c.metadata.type)


_CHAIN = {(pg, latest): _chain_sql(pg, latest) for pg in (False, True) for latest in (False, True)}

@cache
def _statements(name: str) -> tuple[Any, Any, Any]:
    """``(insert checkpoint, insert write, upsert write)``, each ``ON CONFLICT``, for dialect ``name``
    (``sqlite`` or ``postgresql``). Built on first use: importing SQLAlchemy's PostgreSQL dialect costs a
    SQLite deployment's every CLI command about 50 ms."""
    dialect = import_module(f"sqlalchemy.dialects.{name}")
    ins = dialect.insert(wr)
    upsert = ins.on_conflict_do_update(
        index_elements=["thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
        set_={"channel": ins.excluded.channel, "type": ins.excluded.type, "blob": ins.excluded.blob})
    return dialect.insert(cps).on_conflict_do_nothing(), ins.on_conflict_do_nothing(), upsert


_WRITES_OF = (select(wr.c.task_id, wr.c.channel, wr.c.type, wr.c.blob, wr.c.task_path, wr.c.idx)
              .where((wr.c.thread_id == bindparam("thread_id")) & (wr.c.checkpoint_ns == bindparam("checkpoint_ns"))
                     & (wr.c.checkpoint_id == bindparam("checkpoint_id"))))
_REPLACE = (update(cps).where((cps.c.thread_id == bindparam("k_thread_id"))
                              & (cps.c.checkpoint_ns == bindparam("k_checkpoint_ns"))
                              & (cps.c.checkpoint_id == bindparam("k_checkpoint_id"))))


def _stored(m: Any, thread_id: str | None = None, checkpoint_ns: str | None = None) -> StoredRow:
    return StoredRow(
        thread_id=m["thread_id"] if thread_id is None else thread_id,
        checkpoint_ns=m["checkpoint_ns"] if checkpoint_ns is None else checkpoint_ns,
        checkpoint_id=m["checkpoint_id"], parent_checkpoint_id=m["parent_checkpoint_id"],
        chain_len=m["chain_len"], compressed=bool(m["compressed"]), payload=bytes(m["payload"]),
        channel_type=m["channel_type"],
        channel_blob=None if m["channel_blob"] is None else bytes(m["channel_blob"]),
        metadata=m["metadata"] if isinstance(m["metadata"], dict) else json.loads(m["metadata"]),
        stamp=m["stamp"])


class LangGraphRepo:
    """LangGraph's checkpoints and writes, inside one transaction (``conn``)."""

    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    # -- writing ---------------------------------------------------------------------------------------------

    def insert(self, row: dict[str, Any]) -> bool:
        """Insert a checkpoint row (``ROW_COLUMNS``); False, writing nothing, when its key already exists."""
        return fast.execute(self.conn, _statements(self.dialect.name)[0], row).rowcount == 1

    def replace(self, key: Key, row: dict[str, Any]) -> None:
        """Overwrite the stored columns of checkpoint ``key`` (a re-put, with a new ``stamp``; or a delta rewritten
        as a snapshot of the same checkpoint, without one: its stamp stays)."""
        values = {k: v for k, v in row.items() if k not in ("thread_id", "checkpoint_ns", "checkpoint_id")}
        self.conn.execute(_REPLACE.values(**values),
                          {"k_thread_id": key[0], "k_checkpoint_ns": key[1], "k_checkpoint_id": key[2]})

    def put_writes(self, rows: Sequence[dict[str, Any]], *, upsert: bool) -> None:
        """Insert pending writes; ``upsert``: a write already stored under its key is replaced, else kept."""
        stmt = _statements(self.dialect.name)[2 if upsert else 1]
        for row in rows:
            fast.execute(self.conn, stmt, row)

    # -- reading ---------------------------------------------------------------------------------------------

    def chain(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None, *,
              max_depth: int) -> list[StoredRow]:
        """Checkpoint ``checkpoint_id`` (None: the newest of the thread's namespace) and its ancestors back to
        their snapshot, snapshot first; [] when there is no such checkpoint."""
        stmt = _CHAIN[(self.dialect.postgresql, checkpoint_id is None)]
        params = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "max_depth": max_depth}
        if checkpoint_id is not None:
            params["checkpoint_id"] = checkpoint_id
        rows = fast.execute(self.conn, stmt, params, binary=True).rows()
        return [_stored(r, thread_id, checkpoint_ns) for r in rows]

    def exists(self, key: Key) -> bool:
        """Whether checkpoint ``key`` is stored."""
        return self.conn.execute(select(cps.c.chain_len).where(
            (cps.c.thread_id == key[0]) & (cps.c.checkpoint_ns == key[1]) & (cps.c.checkpoint_id == key[2]))
        ).first() is not None

    def writes(self, key: Key) -> list[StoredWrite]:
        """The pending writes stored against checkpoint ``key`` (unsorted)."""
        rows = fast.execute(self.conn, _WRITES_OF, {"thread_id": key[0], "checkpoint_ns": key[1],
                                                   "checkpoint_id": key[2]}, binary=True).tuples()
        return [StoredWrite(r[0], r[1], r[2], None if r[3] is None else bytes(r[3]), r[4], r[5]) for r in rows]

    def writes_of(self, keys: Iterable[Key]) -> dict[Key, list[StoredWrite]]:
        """The pending writes of several checkpoints, by checkpoint."""
        keys = list(keys)
        out: dict[Key, list[StoredWrite]] = {k: [] for k in keys}
        for part in _chunks(keys):
            rows = self.conn.execute(
                select(wr.c.thread_id, wr.c.checkpoint_ns, wr.c.checkpoint_id, wr.c.task_id, wr.c.channel, wr.c.type,
                       wr.c.blob, wr.c.task_path, wr.c.idx)
                .where(tuple_(wr.c.thread_id, wr.c.checkpoint_ns, wr.c.checkpoint_id).in_(part))).all()
            for r in rows:
                out[(r[0], r[1], r[2])].append(
                    StoredWrite(r[3], r[4], r[5], None if r[6] is None else bytes(r[6]), r[7], r[8]))
        return out

    def search(self, *, thread_id: str | None, checkpoint_ns: str | None, checkpoint_id: str | None,
               metadata_filter: dict[str, Any] | None, before_id: str | None, limit: int | None) -> list[Key]:
        """Keys of the checkpoints matching, newest (greatest id) first: in ``thread_id`` (None: every
        thread), ``checkpoint_ns`` (None: every namespace), whose metadata holds every key/value of
        ``metadata_filter``, with an id below ``before_id``, at most ``limit``."""
        stmt = select(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.checkpoint_id)
        if thread_id is not None:
            stmt = stmt.where(cps.c.thread_id == thread_id)
        if checkpoint_ns is not None:
            stmt = stmt.where(cps.c.checkpoint_ns == checkpoint_ns)
        if checkpoint_id is not None:
            stmt = stmt.where(cps.c.checkpoint_id == checkpoint_id)
        if before_id is not None:
            stmt = stmt.where(cps.c.checkpoint_id < before_id)
        for i, (name, value) in enumerate((metadata_filter or {}).items()):
            stmt = stmt.where(self._metadata_holds(i, name, value))
        stmt = stmt.order_by(cps.c.checkpoint_id.desc())
        if limit is not None:
            stmt = stmt.limit(int(limit))
        return [tuple(r) for r in self.conn.execute(stmt).all()]

    def _metadata_holds(self, i: int, name: str, value: Any) -> Any:
        """SQL: the row's metadata has ``name`` equal to ``value`` (a JSON value)."""
        if self.dialect.postgresql:
            return text(f"hazel_lg_checkpoints.metadata @> CAST(:mf{i} AS JSONB)").bindparams(
                **{f"mf{i}": json.dumps({name: value})})
        path = "$." + json.dumps(name)  # a quoted JSON path member: any key, no SQL built from it
        extracted = func.json_extract(cps.c.metadata, bindparam(f"mp{i}", path))
        if value is None:
            return extracted.is_(None)
        if isinstance(value, bool):
            return extracted == (1 if value else 0)
        if isinstance(value, (dict, list)):
            return extracted == json.dumps(value, separators=(",", ":"))
        return extracted == value

    def with_ancestors(self, keys: Sequence[Key]) -> dict[Key, StoredRow]:
        """The rows of ``keys`` and of every ancestor their chains read (back to each one's snapshot), by key:
        what decoding all of them needs, each row read once. One recursive query per 500 keys (its UNION reads
        a row shared by several chains once, and ends a chain a re-put turned into a loop)."""
        out: dict[Key, StoredRow] = {}
        columns = [cps.c[c] for c in ROW_COLUMNS if c not in ("run_id", "stored_bytes")]
        for part in _chunks(list(dict.fromkeys(keys))):
            seed = (select(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.checkpoint_id, cps.c.parent_checkpoint_id,
                           cps.c.chain_len)
                    .where(tuple_(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.checkpoint_id).in_(part))
                    .cte("needed", recursive=True))
            parent = cps.alias("parent")
            needed = seed.union(
                select(parent.c.thread_id, parent.c.checkpoint_ns, parent.c.checkpoint_id,
                       parent.c.parent_checkpoint_id, parent.c.chain_len)
                .where((parent.c.thread_id == seed.c.thread_id) & (parent.c.checkpoint_ns == seed.c.checkpoint_ns)
                       & (parent.c.checkpoint_id == seed.c.parent_checkpoint_id) & (seed.c.chain_len > 0)))
            rows = self.conn.execute(
                select(*columns).join(needed, (needed.c.thread_id == cps.c.thread_id)
                                      & (needed.c.checkpoint_ns == cps.c.checkpoint_ns)
                                      & (needed.c.checkpoint_id == cps.c.checkpoint_id))).mappings()
            for r in rows:
                row = _stored(r)
                out[row.key] = row
        return out

    def children(self, parents: Iterable[Key]) -> list[Key]:
        """Delta rows whose parent is one of ``parents`` (they must become snapshots before it goes)."""
        parents = list(parents)
        out: list[Key] = []
        for part in _chunks(parents):
            rows = self.conn.execute(
                select(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.checkpoint_id)
                .where(tuple_(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.parent_checkpoint_id).in_(part)
                       & (cps.c.chain_len > 0))).all()
            out.extend(tuple(r) for r in rows)
        return out

    def keys_of_runs(self, run_ids: Sequence[str]) -> list[Key]:
        """Every checkpoint whose metadata names one of ``run_ids``."""
        out: list[Key] = []
        for part in _chunks(list(run_ids)):
            rows = self.conn.execute(select(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.checkpoint_id)
                                     .where(cps.c.run_id.in_(part))).all()
            out.extend(tuple(r) for r in rows)
        return out

    def keys_of_threads(self, thread_ids: Sequence[str]) -> list[Key]:
        """Every checkpoint of ``thread_ids``, oldest first within each namespace."""
        rows = self.conn.execute(select(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.checkpoint_id)
                                 .where(cps.c.thread_id.in_(list(thread_ids)))
                                 .order_by(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.checkpoint_id)).all()
        return [tuple(r) for r in rows]

    def thread_sizes(self, thread_ids: Sequence[str]) -> dict[str, "ThreadSize"]:
        """What each of ``thread_ids`` holds (threads with nothing are left out): two grouped queries on the
        tables' primary keys, reading only those threads' rows."""
        ids = list(dict.fromkeys(thread_ids))
        out: dict[str, ThreadSize] = {}
        for part in _chunks(ids):
            cp = {r[0]: (int(r[1]), int(r[2] or 0)) for r in self.conn.execute(
                select(cps.c.thread_id, func.count(), func.sum(cps.c.stored_bytes))
                .where(cps.c.thread_id.in_(part)).group_by(cps.c.thread_id))}
            ws = {r[0]: (int(r[1]), int(r[2] or 0)) for r in self.conn.execute(
                select(wr.c.thread_id, func.count(), func.sum(func.coalesce(func.length(wr.c.blob), 0)))
                .where(wr.c.thread_id.in_(part)).group_by(wr.c.thread_id))}
            for t in cp.keys() | ws.keys():
                (n, b), (w, wb) = cp.get(t, (0, 0)), ws.get(t, (0, 0))
                out[t] = ThreadSize(checkpoints=n, stored_bytes=b, writes=w, write_bytes=wb)
        return out

    def stored_bytes(self, thread_id: str) -> int:
        """Payload bytes of a thread's checkpoints (without row and index overhead, nor pending writes)."""
        return int(self.conn.execute(select(func.coalesce(func.sum(cps.c.stored_bytes), 0))
                                     .where(cps.c.thread_id == thread_id)).scalar_one())

    # -- deleting and copying --------------------------------------------------------------------------------

    def delete_threads(self, thread_ids: Sequence[str]) -> None:
        """Every checkpoint and write of ``thread_ids``."""
        ids = list(thread_ids)
        self.conn.execute(delete(wr).where(wr.c.thread_id.in_(ids)))
        self.conn.execute(delete(cps).where(cps.c.thread_id.in_(ids)))

    def orphan(self, parents: Sequence[Key]) -> None:
        """Checkpoints whose parent is one of ``parents`` lose it (``parent_checkpoint_id`` NULL); call it only
        for snapshot rows, or after ``children`` were rewritten as snapshots."""
        for part in _chunks(list(parents)):
            self.conn.execute(update(cps).where(
                tuple_(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.parent_checkpoint_id).in_(part))
                .values(parent_checkpoint_id=None))

    def delete(self, keys: Sequence[Key]) -> None:
        """Checkpoints ``keys`` and their writes (rewrite the deltas that hang on them first: ``children``)."""
        for part in _chunks(list(keys)):
            self.conn.execute(delete(wr).where(
                tuple_(wr.c.thread_id, wr.c.checkpoint_ns, wr.c.checkpoint_id).in_(part)))
            self.conn.execute(delete(cps).where(
                tuple_(cps.c.thread_id, cps.c.checkpoint_ns, cps.c.checkpoint_id).in_(part)))

    def snapshot_children(self, parents: Sequence[Key], snapshots: Snapshots, *, skip: Iterable[Key] = (),
                          orphan: bool = False) -> list[Key]:
        """Rewrite as snapshots (``snapshots`` makes them) the delta rows stored as changes of ``parents``, but
        ``skip``; ``orphan``: they lose their parent too. Returns the keys rewritten."""
        skipped = set(skip)
        kids = [k for k in self.children(parents) if k not in skipped]
        self.rewrite_as_snapshots(kids, snapshots, orphan=orphan)
        return kids

    def rewrite_as_snapshots(self, keys: Sequence[Key], snapshots: Snapshots, *, orphan: bool = False) -> None:
        """Rewrite checkpoints ``keys`` as standalone snapshots (``snapshots`` makes them from their chains,
        read here); ``orphan``: they lose their parent too."""
        if not keys:
            return
        for key, columns in snapshots(self.with_ancestors(keys), list(keys)).items():
            if orphan:
                columns = {**columns, "parent_checkpoint_id": None}
            self.replace(key, columns)

    def drop(self, doomed: Sequence[Key], snapshots: Snapshots) -> None:
        """Delete checkpoints ``doomed`` with their writes, after rewriting as snapshots without a parent the
        checkpoints kept that hang on them (the deleting half of ``HazelSaver`` and retention share it)."""
        if not doomed:
            return
        self.snapshot_children(doomed, snapshots, skip=doomed, orphan=True)
        self.orphan(doomed)
        self.delete(doomed)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Every checkpoint and write of one thread under another thread id, as stored (their chains stay
        within the thread). Rows the target already has under the same key are kept."""
        self._copy(cps, source_thread_id, target_thread_id,
                   ("thread_id", "checkpoint_ns", "checkpoint_id"))
        self._copy(wr, source_thread_id, target_thread_id,
                   ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"))

    def _copy(self, table: Any, source: str, target: str, key: tuple[str, ...]) -> None:
        names = [c.name for c in table.c]
        cols = [bindparam("target", target, type_=table.c.thread_id.type) if n == "thread_id" else table.c[n]
                for n in names]
        existing = table.alias("existing")
        taken = select(1).where(and_(existing.c.thread_id == target,
                                     *(existing.c[k] == table.c[k] for k in key if k != "thread_id")))
        rows = select(*cols).where((table.c.thread_id == source) & ~taken.exists())
        self.conn.execute(insert(table).from_select(names, rows))


def _chunks(items: list, size: int = 500) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


