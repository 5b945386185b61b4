"""The queries of "waiting on me" (``bot.engine.views.Views.waiting_on``): where pending steering requests wait,
and the pending requests of chosen places, oldest first; their cost follows the places and the rows returned,
not the number of pending requests.

A PLACE is what decides who may decide a request there: ``(workflow, workflow_version, point, point_key,
channel)`` of the request (its run's workflow and version; ``point_key``: '' for a native workflow's point,
whose definition is the registered one, a digest of the permission settings of a point asked at run time
(``bot.engine.permissions.permission_key``), ``UNKNOWN_KEY`` for requests older than migration 0006). Both
queries read the index ``ix_hazel_steering_requests_status_place`` (``status``, those five columns, then
``created_at, id``).

- ``places``: a loose index scan (skip scan). The first statement reads the first pending entry of the index;
  each next one seeks the first entry after the previous place: ``(workflow, …, channel) > (:previous…)``
  spelled as five branches of one ``UNION ALL``, branch ``j`` equal to the previous place on its first ``j``
  columns and greater on the next (``channel > :c`` with the other four equal, …, ``workflow > :w``), each
  ``ORDER BY`` the index's columns ``LIMIT 1``, and the least of their (at most five) rows: five index descents
  per place, however many requests wait there. Not the row value comparison itself: SQLite (3.40) seeks
  ``(workflow, …, channel) > (?, …)`` only on its first column and then reads every entry of the previous place
  (17 ms for 40,000 requests waiting at one place, 0.2 ms with 400). Plans: SQLite ``SEARCH n USING COVERING
  INDEX ix_hazel_steering_requests_status_place (status=? AND workflow=? AND … AND channel>?)`` per branch,
  its temporary B-tree sorting at most five rows; PostgreSQL ``Limit`` over ``Index Only Scan using
  ix_hazel_steering_requests_status_place`` per branch under an ``Append`` and a ``Sort`` of five rows. The
  steps are separate statements with the previous place bound, not one recursive CTE (SQLite seeks only
  parameters, not the CTE's row, as index keys). The oldest pending request of each place comes with it
  (``created_at, id`` follow in the index); they and their runs are then read by primary key in one
  statement.
- ``pending_at``: per place one index range, ``status = 'pending' AND workflow = … AND … AND channel = …`` and
  ``(created_at, id) > after``, read in index order for its first ``limit`` rows (``Limit`` over an index
  scan, no sort), merged by ``UNION ALL`` and ordered again: the same rows and order as one ``ORDER BY
  created_at, id`` over the pending requests of those places, without reading or sorting the rest. Plans:
  SQLite ``SEARCH … USING COVERING INDEX ix_hazel_steering_requests_status_place (status=? AND workflow=? AND
  … AND channel=? AND created_at>?)`` per branch, its temporary B-trees sorting the merged branches (at most
  ``places × limit`` rows) and the page (``limit``); PostgreSQL ``Merge Append`` of ``Limit`` over ``Index
  Only Scan using ix_hazel_steering_requests_status_place`` (``Index Cond`` on all six columns), a ``Sort``
  of the page only. Then each request and its run by primary key. A place read for
  escalated requests only filters ``escalated_at IS NOT NULL`` on its range (rows read: up to the
  ``limit``-th escalated one).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Integer, bindparam, select, tuple_, union_all

from store.models import RequestStatus, Run, SteeringRequest
from store.schema import runs, steering_requests

NATIVE_KEY = ""
"""``point_key`` of a request at a native workflow's point (who may decide: the registered definition)."""
UNKNOWN_KEY = "*"
"""``point_key`` of a request whose point settings are not known to be shared (before migration 0006)."""
MAX_BRANCHES = 200
"""Places per ``UNION ALL`` statement (SQLite allows 500 terms in a compound SELECT)."""

_PENDING = RequestStatus.PENDING.value
_t = steering_requests.c
_PLACE = (_t.workflow, _t.workflow_version, _t.point, _t.point_key, _t.channel)


@lru_cache(maxsize=1)
def _first_place() -> Any:
    """The first pending request of the first place (built once, on first use: a command that never reads
    "waiting on me", ``hazel runs`` among them, imports this module through the engine)."""
    return (select(_t.id, *_PLACE).where(_t.status == _PENDING)
            .order_by(_t.status, *_PLACE, _t.created_at, _t.id)
            .limit(bindparam("one", 1, type_=Integer, literal_execute=True)))


