"""The ``hazel_outbox`` table: notifications written in the transaction that causes them, delivered after.

Delivery claims a due row by pushing its ``next_attempt_at`` forward (a short lease), so two deliverers never
send the same row at once; a sender that dies leaves the row due again when the lease runs out.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Collection, Iterable

from sqlalchemy import (ColumnElement, Connection, String, any_, bindparam, false, func, literal, literal_column, or_,
                        select, union_all, update)

from store import fast
from store.dialect import Dialect
from store.models import OutboxKind, OutboxMessage, OutboxStatus
from store.schema import outbox, steering_requests


def _message(row: Any) -> OutboxMessage:
    return OutboxMessage.model_validate(dict(row._mapping))


_INSERT = outbox.insert()
"""Built once and executed with a parameter dict (SQLAlchemy reuses the compiled form; see ``store.checkpoints``)."""
_MARK_SENT = update(outbox).where(outbox.c.id == bindparam("message_id")).values(
    status=OutboxStatus.SENT.value, sent_at=bindparam("sent_at", type_=outbox.c.sent_at.type), last_error=None)
_r = steering_requests.c
_COLUMNS = ["run_id", "request_id", "channel", "kind", "payload", "status", "attempts", "next_attempt_at",
            "created_at"]


def _of_kind(column: Any, kind: str) -> ColumnElement[bool]:
    """``column LIKE 'kind:%'``: a channel of kind ``kind`` (``slack`` → ``slack:#x``, ``slack:C…``; ``%``, ``_``
    and ``/`` in ``kind`` taken literally), its pattern written into the SQL: SQLite prepares a statement again
    at every execution when a LIKE pattern is a parameter (its LIKE optimization depends on the value: 11 µs
    of a 14 µs lookup on the 2-core VM)."""
    escaped = kind.replace("/", "//").replace("%", "/%").replace("_", "/_").replace("'", "''")
    return column.like(literal_column(f"'{escaped}:%'", String), escape="/")


@lru_cache(maxsize=16)
def _with_latest_on(kinds: tuple[str, ...]):  # noqa: ANN202
    """One INSERT of a message (the ``_INSERT`` parameters, ``next_at`` for its ``next_attempt_at``) and of
    the same message for the run's newest request on each of ``kinds`` of channel (``slack``: ``slack:…``),
    where it has one (``OutboxRepo.add``'s ``and_latest_on``). Built once per tuple of kinds (the engine's are
    subsets of ``bot.engine.transitions.FOLLOWING``: a handful), as ``store.fast`` keeps what it compiled."""
    kind, payload = bindparam("kind"), bindparam("payload", type_=outbox.c.payload.type)
    now = bindparam("created_at", type_=outbox.c.created_at.type)
    next_at = bindparam("next_at", type_=outbox.c.next_attempt_at.type)
    pending, zero = literal(OutboxStatus.PENDING.value), literal(0)
    rows = [select(bindparam("run_id"), bindparam("request_id"), bindparam("channel"), kind, payload, pending,
                   zero, next_at, now)]
    for i, of_kind in enumerate(kinds):
        latest = (select(_r.run_id, _r.id, _r.channel, kind, payload, pending, zero, next_at, now)
                  .where((_r.run_id == bindparam("run_id")) & _of_kind(_r.channel, of_kind))
                  .order_by(_r.id.desc()).limit(1).subquery(f"latest_{i}"))
        rows.append(select(*latest.c))
    return outbox.insert().from_select(_COLUMNS, union_all(*rows))


def _deliverable(channels: Collection[str], kinds: Collection[str], cols: Any = outbox.c) -> ColumnElement[bool]:
    """Rows whose channel is of one of the kinds ``channels`` (``slack`` matches ``slack`` and ``slack:…``) or
    whose outbox kind is in ``kinds`` (``cols``: the outbox's columns, or a subquery's with the same names)."""
    conds: list[ColumnElement[bool]] = [(cols.channel == k) | _of_kind(cols.channel, k)
                                        for k in channels]
    if kinds:  # (each kind its own literal bind, not an expanding IN: store.fast compiles it ahead)
        conds.append(cols.kind.in_([literal(k) for k in kinds]))
    return or_(*conds) if conds else false()


_PENDING = select(
    outbox.c.id, outbox.c.run_id, outbox.c.channel, outbox.c.kind, outbox.c.next_attempt_at,
    func.min(outbox.c.id).over(partition_by=(outbox.c.run_id, outbox.c.channel)).label("first_id"),
    func.count().over(partition_by=(outbox.c.run_id, outbox.c.channel)).label("queued"),
).where(outbox.c.status == OutboxStatus.PENDING.value).subquery("pending")
"""The pending messages, each with the id of the first pending message of its run and channel (``first_id``)
and how many of that run and channel are pending (``queued``): ``OutboxRepo.claim_due`` takes only a first one. Read from the status index's ``pending`` range, once per
claim (a correlated ``NOT EXISTS`` would read that range once per candidate on SQLite)."""


def _pick(now: Any, limit: int, channels: Collection[str] | None, kinds: Collection[str],
          of_runs: ColumnElement[bool] | None = None) -> Any:
    """What ``OutboxRepo.claim_due`` takes: the due pending messages (``next_attempt_at`` at or before ``now``, a
    datetime or a bind) that are the first of their run and channel, of the runs ``of_runs`` admits (a condition
    on ``_PENDING.c.run_id``; None: all), for ``channels`` or ``kinds`` (None: all), up to ``limit`` by id, each
    with ``queued``: a SELECT of the outbox's ids, to lock (``FOR UPDATE … SKIP LOCKED`` of the outbox)."""
    p = _PENDING.c
    due = (p.id == p.first_id) & (p.next_attempt_at <= now)
    if of_runs is not None:
        due &= of_runs
    if channels is not None:
        due &= _deliverable(channels, kinds, p)
    first = select(p.id, p.queued).where(due).order_by(p.id).limit(limit).subquery("first")
    return select(outbox.c.id, first.c.queued).join(first, first.c.id == outbox.c.id).order_by(outbox.c.id)


