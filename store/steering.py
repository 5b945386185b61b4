"""The ``hazel_steering_requests`` and ``hazel_decisions`` tables.

A request is settled by one conditional UPDATE (``WHERE status = 'pending'``); a decision row is unique per
(request, channel, person) and per (channel, delivery id). Together they make a decision happen once, however
many clicks, retries or processes race for it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from sqlalchemy import Connection, bindparam, case, func, literal_column, select, update
from sqlalchemy.exc import IntegrityError

from store import fast
from store.dialect import Dialect
from store.errors import DuplicateDecisionError
from store.models import Action, Actor, Decision, RequestStatus, Run, SteeringRequest
from store.schema import VOTES, decisions, runs, steering_requests


_INSERT_DECISION = decisions.insert().returning(decisions.c.id)
_INSERT_DECISION_AS = decisions.insert()
NEXT_DECISION_ID = func.nextval(func.pg_get_serial_sequence("hazel_decisions", "id"))
"""PostgreSQL: the id the next decision may take (its sequence's next value): ``DecisionRepo.next_id``, and
read with the run a decision locks (``RunRepo.get_for_decision_later``)."""
_NEXT_DECISION_ID = select(NEXT_DECISION_ID)
"""Built once; executed with a parameter dict (every statement on the decision path is: building a statement
costs more than the database executing it)."""

_t = steering_requests.c
_PENDING_BY_ID = (_t.id == bindparam("request_id")) & (_t.status == RequestStatus.PENDING.value)
_REACHED = _t.approvals + 1 >= _t.approvals_required
_VOTE = update(steering_requests).where(_PENDING_BY_ID).values(
    approvals=_t.approvals + 1,
    status=case((_REACHED, RequestStatus.DECIDED.value), else_=_t.status),
    decided_at=case((_REACHED, bindparam("now", type_=_t.decided_at.type)), else_=_t.decided_at),
    decided_by=case((_REACHED, bindparam("actor", type_=_t.decided_by.type)), else_=_t.decided_by),
    decided_action=case((_REACHED, Action.APPROVE.value), else_=_t.decided_action),
).returning(*steering_requests.c)
_VOTED = _VOTE.where(_t.approvals == bindparam("approvals")).cte("voted")
_VOTE_GUARDED = fast.guarded(_VOTED, select(_VOTED))
"""``_VOTE`` inside a transaction that commits with its statements (``store.fast.pipeline(commit=True)``,
PostgreSQL): it fails unless it counted the vote on the request as read (pending, with ``approvals`` votes)."""
_SETTLE = update(steering_requests).where(_PENDING_BY_ID).values(
    status=bindparam("status"), decided_at=bindparam("now", type_=_t.decided_at.type),
    decided_by=bindparam("actor"), decided_action=bindparam("action"),
).returning(*steering_requests.c)
_SETTLE_AS_READ = _SETTLE.where(_t.approvals == bindparam("approvals"))
_GET = select(steering_requests).where(_t.id == bindparam("request_id"))
_OF_RUN = _t.run_id == bindparam("run_id")
_PENDING_FOR_RUN = (select(steering_requests).where(_OF_RUN & (_t.status == RequestStatus.PENDING.value))
                    .order_by(_t.id.desc()).limit(1))
_LATEST_FOR_RUN = select(steering_requests).where(_OF_RUN).order_by(_t.id.desc()).limit(1)
_LATEST_BUT = (select(steering_requests).where(_OF_RUN & (_t.id != bindparam("exclude_id")))
               .order_by(_t.id.desc()).limit(1))
_LATEST_AT_POINT = (select(steering_requests).where(_OF_RUN & (_t.point == bindparam("point")))
                    .order_by(_t.id.desc()).limit(1))
_INSERT_REQUEST = steering_requests.insert().returning(steering_requests.c.id)
_SPARE_ID = "spare_decision_id"
_INSERT_REQUEST_SPARE = steering_requests.insert().returning(steering_requests.c.id,
                                                             NEXT_DECISION_ID.label(_SPARE_ID))
"""PostgreSQL: the request inserted, with an id for the first decision on it (``RequestRepo.insert``)."""


_FOR_REQUEST = (select(decisions).where((decisions.c.run_id == bindparam("run_id"))
                                       & (decisions.c.request_id == bindparam("request_id")))
                .order_by(decisions.c.id))


def _request(row: Any) -> SteeringRequest:
    return SteeringRequest.model_validate(dict(row._mapping))


def _decision(row: Any) -> Decision:
    return Decision.model_validate(dict(row._mapping))


class RequestRepo:
    def __init__(self, conn: Connection, dialect: Dialect,
                 opened: dict[str, tuple[SteeringRequest, int] | None] | None = None) -> None:
        self.conn = conn
        self.dialect = dialect
        self.opened = opened if opened is not None else {}
        """PostgreSQL: the request each run was asked in this transaction, as inserted, with the id its first
        decision may take (``insert``); None for a run asked more than one (``store.heads.HeadCache.pause``)."""

    def insert(self, *, run_id: str, checkpoint_seq: int, point: str, title: str, channel: str,
               approvals_required: int, now: datetime, due_at: datetime | None, workflow: str = "",
               workflow_version: int = 0, point_key: str = "*") -> int:
        """A pending request; ``workflow``/``workflow_version``: its run's, ``point_key``: see
        ``store.waiting`` (the defaults, '*': checked on its own by "waiting on me"). Returns its id.

        On PostgreSQL it also takes an id from the decisions' sequence in the same statement, for the first
        decision on it (``opened``): a decision taken in this process then needs no read of its own
        (``bot.engine.steering.decide``). Unused, it is a gap in the sequence, as a rolled-back insert leaves."""
        values = dict(run_id=run_id, checkpoint_seq=checkpoint_seq, point=point, title=title, channel=channel,
                      status=RequestStatus.PENDING.value, approvals_required=approvals_required, approvals=0,
                      created_at=now, due_at=due_at, reminders_sent=0, workflow=workflow,
                      workflow_version=workflow_version, point_key=point_key)
        if not self.dialect.postgresql:
            return int(fast.execute(self.conn, _INSERT_REQUEST, values).scalar())
        row = fast.execute(self.conn, _INSERT_REQUEST_SPARE, values).one()
        assert row is not None
        request_id = int(row["id"])
        asked = SteeringRequest(id=request_id, run_id=run_id, checkpoint_seq=checkpoint_seq, point=point,
                                title=title, channel=channel, status=RequestStatus.PENDING,
                                approvals_required=approvals_required, approvals=0, created_at=now, due_at=due_at)
        self.opened[run_id] = None if run_id in self.opened else (asked, int(row[_SPARE_ID]))
        return request_id

    def get(self, request_id: int) -> SteeringRequest | None:
        return self._one(_GET, {"request_id": request_id})

    def pending_for_run(self, run_id: str) -> SteeringRequest | None:
        """The run's pending request (the newest, should there be more), or None."""
        return self.pending_for_run_later(run_id).get()

    def pending_for_run_later(self, run_id: str) -> fast.Later[SteeringRequest | None]:
        """``pending_for_run``, its answer read when asked (``store.fast.pipeline``)."""
        return self._later(_PENDING_FOR_RUN, {"run_id": run_id})

    def get_later(self, request_id: int) -> fast.Later[SteeringRequest | None]:
        """``get``, its answer read when asked (``store.fast.pipeline``)."""
        return self._later(_GET, {"request_id": request_id})

    def latest_for_run(self, run_id: str, *, exclude_id: int | None = None) -> SteeringRequest | None:
        """The run's newest request (pending or not), other than ``exclude_id``; None when it has none."""
        if exclude_id is None:
            return self._one(_LATEST_FOR_RUN, {"run_id": run_id})
        return self._one(_LATEST_BUT, {"run_id": run_id, "exclude_id": exclude_id})

    def latest_at_point(self, run_id: str, point: str) -> SteeringRequest | None:
        """The run's most recent request at steering point ``point`` (pending or not)."""
        return self._one(_LATEST_AT_POINT, {"run_id": run_id, "point": point})

    def _one(self, stmt: Any, params: dict[str, Any]) -> SteeringRequest | None:
        return self._later(stmt, params).get()

    def _later(self, stmt: Any, params: dict[str, Any]) -> fast.Later[SteeringRequest | None]:
        res = fast.execute(self.conn, stmt, params)

        def read() -> SteeringRequest | None:
            row = res.one()
            return SteeringRequest.model_validate(row) if row else None

        return fast.Later(read)

    def for_run(self, run_id: str) -> list[SteeringRequest]:
        rows = self.conn.execute(select(steering_requests).where(steering_requests.c.run_id == run_id)
                                 .order_by(steering_requests.c.id))
        return [_request(r) for r in rows]

    def pending(self, *, run_ids: Iterable[str] | None = None, limit: int = 500) -> list[SteeringRequest]:
        """Pending requests, oldest first (ties by id): the first ``limit`` of all of them (the index of
        pending requests by creation time), or of those of ``run_ids`` (read by run, ordered here: asked to
        order them, the planner would rather walk every pending request in order looking for these runs)."""
        from store.listing import literal_limit

        t = steering_requests.c
        stmt = select(steering_requests).where(t.status == RequestStatus.PENDING.value)
        if run_ids is None:
            rows = self.conn.execute(stmt.order_by(t.created_at, t.id).limit(literal_limit(limit)))
            return [_request(r) for r in rows]
        found = [_request(r) for r in self.conn.execute(stmt.where(t.run_id.in_(list(run_ids))))]
        found.sort(key=lambda r: (r.created_at, r.id))
        return found[:limit]

    def vote_later(self, request: SteeringRequest, *, now: datetime, actor: str
                   ) -> tuple[SteeringRequest, fast.Later[SteeringRequest | None]]:
        """Count one approval; settle the request as approved when it reaches its quorum. Sent without waiting
        for its answer (``store.fast.pipeline``: it travels with the writes that follow it, one PostgreSQL
        round trip fewer per approval), with the request as the vote leaves it, predicted from ``request`` as
        read. The prediction holds while nothing else can change the request in between: the caller holds the
        lock every writer of a request takes first (its run's row, ``FOR UPDATE``; on SQLite the write lock),
        and checks the answer (``Later``: the request after the vote, None if it was no longer pending) before
        committing; in a transaction that commits with its statements (``conn.guarding``) the database checks
        it: the vote fails unless the request is still pending with the approvals read."""
        if getattr(self.conn, "guarding", False):
            answer = self._later(_VOTE_GUARDED, {"request_id": request.id, "now": now, "actor": actor,
                                                 "approvals": request.approvals})
        else:
            answer = self._later(_VOTE, {"request_id": request.id, "now": now, "actor": actor})
        if not self.dialect.postgresql:  # no round trip to spare: read at once (a RETURNING statement left
            answer.get()  # unread while the decision's other writes ran cost a SQLite resume ~0.15 ms)
        reached = request.approvals + 1 >= request.approvals_required
        after = request.model_copy(update={"approvals": request.approvals + 1, **(
            {"status": RequestStatus.DECIDED, "decided_at": now, "decided_by": actor,
             "decided_action": Action.APPROVE.value} if reached else {})})
        return after, answer

    def settle(self, request_id: int, *, now: datetime, actor: str, action: str,
               status: RequestStatus = RequestStatus.DECIDED, approvals: int | None = None) -> SteeringRequest | None:
        """Settle a pending request with one decision; None if it was no longer pending (someone else won), or,
        with ``approvals``, if it no longer had that many approvals (a vote was counted since it was read)."""
        params = {"request_id": request_id, "now": now, "actor": actor, "action": action, "status": status.value}
        if approvals is not None:
            row = fast.execute(self.conn, _SETTLE_AS_READ, {**params, "approvals": approvals}).one()
        else:
            row = fast.execute(self.conn, _SETTLE, params).one()
        return SteeringRequest.model_validate(row) if row else None

    def set_message_ref(self, request_id: int, ref: dict[str, Any]) -> None:
        """Store where the channel posted the request; ``ref["key"]`` (if any) becomes its ``message_key``.
        The ``copies`` already recorded (``add_message_copies``: a reminder or escalation delivered before the
        request's own message) are kept."""
        key = ref.get("key")
        before = self._locked_ref(request_id)
        if before.get("copies") and "copies" not in ref:
            ref = {**ref, "copies": before["copies"]}
        self.conn.execute(update(steering_requests).where(steering_requests.c.id == request_id)
                          .values(message_ref=ref, message_key=str(key) if key is not None else None))

    def forget_message(self, request_id: int, key: str) -> bool:
        """Clear where the channel posted the pending request ``request_id`` (``message_ref`` and
        ``message_key``), when it is still posted under ``key`` and still pending: its message is gone (a Jira
        issue deleted), and a channel posts it anew. One conditional UPDATE; False when nothing matched
        (settled, or forgotten already: a second delivery of the same news)."""
        done = self.conn.execute(
            update(steering_requests)
            .where(steering_requests.c.id == request_id, steering_requests.c.message_key == key,
                   steering_requests.c.status == RequestStatus.PENDING.value)
            .values(message_ref=None, message_key=None))
        return done.rowcount == 1

    def add_message_copies(self, request_id: int, copies: list[dict[str, Any]]) -> SteeringRequest | None:
        """Record more messages that show the request with its buttons (a reminder's or an escalation's, posted
        after the request itself) in ``message_ref["copies"]``, so that the update after a decision reaches them
        too. Each copy is a dict with at least ``channel`` and ``ts`` (the channel's own ids, e.g. Slack's) and
        ``via`` (the Hazel channel string it was delivered through, e.g. ``slack:C0123``); a copy already
        recorded (same ``channel`` and ``ts``) is not added twice. The row is locked (PostgreSQL ``FOR UPDATE``)
        so that concurrent deliveries do not lose each other's copies; ``message_key`` is left as it is.

        Returns:
            The request as it is now (its status tells whether it settled meanwhile), or None if it is gone.
        """
        ref = dict(self._locked_ref(request_id))
        known = list(ref.get("copies") or [])
        seen = {(c.get("channel"), c.get("ts")) for c in known}
        for copy in copies:
            if (copy.get("channel"), copy.get("ts")) not in seen:
                known.append(dict(copy))
                seen.add((copy.get("channel"), copy.get("ts")))
        ref["copies"] = known
        self.conn.execute(update(steering_requests).where(steering_requests.c.id == request_id)
                          .values(message_ref=ref))
        return self.get(request_id)

    def _locked_ref(self, request_id: int) -> dict[str, Any]:
        """The request's ``message_ref`` (``{}`` when none), its row locked until the transaction ends."""
        stmt = self.dialect.lock(select(steering_requests.c.message_ref).where(steering_requests.c.id == request_id))
        row = self.conn.execute(stmt).first()
        ref = row.message_ref if row is not None else None
        return ref if isinstance(ref, dict) else {}

    def by_message_key(self, key: str, *, asked_by: datetime | None = None) -> SteeringRequest | None:
        """The latest request the channel posted under ``key``; with ``asked_by`` (UTC), the latest one asked
        at or before it (the one a message of that time answered), else the first one posted under ``key``
        (a clock a little behind Hazel's)."""
        where = steering_requests.c.message_key == key
        if asked_by is not None:
            row = self.conn.execute(select(steering_requests).where(where, steering_requests.c.created_at <= asked_by)
                                    .order_by(steering_requests.c.id.desc()).limit(1)).first()
            if row is None:
                row = self.conn.execute(select(steering_requests).where(where)
                                        .order_by(steering_requests.c.id).limit(1)).first()
            return _request(row) if row else None
        row = self.conn.execute(select(steering_requests).where(where)
                                .order_by(steering_requests.c.id.desc()).limit(1)).first()
        return _request(row) if row else None

    def repoint(self, request_id: int, checkpoint_seq: int) -> None:
        """Move a pending request onto another checkpoint of its run (after a state migration), on its run's
        workflow version as the run now has it (call it after the run's update)."""
        version = select(runs.c.workflow_version).where(runs.c.id == steering_requests.c.run_id).scalar_subquery()
        self.conn.execute(update(steering_requests).where(steering_requests.c.id == request_id)
                          .values(checkpoint_seq=checkpoint_seq, workflow_version=version))

    def pending_places(self) -> list[tuple[Any, SteeringRequest, Run]]:
        """Every distinct place pending requests wait at (``store.waiting.places``): each ``Place`` with the
        oldest pending request there and its run."""
        from store.waiting import places

        return places(self.conn)

    def pending_at(self, places: list[Any], *, after: tuple[datetime, int] | None,
                   limit: int) -> list[tuple[SteeringRequest, Run]]:
        """Pending requests with their runs at ``places`` (``store.waiting.Place``), oldest first (ties by
        id), after ``after`` (``(created_at, id)`` of the last one read), at most ``limit``."""
        from store.waiting import pending_at

        return pending_at(self.conn, places, after=after, limit=limit)



def duplicate_decision(exc: IntegrityError) -> DuplicateDecisionError | None:
    """``exc`` as a ``DuplicateDecisionError`` when it broke a unique key of ``hazel_decisions``, else None."""
    text_ = str(exc.orig)
    if "hazel_decisions" not in text_:
        return None
    # SQLite names the columns ("…hazel_decisions.delivery_id"), PostgreSQL the constraint
    # ("uq_hazel_decisions_channel_delivery_id"): both mention delivery_id only for that key.
    error = DuplicateDecisionError(text_, by_delivery="delivery_id" in text_)
    error.__cause__ = exc
    return error


class DecisionRepo:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def next_id(self) -> fast.Later[int | None]:
        """PostgreSQL: the id the next decision may take (``nextval`` of its sequence), so that ``insert`` need
        not wait for its RETURNING inside a pipeline; None on SQLite (the insert answers at once, in process)."""
        if self.conn.dialect.name != "postgresql":
            return fast.Later(lambda: None)
        res = fast.execute(self.conn, _NEXT_DECISION_ID, {})
        return fast.Later(lambda: int(res.scalar()))

    def insert(self, *, run_id: str, request_id: int | None, action: Action, actor: Actor,
               payload: dict[str, Any], now: datetime, delivery_id: str | None = None,
               decision_id: int | None = None) -> int:
        """Record a decision by ``actor`` (its identity, and its person: one decision per person per request),
        as ``decision_id`` when given (from ``next_id``: then nothing is read back), else the next id.

        Raises:
            DuplicateDecisionError: this person already decided this request, or ``delivery_id`` was seen
                before on this channel (``by_delivery`` tells which, from the unique constraint named in the
                database's error). The transaction is then unusable on PostgreSQL: let it roll back.
        """
        values = dict(run_id=run_id, request_id=request_id, action=action.value, actor_id=actor.id,
                      actor_name=actor.name, channel=actor.channel, payload=payload, created_at=now,
                      delivery_id=delivery_id, person=actor.who, acting_for=actor.acting_for)
        try:
            if decision_id is not None:  # in a pipeline its unique keys are checked when the pipeline ends
                fast.execute(self.conn, _INSERT_DECISION_AS, {**values, "id": decision_id})
                return decision_id
            res = fast.execute(self.conn, _INSERT_DECISION, values)
            return int(res.scalar())
        except IntegrityError as exc:
            raise duplicate_decision(exc) or exc

    def get(self, decision_id: int) -> Decision | None:
        row = self.conn.execute(select(decisions).where(decisions.c.id == decision_id)).first()
        return _decision(row) if row else None

    def by_delivery(self, channel: str, delivery_id: str) -> Decision | None:
        row = self.conn.execute(select(decisions).where(
            (decisions.c.channel == channel) & (decisions.c.delivery_id == delivery_id))).first()
        return _decision(row) if row else None

    def for_request(self, request_id: int, run_id: str) -> list[Decision]:
        """The decisions on request ``request_id`` of run ``run_id`` (rewinds from it included), oldest first:
        read among the run's decisions (``ix_hazel_decisions_run_id``)."""
        return self.for_request_later(request_id, run_id).get()

    def for_request_later(self, request_id: int, run_id: str) -> fast.Later[list[Decision]]:
        """``for_request``, its answer read when asked (``store.fast.pipeline``)."""
        res = fast.execute(self.conn, _FOR_REQUEST, {"request_id": request_id, "run_id": run_id})
        return fast.Later(lambda: [Decision.model_validate(row) for row in res.rows()])

    def by_person(self, request_id: int, person: str) -> Decision | None:
        """This person's vote on the request (whatever identity they used; a rewind is no vote), if any: on the
        partial unique index of votes (``uq_hazel_decisions_request_id_person``), whose condition it states."""
        row = self.conn.execute(select(decisions).where(
            (decisions.c.request_id == request_id) & (decisions.c.person == person)
            & literal_column(VOTES))).first()
        return _decision(row) if row else None

    def for_run(self, run_id: str) -> list[Decision]:
        rows = self.conn.execute(select(decisions).where(decisions.c.run_id == run_id).order_by(decisions.c.id))
        return [_decision(r) for r in rows]

    def newest_id(self, run_id: str) -> int:
        """The id of the run's newest decision (0: none), through ``ix`` on ``run_id``."""
        from sqlalchemy import func

        return self.conn.execute(select(func.max(decisions.c.id)).where(decisions.c.run_id == run_id)
                                 ).scalar_one() or 0
