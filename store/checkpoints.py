"""The ``hazel_checkpoints`` table: write a checkpoint as a change or a snapshot, load any checkpoint.

Physically a checkpoint is either a full snapshot of the state tree or an RFC 6902 patch against its parent.
A new snapshot is taken when the chain of patches since the last one reaches ``SnapshotPolicy.max_chain``
checkpoints, or when the bytes of those patches reach ``delta_ratio`` times the snapshot's size. So the bytes
written per step follow the size of the change, and loading any checkpoint reads at most ``max_chain + 1``
rows in one recursive query, whatever the length of the run's history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from functools import lru_cache

from pydantic import TypeAdapter
from sqlalchemy import Connection, bindparam, func, select, text, update

from store import codec, delta, fast
from store.dialect import Dialect
from store.errors import LeaseLostError
from store.models import CheckpointInfo, LoadedCheckpoint
from store.runs import RunRepo, advance_values, fence_condition
from store.schema import checkpoints, runs

_INFO_COLUMNS = [c for c in checkpoints.c if c.name not in ("payload", "compressed", "base_seq", "chain_len")]
_ONE_INFO = select(*_INFO_COLUMNS, checkpoints.c.chain_len).where(
    (checkpoints.c.run_id == bindparam("run_id")) & (checkpoints.c.seq == bindparam("seq")))
_OF_RUN = checkpoints.c.run_id == bindparam("run_id")
_ALL_INFO = select(*_INFO_COLUMNS, checkpoints.c.chain_len).where(_OF_RUN).order_by(checkpoints.c.seq)
_NEWEST_INFO = (select(*_INFO_COLUMNS, checkpoints.c.chain_len).where(_OF_RUN)
                .order_by(checkpoints.c.seq.desc()).limit(bindparam("newest")))
_INSERT = checkpoints.insert()
"""Built once: executed with a parameter dict, SQLAlchemy reuses its compiled form (building ``.values(...)``
per step cost more than the database's own commit)."""


_INFO_NAMES = ("branch", "step", "next_step", "workflow_version", "created_at", "stored_bytes", "decision_id",
               "handoff")
"""Columns of the loaded checkpoint itself, carried by the chain query's first (depth 0) row only."""


_PENDING_SEQ = ("(SELECT checkpoint_seq FROM hazel_steering_requests WHERE run_id = :run_id AND status = 'pending'"
                " ORDER BY id DESC LIMIT 1)")
"""The checkpoint the run's pending steering request waits at (``RequestRepo.pending_for_run``'s row)."""


def _chain_sql(postgresql: bool, seq_sql: str = ":seq") -> Any:
    """A checkpoint and its ancestors back to their snapshot, snapshot first, in ONE query; the checkpoint's
    own row (depth 0) also carries its metadata (``_INFO_NAMES``), so that a load is one statement.

    On PostgreSQL every step of the recursion is a primary-key lookup whatever the table's statistics (a
    LATERAL subquery with LIMIT 1): with none yet (a new table) the planner joined by ``run_id`` alone and
    filtered, reading the run's whole history once per chain row (5 ms instead of 0.4 ms for 68 rows of a
    200-step run). Its NULLs are cast to the anchor's types, as a recursive CTE requires there. ``seq_sql``: the
    SQL of the checkpoint's number (a parameter, or ``_PENDING_SEQ``)."""
    info = ", ".join(_INFO_NAMES)
    nulls = (", ".join(f"CAST(NULL AS {t})" for t in ("INTEGER", "VARCHAR(200)", "VARCHAR(200)", "INTEGER",
                                                       "TIMESTAMP WITH TIME ZONE", "INTEGER", "INTEGER", "JSONB"))
             if postgresql else ", ".join("NULL" for _ in _INFO_NAMES))
    step = ("FROM chain CROSS JOIN LATERAL (SELECT seq, parent_seq, chain_len, compressed, payload"
            " FROM hazel_checkpoints WHERE run_id = :run_id AND seq = chain.parent_seq LIMIT 1) c"
            if postgresql else
            "FROM hazel_checkpoints c JOIN chain ON c.run_id = :run_id AND c.seq = chain.parent_seq")
    sql = (f"WITH RECURSIVE chain(seq, parent_seq, chain_len, compressed, payload, depth, {info}) AS ("
           f" SELECT seq, parent_seq, chain_len, compressed, payload, 0, {info} FROM hazel_checkpoints"
           f"  WHERE run_id = :run_id AND seq = {seq_sql}"
           " UNION ALL"
           f" SELECT c.seq, c.parent_seq, c.chain_len, c.compressed, c.payload, chain.depth + 1, {nulls}"
           f"  {step} WHERE chain.chain_len > 0"
           f") SELECT seq, parent_seq, chain_len, compressed, payload, {info} FROM chain ORDER BY depth DESC")
    typed = {name: checkpoints.c[name].type for name in ("compressed", "created_at", "handoff")}
    return text(sql).columns(**typed)


_CHAIN = _chain_sql(False)
_CHAIN_PG = _chain_sql(True)
_PENDING_CHAIN = _chain_sql(False, _PENDING_SEQ)
_PENDING_CHAIN_PG = _chain_sql(True, _PENDING_SEQ)


@dataclass(frozen=True)
class SnapshotPolicy:
    """When to store a full snapshot instead of a patch.

    ``max_chain``: most patches between a checkpoint and its snapshot (bounds rows read per load).
    ``delta_ratio``: snapshot once the patches since the last snapshot hold this many times its bytes
    (bounds the work of replaying them).

    With a state that grows every step (a transcript, a list of findings) the ratio spaces snapshots
    geometrically, so they add a fraction of the patches' bytes; a snapshot every 100 patches would instead
    write the whole state every 100 steps (1.9 KB per checkpoint for a 1 KB change after 500 steps, against
    1.1 KB now: ``python -m bench``, item 3).

    The ratio is of stored (compressed) bytes. zstd (``store.codec``) packs a large snapshot smaller, next to
    its 1 KB patches, than zlib did (a 225 KB state: 43 % of its JSON instead of 52 %), so at 4.0 it spaced
    snapshots closer as the state grew (every 3.7x the steps instead of 4.2x); 4.5 gives back zlib's spacing
    (snapshots at #7, #35, #160, #640 of the bench's run instead of #7, #33, #148, #616) and bytes."""

    max_chain: int = 1000
    delta_ratio: float = 4.5


@dataclass(frozen=True)
class ChainPosition:
    """Where a checkpoint sits in its snapshot chain; the engine keeps the head's in memory between steps."""

    seq: int
    tree: Any
    base_seq: int
    base_bytes: int
    chain_len: int
    delta_bytes: int


@dataclass(frozen=True)
class Fence:
    """Move the leased run along in the same write as its checkpoint: ``values`` are the run's columns to set
    (as for ``RunRepo.advance``), applied only while ``token`` still holds the run's lease."""

    run_id: str
    token: str
    now: datetime
    values: dict[str, Any]


@lru_cache(maxsize=64)
def _fenced_insert(keys: tuple[str, ...], guard: bool = False):  # noqa: ANN202
    """PostgreSQL: the fenced run UPDATE and the checkpoint INSERT in ONE statement (a data-modifying CTE), so a
    step costs the database one round trip plus the commit, like a bare INSERT. The INSERT selects from the
    UPDATE's RETURNING: no lease, no row. ``guard``: no lease, the statement fails (``store.fast.guarded``)."""
    fenced = (update(runs).where(fence_condition())
              .values({k: bindparam(f"run_{k}", type_=runs.c[k].type) for k in keys})
              .returning(runs.c.id).cte("fenced"))
    columns = list(checkpoints.c)
    # every parameter is prefixed: a bare name matching a column of hazel_runs would join the UPDATE's SET
    rows = select(*(bindparam(f"cp_{c.name}", type_=c.type) for c in columns)).select_from(fenced)
    if guard:
        rows = fast.guarded(fenced, rows)
    # preserve_rowcount: SQLAlchemy reports an INSERT's rowcount only when asked (0 rows = lease lost)
    return (checkpoints.insert().from_select([c.name for c in columns], rows)
            .execution_options(preserve_rowcount=True))


@dataclass(frozen=True)
class NewCheckpoint:
    """Everything a checkpoint row needs besides its position (see ``CheckpointInfo`` for meanings)."""

    run_id: str
    seq: int
    parent_seq: int | None
    branch: int
    step: str
    next_step: str | None
    workflow_version: int
    created_at: datetime
    decision_id: int | None = None
    handoff: dict[str, Any] | None = None


SEQ_MAX = 2**31 - 1
"""The largest checkpoint number a database can hold (``seq`` is a 32-bit INTEGER on PostgreSQL): a larger
one names no checkpoint, and is answered as such without a query (SQLite's driver cannot even bind one past
64 bits: ``OverflowError``)."""

ROW_COLUMNS = ("run_id", "seq", "parent_seq", "branch", "step", "next_step", "workflow_version", "created_at",
               "base_seq", "chain_len", "stored_bytes", "compressed", "payload", "decision_id", "handoff")
"""The columns of a checkpoint row, in the order ``encode_checkpoint`` gives its values."""


def encode_checkpoint(cp: NewCheckpoint, tree: Any, parent: ChainPosition | None,
                      policy: SnapshotPolicy) -> tuple[tuple[Any, ...], ChainPosition]:
    """The row of checkpoint ``cp`` holding ``tree`` (values in ``ROW_COLUMNS`` order): a patch against
    ``parent`` when it is ``cp``'s parent and the policy allows, else a full snapshot. Returns it with the new
    checkpoint's chain position (the next one's ``parent``)."""
    payload = compressed = None
    if parent is not None and parent.seq == cp.parent_seq:
        ops = delta.diff(parent.tree, tree)
        payload, compressed = codec.dump_payload(ops)
        chain_len = parent.chain_len + 1
        delta_bytes = parent.delta_bytes + len(payload)
        if chain_len > policy.max_chain or delta_bytes >= policy.delta_ratio * max(parent.base_bytes, 1024):
            payload = None
    if payload is None:
        payload, compressed = codec.dump_payload(tree)
        position = ChainPosition(cp.seq, tree, cp.seq, len(payload), 0, 0)
    else:
        position = ChainPosition(cp.seq, tree, parent.base_seq, parent.base_bytes, chain_len, delta_bytes)
    row = (cp.run_id, cp.seq, cp.parent_seq, cp.branch, cp.step, cp.next_step, cp.workflow_version, cp.created_at,
           position.base_seq, position.chain_len, len(payload), compressed, payload, cp.decision_id, cp.handoff)
    return row, position


def _info(row: Any) -> CheckpointInfo:
    m = row if isinstance(row, dict) else dict(row._mapping)
    return CheckpointInfo(
        run_id=m["run_id"], seq=m["seq"], parent_seq=m["parent_seq"], branch=m["branch"], step=m["step"],
        next_step=m["next_step"], workflow_version=m["workflow_version"], created_at=m["created_at"],
        is_snapshot=m["chain_len"] == 0, stored_bytes=m["stored_bytes"], decision_id=m["decision_id"], handoff=m["handoff"],
    )


_LISTED_NAMES = [c.name for c in _INFO_COLUMNS]
"""The columns of ``_ALL_INFO`` and ``_NEWEST_INFO`` before their last, ``chain_len``."""


def _info_rows(res: fast.Result) -> list[dict[str, Any]]:
    """The rows of ``_ALL_INFO`` / ``_NEWEST_INFO`` as ``CheckpointInfo``'s fields: built from the driver's tuples,
    converting only the two columns that need it (about half the time of ``rows()`` for a history of 200)."""
    names = _LISTED_NAMES
    at, handoff = names.index("created_at"), names.index("handoff")
    time_out = res.compiled.columns_out.get("created_at") or (lambda v: v)
    json_out = res.compiled.columns_out.get("handoff") or (lambda v: v)
    out = []
    for values in res.tuples():
        row = dict(zip(names, values))
        row["created_at"] = time_out(values[at])
        if values[handoff] is not None:
            row["handoff"] = json_out(values[handoff])
        row["is_snapshot"] = values[-1] == 0
        out.append(row)
    return out


@lru_cache(maxsize=None)
def _infos() -> TypeAdapter[list[CheckpointInfo]]:
    """A history's rows validated as one list: pydantic-core validates 200 in ~0.2 ms, one by one in ~0.3 ms
    (``model_construct``, which skips validation, takes ~0.7 ms). Built on first use: building it (the
    schema of ``CheckpointInfo``) is ~2 ms of the start of every ``hazel`` command, most of which list none."""
    return TypeAdapter(list[CheckpointInfo])


def _loaded(run_id: str, res: fast.Result) -> LoadedCheckpoint | None:
    """The checkpoint a chain query (``_chain_sql``) answered, its state rebuilt; None when it has no row."""
    rows = res.tuples()  # (seq, parent_seq, chain_len, compressed, payload, *_INFO_NAMES): snapshot first
    if not rows:
        return None
    base, own = rows[0], rows[-1]
    if base[2] != 0:
        raise RuntimeError(f"checkpoint chain of {run_id}#{own[0]} does not start at a snapshot")
    tree = codec.load_payload(base[4], bool(base[3]))
    patches = rows[1:]
    for ops in codec.load_payloads([(row[4], bool(row[3])) for row in patches]):
        tree = delta.apply(tree, ops, copy_values=False)
    delta_bytes = sum(len(row[4]) for row in patches)
    info = dict(zip(_INFO_NAMES, own[5:]))
    info = CheckpointInfo(
        run_id=run_id, seq=own[0], parent_seq=own[1], branch=info["branch"], step=info["step"],
        next_step=info["next_step"], workflow_version=info["workflow_version"],
        created_at=res.convert("created_at", info["created_at"]), is_snapshot=own[2] == 0,
        stored_bytes=info["stored_bytes"], decision_id=info["decision_id"],
        handoff=res.convert("handoff", info["handoff"]))
    return LoadedCheckpoint(info=info, tree=tree, base_seq=base[0], chain_len=len(rows) - 1,
                            delta_bytes=delta_bytes, rows_read=len(rows), base_bytes=len(base[4]))


class CheckpointRepo:
    """``written``: where the checkpoints this transaction wrote are noted (run id -> checkpoint, position,
    stored bytes), for ``Store.transaction`` to publish to its ``HeadCache`` once committed."""

    def __init__(self, conn: Connection, policy: SnapshotPolicy, dialect: Dialect,
                 written: dict[str, Any] | None = None) -> None:
        self.conn = conn
        self.policy = policy
        self.dialect = dialect
        self.written = written if written is not None else {}

    def write(self, cp: NewCheckpoint, tree: Any, parent: ChainPosition | None, *,
              fence: Fence | None = None) -> ChainPosition:
        """Insert checkpoint ``cp`` holding state ``tree`` (a patch against ``parent`` when the policy allows)
        and, with ``fence``, advance its leased run in the same write. Returns its chain position, to pass as
        ``parent`` for the next one.

        Raises:
            LeaseLostError: with ``fence``, the run is no longer leased by its token (nothing was written).
        """
        return self.write_later(cp, tree, parent, fence=fence).get()

    def write_later(self, cp: NewCheckpoint, tree: Any, parent: ChainPosition | None, *,
                    fence: Fence | None = None) -> fast.Later[ChainPosition]:
        """``write``, the fence checked when the answer is asked for (after a ``pipeline``: no round trip of
        its own; ``get`` raises ``LeaseLostError``: roll the transaction back)."""
        values, position = encode_checkpoint(cp, tree, parent, self.policy)
        row = dict(zip(ROW_COLUMNS, values))
        noted = (cp, position, row["stored_bytes"])
        if fence is None:
            fast.execute(self.conn, _INSERT, row)
        elif self.dialect.one_statement_step:
            values = advance_values(fence.values, fence.now)
            guard = getattr(self.conn, "guarding", False)
            if guard:  # a lost lease fails the transaction (store.Tx.pipeline: LeaseLostError)
                self.conn.fenced = fence.run_id
            res = fast.execute(self.conn, _fenced_insert(tuple(sorted(values)), guard), {
                **{f"cp_{k}": v for k, v in row.items()}, **{f"run_{k}": v for k, v in values.items()},
                "fence_run_id": fence.run_id, "fence_token": fence.token})

            def fenced() -> ChainPosition:
                if res.rowcount != 1:
                    raise LeaseLostError(f"run {fence.run_id} is no longer leased by this worker")
                self.written[cp.run_id] = noted  # (only a row that was written)
                return position
            return fast.Later(fenced)
        else:  # SQLite: two statements in process, no round trip to save
            RunRepo(self.conn, self.dialect).advance(fence.run_id, token=fence.token, now=fence.now, **fence.values)
            fast.execute(self.conn, _INSERT, row)
        self.written[cp.run_id] = noted
        return fast.Later(lambda: position)

    def load(self, run_id: str, seq: int) -> LoadedCheckpoint | None:
        """The full state at checkpoint ``seq``: its snapshot plus the patches after it, in one query; None
        when there is no such checkpoint (a ``seq`` out of ``0..SEQ_MAX`` too, without a query)."""
        return self.load_later(run_id, seq).get()

    def load_later(self, run_id: str, seq: int | None) -> fast.Later[LoadedCheckpoint | None]:
        """``load``, its answer read when asked (``store.fast.pipeline``); ``seq`` None: the checkpoint the
        run's pending steering request waits at (in the same query: a decision reads its run, request and
        state in one round trip)."""
        pg = self.dialect.postgresql
        if seq is not None and not 0 <= seq <= SEQ_MAX:  # no such checkpoint; the driver could not even send it
            return fast.Later(lambda: None)
        if seq is None:
            res = fast.execute(self.conn, _PENDING_CHAIN_PG if pg else _PENDING_CHAIN, {"run_id": run_id},
                               binary=True)
        else:
            res = fast.execute(self.conn, _CHAIN_PG if pg else _CHAIN, {"run_id": run_id, "seq": seq}, binary=True)
        return fast.Later(lambda: _loaded(run_id, res))

    def position(self, loaded: LoadedCheckpoint) -> ChainPosition:
        """The chain position of a loaded checkpoint (to continue writing patches after it)."""
        return ChainPosition(loaded.info.seq, loaded.tree, loaded.base_seq, loaded.base_bytes, loaded.chain_len,
                             loaded.delta_bytes)

    def info(self, run_id: str, seq: int) -> CheckpointInfo | None:
        """One checkpoint's metadata (no state); None when there is none (a ``seq`` out of ``0..SEQ_MAX`` too)."""
        if not 0 <= seq <= SEQ_MAX:
            return None
        row = fast.execute(self.conn, _ONE_INFO, {"run_id": run_id, "seq": seq}).one()
        return _info(row) if row else None

    def of_decision(self, run_id: str, decision_id: int) -> CheckpointInfo | None:
        """The checkpoint decision ``decision_id`` of run ``run_id`` wrote (a decision's or a rewind's fork, whose
        ``next_step`` is where the run continued), the first if several; None when it wrote none or it was
        pruned. Reads the run's rows (its primary key), not the whole table."""
        row = self.conn.execute(select(*_INFO_COLUMNS, checkpoints.c.chain_len).where(
            (checkpoints.c.run_id == run_id) & (checkpoints.c.decision_id == decision_id))
            .order_by(checkpoints.c.seq).limit(1)).first()
        return _info(row) if row else None

    def list(self, run_id: str, *, newest: int | None = None) -> list[CheckpointInfo]:
        """Every checkpoint of the run, all branches, by sequence number; with ``newest=N`` only the N latest,
        newest first."""
        return self.list_later(run_id, newest=newest).get()

    def list_later(self, run_id: str, *, newest: int | None = None) -> fast.Later[list[CheckpointInfo]]:
        """``list``, its answer read when asked (``store.fast.pipeline``)."""
        if newest is None:
            res = fast.execute(self.conn, _ALL_INFO, {"run_id": run_id}, binary=True)
        else:
            res = fast.execute(self.conn, _NEWEST_INFO, {"run_id": run_id, "newest": newest})
        return fast.Later(lambda: _infos().validate_python(_info_rows(res)))

    def stored_bytes(self, run_id: str) -> int:
        """Payload bytes of all the run's checkpoints (without row and index overhead)."""
        return int(self.conn.execute(
            select(func.coalesce(func.sum(checkpoints.c.stored_bytes), 0)).where(checkpoints.c.run_id == run_id)
        ).scalar_one())