@lru_cache(maxsize=64)
def _claim_due_pg(of_runs: bool, channels: tuple[str, ...] | None, kinds: tuple[str, ...], limit: int) -> Any:
    """PostgreSQL: ``OutboxRepo.claim_due``'s pick and lease in one statement (a CTE that picks and locks the
    messages, the UPDATE that leases them answering each with its ``queued``), built once per shape and executed
    with ``now``, ``until`` (the lease's end) and, ``of_runs``, ``run_ids`` (a list: ``= ANY`` of an array).
    Its dialect module is imported here, not with this module: a command on SQLite (``hazel runs``) never needs
    it (20 ms of a 0.4 s process)."""
    from sqlalchemy.dialects import postgresql

    now = bindparam("now", type_=outbox.c.next_attempt_at.type)
    runs_in = (_PENDING.c.run_id == any_(bindparam("run_ids", type_=postgresql.ARRAY(outbox.c.run_id.type)))
               if of_runs else None)
    picked = _pick(now, limit, channels, kinds, runs_in).with_for_update(skip_locked=True, of=outbox).cte("picked")
    return (update(outbox).where((outbox.c.id == picked.c.id) & (outbox.c.status == OutboxStatus.PENDING.value)
                                 & (outbox.c.next_attempt_at <= now))
            .values(next_attempt_at=bindparam("until", type_=outbox.c.next_attempt_at.type),
                    attempts=outbox.c.attempts + 1)
            .returning(*outbox.c, picked.c.queued))


class Claimed(list[OutboxMessage]):
    """What ``OutboxRepo.claim_due`` took (a list of messages, by id), and ``held_back``: True when a later
    message of a claimed message's run and channel is pending behind it (sending this batch lets it go: claim
    again), False when nothing claimed holds anything back."""

    held_back: bool = False


def _claimed(taken: Iterable[tuple[OutboxMessage, int]]) -> Claimed:
    """What a claim leased, by id, from ``(message, how many of its run and channel are queued)``: ``held_back``
    when one of them has a later message behind it."""
    pairs = sorted(taken, key=lambda pair: pair[0].id)
    claimed = Claimed(message for message, _ in pairs)
    claimed.held_back = any(queued > 1 for _, queued in pairs)
    return claimed


