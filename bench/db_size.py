"""Database size: what the operations a person or a scrape triggers cost on a small and on a big database.

Two databases of the same shape are built side by side: ``small_runs`` and ``big_runs`` runs of ``bench-size``
(three steps, a steering point with an approver, fifteen more steps), 40 % waiting at the steering point, 50 %
completed (20 checkpoints each) and 10 % failed at their third step. One run of each kind is executed through
Hazel; its rows (run, checkpoints, steering request, decision, audit events, delivered outbox rows) are then
copied under new run ids by ``INSERT … SELECT`` over a generated sequence (a recursive CTE on SQLite,
``generate_series`` on PostgreSQL), every timestamp of a copy shifted so that the copies of each kind start
evenly spread over the last 60 days (the busier database has more runs in the same period, in the same mix),
in the order they started (as runs are created), so the database holds exactly the rows real runs leave
behind, in seconds instead of minutes. ``prune_reps`` batches of ``prune_runs`` completed copies ended 100,
99, 98, … days ago, for ``prune_per_run``. PostgreSQL is ``VACUUM ANALYZE``d after the build (what autovacuum
does soon after a bulk load; see ``_settle``); SQLite is left as Hazel leaves it (no statistics).

Then each operation is timed through the engine's boundary on both databases, one call on each right after
the other (after two uncounted calls; at least ``samples`` pairs, more while they take less than
``budget_sec``), and ``db_size`` returns per operation the median of the ratios big ÷ small of those pairs
(``runs_list``, …) and the medians themselves (``runs_list_small_ms``, ``runs_list_big_ms``, …):

- ``runs_list``: ``hazel runs`` (``Hazel.runs(limit=50)`` and the pending requests of those runs);
  ``runs_status``: the same with ``--status waiting``; ``runs_statuses``: ``--status completed --status
  failed``; ``runs_workflow``: ``--workflow bench-size``; ``runs_versions``: ``hazel runs --version``.
- ``api_runs``: ``GET /api/runs``; ``api_run``: ``GET /api/runs/{id}`` of a waiting run, both through the
  FastAPI app ``hazel serve`` runs (``create_app`` + ``api_router``, a bearer token), in process (Starlette's
  ``TestClient``).
- ``show``: ``hazel show RUN`` (``resolve``, ``get``, ``pending_request``, ``state_tree_at``) of a waiting
  run; ``prefix``: ``resolve`` of the first 8 characters of a run id.
- ``metrics``: ``HazelMetrics(hazel).exposition()``, the body of ``GET /metrics``.
- ``waiting_on``: App Home's "waiting on you" (``Hazel.waiting_on(actor=…)``, 50 requests).
- ``prune_per_run``: ``bot.ops.retention.prune`` of one batch (the runs of the batches before it are already
  compacted), per run compacted.
"""

from __future__ import annotations

import gc
import logging
import secrets
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterable, Iterator

from pydantic import BaseModel
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bot.engine.workflow import StepContext, Workflow
from bot.ops.retention import prune
from store import Store
from store.models import Approvers
from store.schema import checkpoints, decisions, events, outbox, runs, steering_requests

from bench import databases
from bench.workload import ACTOR, make_engine, settings_for

SIZE_WORKFLOW = "bench-size"
API_TOKEN = "bench-db-size-token"
SPAN_DAYS = 60
"""Copies start at times spread over this many days before the build."""
PRUNE_AGE_DAYS = 100
"""Prune batch ``r`` ended ``PRUNE_AGE_DAYS - r`` days ago (plus up to 6 hours)."""
_DAY_US = 86_400 * 1_000_000
_MASK48 = (1 << 48) - 1
WAITING, COMPLETED, FAILED = 0.4, 0.5, 0.1
BATCH_RUNS = 250
"""Copies per transaction of the build."""


class SizeState(BaseModel):
    fail: bool = False
    notes: list[str] = []


def _step(i: int):  # noqa: ANN202
    def step(state: SizeState, ctx: StepContext) -> dict:
        if state.fail and i == 2:
            raise RuntimeError("bench failure")
        return {"notes": [*state.notes, f"note {i}: " + "x" * 40]}

    return step