@lru_cache(maxsize=1)
def _next_place() -> Any:
    """The first pending request of the place after ``:after_…`` (see the module docstring; built once, on
    first use)."""
    after = [bindparam(f"after_{c.name}") for c in _PLACE]
    branches = []
    for j in range(len(_PLACE) - 1, -1, -1):
        same = [col == value for col, value in zip(_PLACE[:j], after[:j])]
        branches.append(_first_place().where(*same, _PLACE[j] > after[j]).subquery(f"p{j}"))
    merged = union_all(*(select(b.c.id, *(b.c[c.name] for c in _PLACE)) for b in branches)).subquery("next")
    return (select(merged.c.id, *(merged.c[c.name] for c in _PLACE))
            .order_by(*(merged.c[c.name] for c in _PLACE)).limit(1))


@dataclass(frozen=True)
class Place:
    """Where pending requests wait (see the module docstring); ``escalated_only``: read only those escalated."""

    workflow: str
    workflow_version: int
    point: str
    point_key: str
    channel: str
    escalated_only: bool = False


def _with_runs(conn: Connection, ids_query: Any, order: bool) -> list[tuple[SteeringRequest, Run, str, str, int]]:
    req_cols = [c.label(f"r_{c.name}") for c in steering_requests.c]
    stmt = (select(*req_cols, *runs.c).join(runs, runs.c.id == _t.run_id).where(_t.id.in_(ids_query)))
    if order:
        stmt = stmt.order_by(_t.created_at, _t.id)
    out = []
    for row in conn.execute(stmt):
        m = row._mapping
        request = SteeringRequest.model_validate({c.name: m[f"r_{c.name}"] for c in steering_requests.c})
        run = Run.model_validate({c.name: m[c.name] for c in runs.c})
        out.append((request, run, m["r_point_key"], m["r_workflow"], m["r_workflow_version"]))
    return out


def places(conn: Connection) -> list[tuple[Place, SteeringRequest, Run]]:
    """Every place pending requests wait at, with the oldest pending request there and its run (by place)."""
    ids = []
    row = conn.execute(_first_place()).first()
    while row is not None:
        ids.append(row[0])
        row = conn.execute(_next_place(), {f"after_{c.name}": v for c, v in zip(_PLACE, row[1:])}).first()
    if not ids:
        return []
    out = []
    for request, run, key, workflow, version in _with_runs(conn, ids, order=False):
        out.append((Place(workflow, version, request.point, key, request.channel), request, run))
    out.sort(key=lambda p: (p[0].workflow, p[0].workflow_version, p[0].point, p[0].point_key, p[0].channel))
    return out


def _branch(i: int, place: Place, after: tuple[datetime, int] | None, limit: int) -> Any:
    stmt = select(_t.id, _t.created_at).where(
        _t.status == bindparam(f"s{i}", _PENDING), _t.workflow == bindparam(f"w{i}", place.workflow),
        _t.workflow_version == bindparam(f"v{i}", place.workflow_version),
        _t.point == bindparam(f"p{i}", place.point), _t.point_key == bindparam(f"k{i}", place.point_key),
        _t.channel == bindparam(f"c{i}", place.channel))
    if place.escalated_only:
        stmt = stmt.where(_t.escalated_at.is_not(None))
    if after is not None:
        stmt = stmt.where(tuple_(_t.created_at, _t.id) > tuple_(
            bindparam("after_at", after[0], type_=_t.created_at.type), bindparam("after_id", after[1])))
    head = bindparam("head", limit, type_=Integer, literal_execute=True)
    return stmt.order_by(_t.created_at, _t.id).limit(head).subquery(f"b{i}")


def pending_at(conn: Connection, chosen: list[Place], *, after: tuple[datetime, int] | None,
               limit: int) -> list[tuple[SteeringRequest, Run]]:
    """The first ``limit`` pending requests at ``chosen`` after ``after`` (``(created_at, id)``), oldest first
    (ties by id), with their runs (see the module docstring; ``MAX_BRANCHES`` places per statement)."""
    found: list[tuple[SteeringRequest, Run]] = []
    for start in range(0, len(chosen), MAX_BRANCHES):
        branches = [_branch(i, p, after, limit) for i, p in enumerate(chosen[start:start + MAX_BRANCHES])]
        merged = union_all(*(select(b.c.id, b.c.created_at) for b in branches)).subquery("merged")
        head = bindparam("head", limit, type_=Integer, literal_execute=True)
        ids = select(merged.c.id).order_by(merged.c.created_at, merged.c.id).limit(head)
        found.extend((request, run) for request, run, *_ in _with_runs(conn, ids, order=True))
    found.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
    return found[:limit]