class OutboxRepo:
    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def add(self, *, channel: str, kind: OutboxKind, now: datetime, run_id: str | None = None,
            request_id: int | None = None, payload: dict[str, Any] | None = None,
            deliver_at: datetime | None = None, and_latest_on: tuple[str, ...] = ()) -> None:
        """Queue a message for ``channel`` (nothing read back: inside a pipeline it costs no round trip).

        ``and_latest_on``: kinds of channel (``slack``: ``slack:#x``, ``slack:C…``; plain words, no ``%`` or
        ``_``) whose newest request of the run (pending or not) gets the same message, in that request's
        channel and thread; nothing for a kind where the run has no request. The same one statement (an
        INSERT … SELECT)."""
        values = dict(run_id=run_id, request_id=request_id, channel=channel, kind=OutboxKind(kind).value,
                      payload=payload or {}, created_at=now)
        if not and_latest_on:
            fast.execute(self.conn, _INSERT, dict(values, status=OutboxStatus.PENDING.value, attempts=0,
                                                  next_attempt_at=deliver_at or now))
            return
        fast.execute(self.conn, _with_latest_on(tuple(and_latest_on)), dict(values, next_at=deliver_at or now))

    def claim_due(self, *, now: datetime, lease_sec: float, limit: int = 20,
                  run_ids: Collection[str] | None = None, channels: Collection[str] | None = None,
                  kinds: Collection[str] = ()) -> Claimed:
        """Take up to ``limit`` due pending messages, oldest first, leasing them for ``lease_sec``; with
        ``run_ids``, only the messages of those runs (a CLI command delivers what its own runs wrote); with
        ``channels`` (channel kinds: ``console``, ``slack``, ``jira``), only the messages for those kinds of
        channel (``slack:#x`` is of kind ``slack``) or of an outbox kind in ``kinds`` (``hook.event``): a
        process claims only what it can deliver.

        A run's messages to one channel are delivered in order: a message is not claimed while an earlier one
        (a lower id) of the same run and channel is still pending, whether it waits for its retry or another
        process is sending it (a dead one holds nothing back). So an update never overtakes the post it
        updates (a post whose answer was lost is found and adopted by its retry first), and a batch holds at
        most one message per run and channel: the deliverer claims again after sending when the batch says
        some are ``held_back``. (Messages without a run are ordered per channel alike.)"""
        return self.claim_due_later(now=now, lease_sec=lease_sec, limit=limit, run_ids=run_ids, channels=channels,
                                    kinds=kinds).get()

    def claim_due_later(self, *, now: datetime, lease_sec: float, limit: int = 20,
                        run_ids: Collection[str] | None = None, channels: Collection[str] | None = None,
                        kinds: Collection[str] = ()) -> fast.Later[Claimed]:
        """``claim_due``, its answer read when asked. On PostgreSQL one statement, through ``store.fast``:
        inside ``Tx.pipeline(commit=True)`` the transaction's BEGIN, the claim and COMMIT go in one round trip
        (four through SQLAlchemy's ``Connection``: BEGIN, the pick, the lease, COMMIT). On SQLite the pick,
        then the lease, at once."""
        if self.dialect.postgresql:
            stmt = _claim_due_pg(run_ids is not None, None if channels is None else tuple(sorted(channels)),
                                 tuple(sorted(kinds)), limit)
            params: dict[str, Any] = {"now": now, "until": now + timedelta(seconds=lease_sec)}
            if run_ids is not None:
                params["run_ids"] = list(run_ids)
            res = fast.execute(self.conn, stmt, params)

            def read() -> Claimed:
                rows = res.rows()
                queued = [row.pop("queued") for row in rows]
                return _claimed(zip((OutboxMessage.model_validate(row) for row in rows), queued))

            return fast.Later(read)
        claimed = self._claim_due_now(now=now, lease_sec=lease_sec, limit=limit, run_ids=run_ids,
                                      channels=channels, kinds=kinds)
        return fast.Later(lambda: claimed)

    def _claim_due_now(self, *, now: datetime, lease_sec: float, limit: int, run_ids: Collection[str] | None,
                       channels: Collection[str] | None, kinds: Collection[str]) -> Claimed:
        runs_in = _PENDING.c.run_id.in_(list(run_ids)) if run_ids is not None else None
        pick = self.dialect.lock(_pick(now, limit, channels, kinds, runs_in), skip_locked=True, of=outbox)
        queued = {r.id: r.queued for r in self.conn.execute(pick)}
        if not queued:
            return Claimed()
        rows = self.conn.execute(update(outbox).where(
            outbox.c.id.in_(list(queued)) & (outbox.c.status == OutboxStatus.PENDING.value)
            & (outbox.c.next_attempt_at <= now)
        ).values(next_attempt_at=now + timedelta(seconds=lease_sec), attempts=outbox.c.attempts + 1)
            .returning(*outbox.c)).all()
        return _claimed((_message(r), queued[r.id]) for r in rows)

    def due_elsewhere(self, *, now: datetime, channels: Collection[str], kinds: Collection[str] = (),
                      run_ids: Collection[str] | None = None, after_id: int = 0, since: datetime | None = None,
                      limit: int = 50) -> list[OutboxMessage]:
        """Up to ``limit`` due pending messages, oldest first, that ``claim_due(channels=channels, kinds=kinds)``
        leaves alone (for channels this process does not have): only those of ``run_ids`` (when given), with
        an id above ``after_id``, created at or after ``since``. Read only: nothing is claimed or changed."""
        due = ((outbox.c.status == OutboxStatus.PENDING.value) & (outbox.c.next_attempt_at <= now)
               & ~_deliverable(channels, kinds) & (outbox.c.id > after_id))
        if since is not None:
            due &= outbox.c.created_at >= since
        if run_ids is not None:
            due &= outbox.c.run_id.in_(list(run_ids))
        return [_message(r) for r in self.conn.execute(select(outbox).where(due).order_by(outbox.c.id).limit(limit))]

    def mark_sent(self, message_id: int, *, now: datetime) -> None:
        """Record that message ``message_id`` was delivered at ``now`` (nothing read back: inside
        ``Tx.pipeline`` it costs no round trip of its own)."""
        fast.execute(self.conn, _MARK_SENT, {"message_id": message_id, "sent_at": now})

    def mark_failed(self, message_id: int, *, error: str, retry_at: datetime | None) -> None:
        """Record a failed attempt: due again at ``retry_at``, or ``dead`` when None (given up)."""
        values: dict[str, Any] = {"last_error": error[:2000]}
        if retry_at is None:
            values["status"] = OutboxStatus.DEAD.value
        else:
            values["next_attempt_at"] = retry_at
        self.conn.execute(update(outbox).where(outbox.c.id == message_id).values(**values))

    def later_notice(self, message: OutboxMessage) -> OutboxMessage | None:
        """The newest reminder or escalation of ``message``'s request (``request_id``) queued on its channel after
        it (a higher id) and still pending (waiting behind it: a run's messages to one channel go in order), or
        None. Reads the pending rows only (the status index's ``pending`` range: the backlog)."""
        o = outbox.c
        row = self.conn.execute(select(outbox).where(
            (o.status == OutboxStatus.PENDING.value) & (o.request_id == message.request_id)
            & (o.channel == message.channel) & (o.id > message.id)
            & o.kind.in_([OutboxKind.REMINDER.value, OutboxKind.ESCALATION.value])
        ).order_by(o.id.desc()).limit(1)).first()
        return _message(row) if row else None

    def supersede(self, *, request_id: int, channel: str, kinds: Collection[OutboxKind | str], reason: str,
                  before_id: int | None = None) -> list[int]:
        """Mark the pending messages of request ``request_id`` on ``channel`` of outbox kinds ``kinds`` (with
        ``before_id``: only those with a lower id) ``superseded``, with ``reason`` in their ``last_error``: they
        are never sent. Returns their ids, ascending."""
        o = outbox.c
        cond = ((o.status == OutboxStatus.PENDING.value) & (o.request_id == request_id) & (o.channel == channel)
                & o.kind.in_([OutboxKind(k).value for k in kinds]))
        if before_id is not None:
            cond &= o.id < before_id
        rows = self.conn.execute(update(outbox).where(cond).values(
            status=OutboxStatus.SUPERSEDED.value, last_error=reason[:2000]).returning(o.id)).all()
        return sorted(r.id for r in rows)

    def get(self, message_id: int) -> OutboxMessage | None:
        row = self.conn.execute(select(outbox).where(outbox.c.id == message_id)).first()
        return _message(row) if row else None

    def list(self, *, status: str | None = None, run_id: str | None = None, limit: int = 100) -> list[OutboxMessage]:
        stmt = select(outbox)
        if status:
            stmt = stmt.where(outbox.c.status == status)
        if run_id:
            stmt = stmt.where(outbox.c.run_id == run_id)
        return [_message(r) for r in self.conn.execute(stmt.order_by(outbox.c.id.desc()).limit(limit))]

    def backlog(self) -> dict[str, int]:
        rows = self.conn.execute(select(outbox.c.status, func.count()).group_by(outbox.c.status))
        return {status: n for status, n in rows}

    def retry_dead(self, *, now: datetime, message_id: int | None = None) -> int:
        cond = outbox.c.status == OutboxStatus.DEAD.value
        if message_id is not None:
            cond &= outbox.c.id == message_id
        res = self.conn.execute(update(outbox).where(cond).values(
            status=OutboxStatus.PENDING.value, next_attempt_at=now, attempts=0))
        return res.rowcount