def size_workflow() -> Workflow:
    """``bench-size``: steps ``a0``..``a2``, the steering point ``review`` (approve, approver ``bench``: the
    bench actor, so that the request waits on it), steps ``b3``..``b17``. Input ``{"fail": true}`` fails ``a2``."""
    wf = Workflow(SIZE_WORKFLOW, version=1, state=SizeState)
    for i in range(3):
        wf.step(_step(i), name=f"a{i}", max_attempts=1)
    wf.steer("review", title="Bench review", actions=["approve"], approvers=Approvers(users=[ACTOR.id]))
    for i in range(3, 18):
        wf.step(_step(i), name=f"b{i}", max_attempts=1)
    return wf


# -- building -------------------------------------------------------------------------------------------------


@dataclass
class Built:
    """A database built by ``build``: ``now`` is the time its copies are placed against; ``waiting``: some
    waiting run ids; ``prune_runs``: runs per prune batch; ``build_sec``: how long the build took."""

    url: str
    n_runs: int
    now: datetime
    waiting: list[str] = field(default_factory=list)
    prune_runs: int = 0
    prune_reps: int = 0
    build_sec: float = 0.0


def _split(n_runs: int) -> tuple[int, int, int]:
    n_waiting = max(1, round(n_runs * WAITING))
    n_completed = max(1, round(n_runs * COMPLETED))
    return n_waiting, n_completed, max(1, n_runs - n_waiting - n_completed)


class _Sql:
    """The dialect-specific SQL of the copies."""

    def __init__(self, postgresql: bool) -> None:
        self.pg = postgresql

    def with_clause(self) -> str:
        """``WITH`` a CTE ``seq(i)``: 0 .. :n - 1."""
        if self.pg:
            return "WITH seq AS (SELECT i::bigint AS i FROM generate_series(0, :n - 1) AS g(i))"
        return "WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < :n)"

    def run_id(self) -> str:
        return "lpad(to_hex(c.k), 12, '0')" if self.pg else "printf('%012x', c.k)"

    def shifted(self, column: str, shift: str) -> str:
        """``column`` (a stored UTC timestamp, or NULL) moved by ``shift`` microseconds."""
        if self.pg:
            return f"({column} + ({shift}) * interval '1 microsecond')"
        us = (f"(CAST(strftime('%s', substr({column}, 1, 19)) AS INTEGER) * 1000000 "
              f"+ CAST(substr({column}, 21, 6) AS INTEGER) + ({shift}))")
        return (f"(CASE WHEN {column} IS NULL THEN NULL ELSE strftime('%Y-%m-%d %H:%M:%S', {us} / 1000000, "
                f"'unixepoch') || printf('.%06d', {us} % 1000000) END)")


def _epoch_us(value: datetime) -> int:
    return (value - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


_TEMPLATES_LOCK = threading.Lock()


def build(url: str, n_runs: int, *, prune_runs: int, prune_reps: int) -> Built:
    """Fill the empty, migrated database at ``url`` with ``n_runs`` runs (see the module docstring)."""
    started = time.perf_counter()
    hazel = make_engine(url, size_workflow())
    templates = {}
    runner_log = logging.getLogger("hazel.runner")
    with _TEMPLATES_LOCK:  # builds run in threads (built_all): one at a time sets and restores the log level
        for kind, payload in (("waiting", {}), ("completed", {}), ("failed", {"fail": True})):
            run = hazel.start(workflow=SIZE_WORKFLOW, input=payload, actor=ACTOR)
            level = runner_log.level
            runner_log.setLevel(logging.ERROR)  # the failure is the point, not news
            try:
                hazel.drive(run_id=run.id)
            finally:
                runner_log.setLevel(level)
            if kind == "completed":
                hazel.decide(run_id=run.id, action="approve", actor=ACTOR)
                hazel.drive(run_id=run.id)
            templates[kind] = run.id
    n_waiting, n_completed, n_failed = _split(n_runs)
    now = hazel.clock()
    sql = _Sql(hazel.store.dialect == "postgresql")
    m = int(0.6180339887498949 * 2 ** (62 - max(n_runs, 2).bit_length())) | 1
    common = {"m": m, "mask": _MASK48, "now_us": _epoch_us(now), "batch": max(prune_runs, 1),
              "span": SPAN_DAYS * _DAY_US, "day": _DAY_US, "quarter": _DAY_US // 4, "prune_age": PRUNE_AGE_DAYS}
    with hazel.store.transaction() as tx:
        conn = tx.conn
        # the notifications were delivered (as they would be long before anyone lists runs)
        conn.execute(text("UPDATE hazel_outbox SET status = 'sent', sent_at = created_at"))
        kinds, offset = [], 0
        bases = {"hazel_steering_requests": _next_id(conn, "hazel_steering_requests"),
                 "hazel_decisions": _next_id(conn, "hazel_decisions")}
        for name, count in (("waiting", n_waiting), ("completed", n_completed), ("failed", n_failed)):
            template, copies = templates[name], max(count - 1, 0)
            requests, votes = _ids_of(conn, "hazel_steering_requests", template), _ids_of(conn, "hazel_decisions",
                                                                                         template)
            kinds.append(_Kind(template, copies, offset, prune_runs * prune_reps if name == "completed" else 0,
                               _created_us(conn, template), tuple(requests), tuple(votes),
                               bases["hazel_steering_requests"], bases["hazel_decisions"]))
            bases["hazel_steering_requests"] += copies * len(requests)
            bases["hazel_decisions"] += copies * len(votes)
            offset += copies
    # In time slices of about BATCH_RUNS runs, one transaction each, as runs are created: in the order they
    # started, a few at a time (PostgreSQL keeps every version of a counter row a transaction updates until it
    # ends: one transaction for all of them would cost their square and leave the counter tables bloated).
    slices = max(1, -(-offset // BATCH_RUNS))
    for b in range(slices):
        ranges = [(k.copies * b // slices, k.copies * (b + 1) // slices) for k in kinds]
        with hazel.store.transaction() as tx:
            _copy_runs(tx.conn, sql, kinds, ranges, common)
            for kind, (lo, hi) in zip(kinds, ranges):
                if hi > lo:
                    _copy_children(tx.conn, sql, kind, lo, hi, common)
    if sql.pg:
        with hazel.store.transaction() as tx:
            for table in ("hazel_steering_requests", "hazel_decisions"):
                tx.conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                     f"(SELECT max(id) FROM {table}))"))
    with hazel.store.read() as tx:  # waiting runs from all over the period (ids are random)
        waiting = list(tx.conn.execute(text("SELECT id FROM hazel_runs WHERE status = 'waiting' ORDER BY id "
                                            "LIMIT 64")).scalars())
    hazel.close()
    _settle(url)
    return Built(url, n_runs, now, waiting=waiting, prune_runs=prune_runs, prune_reps=prune_reps,
                 build_sec=time.perf_counter() - started)


@dataclass(frozen=True)
class _Kind:
    """The copies of one template run: ``copies`` of them, the ``offset``-th copy of the build onward (their ids
    and times come from their number in the build); the first ``old`` are the prune batches. ``requests`` and
    ``votes``: the template's steering request and decision ids, copied under ids from ``request_base`` and
    ``vote_base`` on."""

    template: str
    copies: int
    offset: int
    old: int
    created_us: int
    requests: tuple[int, ...]
    votes: tuple[int, ...]
    request_base: int
    vote_base: int


_AGED = ("c AS (SELECT c0.*, CASE WHEN c0.i < c0.old THEN (:prune_age - c0.i / :batch) * :day + c0.k % :quarter "
         "ELSE :span - ((c0.i - c0.old) * 2 + 1) * :span / (2 * (c0.cnt - c0.old)) END AS age FROM c0)")
"""The copies ``c0`` (``cnt`` of their kind) with ``age``: how many microseconds ago copy ``i`` of its kind
started: evenly spread over ``SPAN_DAYS`` (every kind alike, so that any period holds the same mix of kinds
on both databases), or in its prune batch."""
_TIMES = {"created_at", "updated_at", "wake_at", "lease_expires_at", "due_at", "decided_at", "escalated_at",
          "next_action_at", "next_attempt_at", "sent_at"}


def _created_us(conn, run_id: str) -> int:  # noqa: ANN001
    created = conn.execute(text("SELECT created_at FROM hazel_runs WHERE id = :id"), {"id": run_id}).scalar_one()
    if isinstance(created, str):  # SQLite: text as stored
        created = datetime.fromisoformat(created).replace(tzinfo=timezone.utc)
    return _epoch_us(created)


def _ids_of(conn, table: str, run_id: str) -> list[int]:  # noqa: ANN001
    return list(conn.execute(text(f"SELECT id FROM {table} WHERE run_id = :id ORDER BY id"), {"id": run_id})
                .scalars())


def _next_id(conn, table: str) -> int:  # noqa: ANN001
    return int(conn.execute(text(f"SELECT COALESCE(max(id), 0) + 1 FROM {table}")).scalar_one())


def _insert(conn, sql: _Sql, table, copies_cte: str, overrides: dict[str, str], source: str,  # noqa: ANN001
            where: str, order: str, params: dict, *, omit: tuple[str, ...] = ()) -> None:
    """``INSERT INTO table SELECT …`` the rows of ``source`` (alias ``t``) for every copy in ``copies_cte``
    (``c0``: ``i``, ``k``, ``old``, ``cnt``, ``tpl_us``), each timestamp shifted to the copy's start, in
    ``order``."""
    shift = "(:now_us - c.age - c.tpl_us)"
    cols = [c.name for c in table.c if c.name not in omit]
    exprs = [overrides[col] if col in overrides else sql.shifted(f"t.{col}", shift) if col in _TIMES else f"t.{col}"
             for col in cols]
    select_ = f"SELECT {', '.join(exprs)} FROM c JOIN {source} t ON {where} ORDER BY {order}"
    head = f"INSERT INTO {table.name} ({', '.join(cols)})"
    with_ = f"{sql.with_clause()}, {copies_cte}, {_AGED}"
    conn.execute(text(f"{head} {with_} {select_}" if sql.pg else f"{with_} {head} {select_}"), params)


def _copy_runs(conn, sql: _Sql, kinds: list[_Kind], ranges: list[tuple[int, int]], common: dict) -> None:  # noqa: ANN001
    """Copies ``lo`` to ``hi`` of each kind (``ranges``), of every kind in one statement, in the order they
    started."""
    total = sum(hi - lo for lo, hi in ranges)
    if total <= 0:
        return
    params = {**common, "n": total}
    bounds, case_tpl, case_us, case_old, case_i, case_g, case_cnt = [], [], [], [], [], [], []
    first = 0
    for n, (kind, (lo, hi)) in enumerate(zip(kinds, ranges)):
        first += hi - lo
        bounds.append(f"WHEN i < {first} THEN {n}")
        start = first - (hi - lo)
        case_tpl.append(f"WHEN {n} THEN :tpl{n}")
        case_us.append(f"WHEN {n} THEN {kind.created_us}")
        case_old.append(f"WHEN {n} THEN {kind.old}")
        case_i.append(f"WHEN {n} THEN s.i - {start} + {lo}")
        case_g.append(f"WHEN {n} THEN s.i - {start} + {lo + kind.offset}")
        case_cnt.append(f"WHEN {n} THEN {max(kind.copies, 1)}")
        params[f"tpl{n}"] = kind.template
    kinds_cte = (f"s AS (SELECT i, CASE {' '.join(bounds)} END AS kind FROM seq), "
                 f"c0 AS (SELECT CASE s.kind {' '.join(case_i)} END AS i, "
                 f"((CASE s.kind {' '.join(case_g)} END + 1) * :m) & :mask AS k, "
                 f"CASE s.kind {' '.join(case_tpl)} END AS tpl, CASE s.kind {' '.join(case_us)} END AS tpl_us, "
                 f"CASE s.kind {' '.join(case_old)} END AS old, CASE s.kind {' '.join(case_cnt)} END AS cnt FROM s)")
    _insert(conn, sql, runs, kinds_cte, {"id": sql.run_id()}, "hazel_runs", "t.id = c.tpl", "c.age DESC", params)


def _copy_children(conn, sql: _Sql, kind: _Kind, lo: int, hi: int, common: dict) -> None:  # noqa: ANN001
    """The rows that refer to copies ``lo`` to ``hi`` of ``kind``: checkpoints, steering requests, decisions,
    audit events and outbox rows, each table in the order the copies started."""
    params = {**common, "n": hi - lo, "tpl": kind.template}
    copies_cte = (f"c0 AS (SELECT s.i + {lo} AS i, ((s.i + {lo + kind.offset} + 1) * :m) & :mask AS k, "
                  f"{kind.old} AS old, {kind.copies} AS cnt, {kind.created_us} AS tpl_us FROM seq AS s)")

    def mapping(column: str, template_ids: tuple[int, ...], base: int) -> str:
        if not template_ids:
            return "NULL"
        whens = " ".join(f"WHEN {tid} THEN {base} + c.i * {len(template_ids)} + {rank}"
                         for rank, tid in enumerate(template_ids))
        return f"(CASE t.{column} {whens} ELSE NULL END)"

    req_map = mapping("request_id", kind.requests, kind.request_base)
    new_id = sql.run_id()

    def copy(table, overrides: dict[str, str], where: str, order: str, **kw) -> None:  # noqa: ANN001, ANN003
        _insert(conn, sql, table, copies_cte, overrides, table.name, where, f"c.age DESC, {order}", params, **kw)

    copy(checkpoints, {"run_id": new_id, "decision_id": mapping("decision_id", kind.votes, kind.vote_base)},
         "t.run_id = :tpl", "t.seq")
    for rank, tid in enumerate(kind.requests):
        copy(steering_requests, {"id": f"{kind.request_base} + c.i * {len(kind.requests)} + {rank}",
                                 "run_id": new_id}, f"t.id = {tid}", "t.id")
    for rank, tid in enumerate(kind.votes):
        copy(decisions, {"id": f"{kind.vote_base} + c.i * {len(kind.votes)} + {rank}", "run_id": new_id,
                         "request_id": req_map}, f"t.id = {tid}", "t.id")
    copy(events, {"run_id": new_id, "request_id": req_map}, "t.run_id = :tpl", "t.id", omit=("id",))
    copy(outbox, {"run_id": new_id, "request_id": req_map}, "t.run_id = :tpl", "t.id", omit=("id",))


def _settle(url: str) -> None:
    """After the bulk load: PostgreSQL gathers statistics (as autovacuum would); SQLite folds its WAL.

    On PostgreSQL the counter tables are also rewritten (``VACUUM FULL``): the copies updated each counter row
    a few hundred times per transaction, which no page holds, and left them hundreds of pages long; changed one
    run per transaction, as Hazel changes them, they stay a page or two (HOT updates: 65,000 status changes
    from two connections left ``hazel_run_counts`` at two pages, 99.99 % of its updates HOT)."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "postgresql":
                counters = [t for t in ("hazel_run_counts", "hazel_pending_counts")
                            if conn.exec_driver_sql(f"SELECT to_regclass('{t}')").scalar() is not None]
                if counters:
                    conn.exec_driver_sql(f"VACUUM FULL {', '.join(counters)}")
                conn.exec_driver_sql("VACUUM ANALYZE")
            else:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        engine.dispose()


@contextmanager
def _database(backend, tag: str) -> Iterator[str]:  # noqa: ANN001
    """A new, migrated, empty database of ``backend`` (SQLite: a file; PostgreSQL: a database created next to
    the bench's own and dropped afterwards)."""
    if backend.name == "sqlite":
        yield backend.fresh_url(tag)
        return
    name = f"{make_url(backend.url).database}_{tag}_{secrets.token_hex(2)}"
    admin = create_engine(databases.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(backend.url).set(database=name).render_as_string(hide_password=False)
    try:
        store = Store(url)
        store.upgrade()
        store.dispose()
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# -- measuring ------------------------------------------------------------------------------------------------


class _Subject:
    """One built database with the engine, the metrics and the HTTP app that measure it."""

    def __init__(self, built: Built) -> None:
        from starlette.testclient import TestClient

        from bot.inbound.api import api_router
        from bot.ops.metrics import HazelMetrics
        from bot.server.http import create_app
        from bot.settings import Settings

        self.built = built
        self.hazel = make_engine(built.url, size_workflow())
        self.metrics = HazelMetrics(self.hazel)
        settings = Settings(**{**settings_for(built.url).model_dump(), "api_token": API_TOKEN})
        self.client = TestClient(create_app(self.hazel, routers=[api_router(self.hazel, settings)]))
        self.headers = {"Authorization": f"Bearer {API_TOKEN}"}
        self._turn = 0

    def next_waiting(self) -> str:
        self._turn += 1
        return self.built.waiting[self._turn % len(self.built.waiting)]

    def close(self) -> None:
        self.client.close()
        self.hazel.close()

    # the operations (each one call of what a person or a scrape triggers)

    def runs_list(self) -> None:
        found = self.hazel.runs(limit=50)
        self.hazel.pending_requests(run_ids=[r.id for r in found])

    def runs_status(self) -> None:
        found = self.hazel.runs(statuses=["waiting"], limit=50)
        self.hazel.pending_requests(run_ids=[r.id for r in found])

    def runs_statuses(self) -> None:
        found = self.hazel.runs(statuses=["completed", "failed"], limit=50)
        self.hazel.pending_requests(run_ids=[r.id for r in found])

    def runs_workflow(self) -> None:
        found = self.hazel.runs(workflow=SIZE_WORKFLOW, limit=50)
        self.hazel.pending_requests(run_ids=[r.id for r in found])

    def runs_versions(self) -> None:
        self.hazel.count_by_version()

    def api_runs(self) -> None:
        response = self.client.get("/api/runs", headers=self.headers)
        assert response.status_code == 200, response.text

    def show(self) -> None:
        run = self.hazel.get(run_id=self.hazel.resolve(ref=self.next_waiting()))
        assert self.hazel.pending_request(run_id=run.id) is not None
        self.hazel.state_tree_at(run_id=run.id)

    def api_run(self) -> None:
        response = self.client.get(f"/api/runs/{self.next_waiting()}", headers=self.headers)
        assert response.status_code == 200 and response.json()["pending_request"], response.text

    def prefix(self) -> None:
        run_id = self.next_waiting()
        assert self.hazel.resolve(ref=run_id[:8]) == run_id

    def metrics_scrape(self) -> None:
        self.metrics.exposition()

    def waiting_on(self) -> None:
        assert self.hazel.waiting_on(actor=ACTOR)


OPERATIONS: dict[str, Callable[[_Subject], None]] = {
    "runs_list": _Subject.runs_list, "runs_status": _Subject.runs_status, "runs_statuses": _Subject.runs_statuses,
    "runs_workflow": _Subject.runs_workflow, "runs_versions": _Subject.runs_versions, "api_runs": _Subject.api_runs,
    "show": _Subject.show, "api_run": _Subject.api_run, "prefix": _Subject.prefix,
    "metrics": _Subject.metrics_scrape, "waiting_on": _Subject.waiting_on,
}


def _timed_ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1e3


def _prune_ms_per_run(subject: _Subject, rep: int) -> float:
    built = subject.built
    started = time.perf_counter()
    report = prune(subject.hazel.store, older_than_days=PRUNE_AGE_DAYS - rep - 0.5, now=built.now)
    elapsed = time.perf_counter() - started
    if len(report.runs) != built.prune_runs:
        raise RuntimeError(f"prune batch {rep} compacted {len(report.runs)} runs, expected {built.prune_runs}")
    return elapsed * 1e3 / built.prune_runs


@contextmanager
def built_all(backends, *, small_runs: int = 1000, big_runs: int = 100_000, prune_runs: int = 50,  # noqa: ANN001
              prune_reps: int = 5) -> Iterator[list[tuple[Built, Built] | Exception]]:
    """The two databases (``small_runs`` and ``big_runs`` runs) of every backend of ``backends``, all built at
    once (one thread each: the work is the databases', SQLite's with the GIL released), dropped when the block
    ends. Yields, per backend, ``(small, big)`` or the exception its build raised.

    Raises:
        ValueError: the sizes are out of range."""
    if not 10 <= small_runs <= big_runs:
        raise ValueError("need 10 <= small_runs <= big_runs")
    per_batch = max(1, min(prune_runs, (_split(small_runs)[1] - 1) // max(prune_reps, 1)))
    with ExitStack() as stack:
        urls = [(stack.enter_context(_database(b, "small")), stack.enter_context(_database(b, "big")))
                for b in backends]
        with ThreadPoolExecutor(max(1, 2 * len(urls))) as pool:
            futures = [tuple(pool.submit(build, url, n, prune_runs=per_batch, prune_reps=prune_reps)
                             for url, n in ((small_url, small_runs), (big_url, big_runs)))
                       for small_url, big_url in urls]
        results: list[tuple[Built, Built] | Exception] = []
        for small, big in futures:
            try:
                results.append((small.result(), big.result()))
            except Exception as exc:  # the other backends are still measured
                results.append(exc)
        yield results


def measure(small: Built, big: Built, *, samples: int = 15, budget_sec: float = 0.3,
            operations: Iterable[str] | None = None) -> dict[str, float]:
    """Time each operation on the two databases built by ``built_all`` (see ``db_size``)."""
    chosen = list(OPERATIONS) if operations is None else list(operations)
    unknown = [name for name in chosen if name not in OPERATIONS]
    if unknown:
        raise ValueError(f"unknown operations: {', '.join(unknown)}")
    out: dict[str, float] = {"build_small_s": small.build_sec, "build_big_s": big.build_sec}
    with ExitStack() as stack:
        subjects = (_Subject(small), _Subject(big))
        for subject in subjects:
            stack.callback(subject.close)
        timings: dict[str, tuple[list[float], list[float]]] = {}
        for name in chosen:
            op = OPERATIONS[name]
            warm = 0.0
            for subject in subjects:  # warm: statement caches, the database's pages
                op(subject)
                warm = max(warm, _timed_ms(lambda: op(subject)))
            n = max(samples, min(400, int(budget_sec * 1e3 / max(warm, 1e-3))))
            gc.collect()
            pair: tuple[list[float], list[float]] = ([], [])
            for i in range(n):
                for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                    pair[which].append(_timed_ms(lambda: op(subjects[which])))
            timings[name] = pair
        pair = ([], [])
        for rep in range(small.prune_reps):
            for which in ((0, 1) if rep % 2 == 0 else (1, 0)):
                pair[which].append(_prune_ms_per_run(subjects[which], rep))
        timings["prune_per_run"] = pair
    for name, (on_small, on_big) in timings.items():
        out[name] = statistics.median(b / s for s, b in zip(on_small, on_big))
        out[f"{name}_small_ms"] = statistics.median(on_small)
        out[f"{name}_big_ms"] = statistics.median(on_big)
    return out


def db_size(backend, *, small_runs: int = 1000, big_runs: int = 100_000, samples: int = 15,  # noqa: ANN001
            budget_sec: float = 0.3, prune_runs: int = 50, prune_reps: int = 5,
            operations: Iterable[str] | None = None) -> dict[str, float]:
    """Build a database of ``small_runs`` and one of ``big_runs`` runs on ``backend`` (``bench.databases``),
    time each operation on both and return ``{op: big ÷ small}`` (the median of the ratios of calls made one
    right after the other, so that the machine's load moves both alike), with the medians in milliseconds as
    ``{op}_small_ms`` and ``{op}_big_ms`` and the build times as ``build_small_s`` and ``build_big_s`` (see
    the module docstring). Each operation is called at least ``samples`` times on each database (``waiting_on``
    too, 24 ms a call: it had a third of them, and its ratio read 1.21 once, 1.01 the next time), and more
    while that takes less than ``budget_sec``. ``operations``: the names of
    ``OPERATIONS`` to time (default: all; ``prune_per_run`` is always measured).

    Raises:
        ValueError: the sizes are out of range, or ``operations`` names an unknown operation."""
    with built_all([backend], small_runs=small_runs, big_runs=big_runs, prune_runs=prune_runs,
                   prune_reps=prune_reps) as (result,):
        if isinstance(result, Exception):
            raise result
        return measure(*result, samples=samples, budget_sec=budget_sec, operations=operations)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.db_size [--small N] [--big N] [--samples N] [--sqlite-only]``: print the figures."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.db_size", description=__doc__.split("\n")[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--backend", choices=databases.BACKEND_CHOICES, default="both")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        for b in databases.chosen(stack, args.backend):
            result = db_size(b, small_runs=args.small, big_runs=args.big, samples=args.samples)
            print(f"## {b.label}: {args.small:,} vs {args.big:,} runs "
                  f"(built in {result['build_small_s']:.1f} s and {result['build_big_s']:.1f} s)")
            print("| operation | small, ms | big, ms | big ÷ small |")
            print("|---|---|---|---|")
            for name in [*OPERATIONS, "prune_per_run"]:
                print(f"| {name} | {result[name + '_small_ms']:.3f} | {result[name + '_big_ms']:.3f} "
                      f"| {result[name]:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
