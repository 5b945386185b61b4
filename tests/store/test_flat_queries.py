"""The query shapes of migration 0003: the same answers as the queries they replace (order and ties included),
prune removing what it removed and skipping what it compacted, and every changed query on its index (the
plan's text, EXPLAIN QUERY PLAN on SQLite, EXPLAIN on PostgreSQL), on SQLite and PostgreSQL."""

from __future__ import annotations

import functools
import random
import re
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Iterator

import pytest
from sqlalchemy import event, func, insert, select, text, update

from store import Store, codec, fast
from store.models import RunStatus
from store.schema import checkpoints, decisions, prunable_runs, runs, steering_requests

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
STATUSES = [s.value for s in RunStatus]
ENDED = ("completed", "failed", "rejected", "cancelled")
BOUNDS = (60, 300, 900, 3600, 4 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600)


def run_row(run_id: str, *, workflow: str = "wf", status: str = "ready", at: datetime = T0,
            updated: datetime | None = None, head: int = 0) -> dict:
    return dict(id=run_id, workflow=workflow, workflow_version=1, status=status, head_seq=head, last_seq=head,
                branch=0, last_branch=0, started_by="t", started_via="console", created_at=at,
                updated_at=updated or at, attempt=0)


def request_row(run_id: str, *, created_at: datetime, status: str = "pending") -> dict:
    return dict(run_id=run_id, checkpoint_seq=0, point="review", title="t", channel="console", status=status,
                approvals_required=1, approvals=0, created_at=created_at, reminders_sent=0)


def checkpoint_rows(run_id: str, n: int) -> list[dict]:
    """``n`` snapshot checkpoints 0..n-1 (each loads on its own)."""
    out = []
    for seq in range(n):
        payload, compressed = codec.dump_payload({"seq": seq, "run": run_id})
        out.append(dict(run_id=run_id, seq=seq, parent_seq=seq - 1 if seq else None, branch=0, step=f"s{seq}",
                        next_step=None, workflow_version=1, created_at=T0, base_seq=seq, chain_len=0,
                        stored_bytes=len(payload), compressed=compressed, payload=payload))
    return out


def hex_id(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(12))


# -- the same answers ------------------------------------------------------------------------------------------

@pytest.fixture
def listed(store: Store) -> Store:
    """120 runs of three workflows in every status, created at 8 distinct times (many ties), and a request
    pending for most waiting runs, many of them created at the same time."""
    rng = random.Random(11)
    ids = [hex_id(rng) for _ in range(116)] + ["ab%cd0000001", "ab_cd0000001", "abxcd0000001", "abcd00000001"]
    times = [T0 - timedelta(minutes=rng.randint(0, 7)) for _ in ids]
    with store.transaction() as tx:
        tx.conn.execute(insert(runs), [run_row(r, workflow=rng.choice("abc"), status=rng.choice(STATUSES), at=t)
                                       for r, t in zip(ids, times)])
        waiting = [r for (r,) in tx.conn.execute(select(runs.c.id).where(runs.c.status == "waiting"))]
        tx.conn.execute(insert(steering_requests), [
            request_row(r, created_at=T0 - timedelta(seconds=rng.choice([0, 0, 5, 90])),
                        status=rng.choice(["pending", "pending", "pending", "decided"])) for r in waiting + waiting[:5]])
    return store


def old_list(conn, statuses, workflow, limit, offset, newest_first=True) -> list[str]:  # noqa: ANN001
    """The listing as it was: one ORDER BY over the table."""
    stmt = select(runs.c.id)
    if statuses:
        stmt = stmt.where(runs.c.status.in_(statuses))
    if workflow:
        stmt = stmt.where(runs.c.workflow == workflow)
    order = runs.c.created_at.desc() if newest_first else runs.c.created_at.asc()
    return [r for (r,) in conn.execute(stmt.order_by(order, runs.c.id).limit(limit).offset(offset))]


@pytest.mark.parametrize("statuses", [None, ["waiting"], ["completed", "failed"], ["ready", "waiting", "failed"],
                                      STATUSES, ["waiting", "waiting"]])
@pytest.mark.parametrize("workflow", [None, "b"])
def test_listing_answers_as_before(listed: Store, statuses: list[str] | None, workflow: str | None) -> None:
    with listed.read() as tx:
        for limit, offset in ((50, 0), (7, 0), (7, 5), (100, 30), (3, 200)):
            for newest_first in (True, False):
                got = [r.id for r in tx.runs.list(statuses=statuses, workflow=workflow, limit=limit, offset=offset,
                                                  newest_first=newest_first)]
                assert got == old_list(tx.conn, statuses, workflow, limit, offset, newest_first), (limit, offset)


def test_prefixes_answer_as_before(listed: Store) -> None:
    with listed.read() as tx:
        every = sorted(tx.conn.execute(select(runs.c.id)).scalars())
        for prefix in ["", "a", "ab", "ab_c", "ab%c", "ab'c", "abcd", "abxcd", every[5][:4], every[40][:6], every[70],
                       every[70] + "0", "zzzz", "ffff"]:
            expected = sorted(tx.conn.execute(
                select(runs.c.id).where(runs.c.id.startswith(prefix, autoescape=True))).scalars())
            assert tx.runs.find_by_prefix(prefix, limit=500) == expected, prefix
            assert tx.runs.find_by_prefix(prefix, limit=2) == expected[:2], prefix
        if listed.dialect == "sqlite":  # its LIKE ignored ASCII case, and so does the range
            assert tx.runs.find_by_prefix(every[70][:6].upper(), limit=6) == [every[70]]


def test_pending_requests_answer_as_before(listed: Store) -> None:
    t = steering_requests.c
    with listed.read() as tx:
        pending = list(tx.conn.execute(select(t.id, t.run_id).where(t.status == "pending")
                                       .order_by(t.created_at, t.id)))
        assert [r.id for r in tx.requests.pending()] == [p.id for p in pending]
        assert [r.id for r in tx.requests.pending(limit=4)] == [p.id for p in pending[:4]]
        some = [p.run_id for p in pending[::3]] + ["no-such-run"]
        assert [r.id for r in tx.requests.pending(run_ids=some)] == [p.id for p in pending if p.run_id in some]
        assert [r.id for r in tx.requests.pending(run_ids=some, limit=3)] == [
            p.id for p in pending if p.run_id in some][:3]
        assert tx.requests.pending(run_ids=[]) == []
        for run_id in {p.run_id for p in pending}:
            newest = max(p.id for p in pending if p.run_id == run_id)
            assert tx.requests.pending_for_run(run_id).id == newest


def test_waiting_metrics_match_the_requests(store: Store) -> None:
    """Requests around every bucket edge of every age bound, scraped at times on and off the edges."""
    rng = random.Random(2)
    ages = [0, 1e-6, 59.999999, 60, 60.000001, 299.5, 300, 899, 900, 3599.999999, 3600, 3600.000001, 14_399, 14_400,
            86_399.999999, 86_400, 86_400.000001, 3 * 86_400, 7 * 86_400 - 1e-6, 7 * 86_400, 7 * 86_400 + 1,
            40 * 86_400, -30] + [rng.random() * 9 * 86_400 for _ in range(60)]
    with store.transaction() as tx:
        tx.conn.execute(insert(runs), [run_row(f"m{i:03d}", status="waiting") for i in range(len(ages))])
        tx.conn.execute(insert(steering_requests), [request_row(f"m{i:03d}", created_at=T0 - timedelta(seconds=a))
                                                    for i, a in enumerate(ages)])
    created = [T0 - timedelta(seconds=a) for a in ages]
    for now in (T0, T0 + timedelta(microseconds=1), T0 + timedelta(seconds=30), T0 + timedelta(hours=2, seconds=1),
                T0 - timedelta(hours=5, microseconds=7)):
        with store.read() as tx:
            snap = tx.metrics.snapshot(now=now, age_bounds_sec=BOUNDS)
        assert snap.waiting_total == len(created)
        assert snap.waiting_oldest == min(created)
        assert snap.waiting_within == [sum(1 for c in created if c >= now - timedelta(seconds=b)) for b in BOUNDS]
        assert snap.waiting_epoch_sum == pytest.approx(sum(c.timestamp() for c in created), abs=1e-3)


# -- prune --------------------------------------------------------------------------------------------------------

def old_candidates(conn, ended_before: datetime) -> dict[str, tuple[int, int]]:  # noqa: ANN001
    """What the grouped query of old found: ended runs before the cutoff with more than one checkpoint."""
    per_run = (select(checkpoints.c.run_id, func.count().label("n"), func.sum(checkpoints.c.stored_bytes)
                      .label("bytes")).group_by(checkpoints.c.run_id).having(func.count() > 1).subquery())
    rows = conn.execute(select(runs.c.id, per_run.c.n, per_run.c.bytes).join(per_run, per_run.c.run_id == runs.c.id)
                        .where(runs.c.status.in_(ENDED) & (runs.c.updated_at < ended_before)))
    return {r.id: (int(r.n), int(r.bytes)) for r in rows}


@pytest.fixture
def aged(store: Store) -> Store:
    """150 runs in every status, ended (or last changed) between 1 and 60 days ago, with 1 to 4 checkpoints."""
    rng = random.Random(7)
    with store.transaction() as tx:
        for i in range(150):
            n = rng.randint(1, 4)
            ended = T0 - timedelta(days=rng.randint(1, 60), seconds=rng.random() * 86_400)
            run_id = f"e{i:03d}"
            tx.conn.execute(insert(runs), run_row(run_id, status=rng.choice(STATUSES), at=ended - timedelta(hours=1),
                                                  updated=ended, head=n - 1))
            tx.conn.execute(insert(checkpoints), checkpoint_rows(run_id, n))
    return store


def remaining(conn) -> dict[str, list[int]]:  # noqa: ANN001
    out: dict[str, list[int]] = {}
    for run_id, seq in conn.execute(select(checkpoints.c.run_id, checkpoints.c.seq)
                                    .order_by(checkpoints.c.run_id, checkpoints.c.seq)):
        out.setdefault(run_id, []).append(seq)
    return out


def test_prune_removes_what_it_removed_before_and_skips_what_it_compacted(aged: Store) -> None:
    from bot.ops.retention import prune

    cutoff = T0 - timedelta(days=30)
    with aged.read() as tx:
        expected = old_candidates(tx.conn, cutoff)
        before = remaining(tx.conn)
        pages, after = [], None
        while True:  # small pages: the keyset pagination crosses them
            page = tx.retention.page(ended_before=cutoff, after=after, limit=7)
            pages.append(page)
            if page.after is None:
                break
            after = page.after
    assert {c.run_id: (c.checkpoints, c.stored_bytes) for p in pages for c in p.candidates} == expected
    assert len(pages) > 3 and expected

    dry = prune(aged, older_than_days=30, now=T0, dry_run=True, batch=7)
    assert dry.runs == sorted(expected) and dry.checkpoints_deleted == sum(n - 1 for n, _ in expected.values())
    report = prune(aged, older_than_days=30, now=T0, batch=7)
    assert report.runs == sorted(expected)
    with aged.read() as tx:
        after_prune = remaining(tx.conn)
        listed = set(tx.conn.execute(select(prunable_runs.c.run_id)).scalars())
        due = set(tx.conn.execute(select(runs.c.id).where(runs.c.status.in_(ENDED) & (runs.c.updated_at < cutoff)))
                  .scalars())
    assert after_prune == {r: [seqs[-1]] if r in expected else seqs for r, seqs in before.items()}
    assert listed == _ended(aged) - due  # compacted, or found with one checkpoint: off the list; the rest stays

    with aged.read() as tx:  # the next prune reads nothing it already compacted
        assert tx.retention.page(ended_before=cutoff) == type(page)()
    assert prune(aged, older_than_days=30, now=T0).runs == []

    run_id = sorted(expected)[0]  # rewound, then ended again: listed again, prunable again once due
    with aged.transaction() as tx:
        tx.conn.execute(update(runs).where(runs.c.id == run_id).values(status="ready", updated_at=T0))
        tx.conn.execute(insert(checkpoints), checkpoint_rows(run_id, 6)[-2:])
        tx.conn.execute(update(runs).where(runs.c.id == run_id).values(status="completed", updated_at=T0, head_seq=5,
                                                                       last_seq=5))
    assert prune(aged, older_than_days=30, now=T0).runs == []
    assert run_id in prune(aged, older_than_days=0, now=T0 + timedelta(seconds=1)).runs
    with aged.read() as tx:
        assert tx.conn.execute(select(func.count()).where(checkpoints.c.run_id == run_id)).scalar_one() == 1


def _ended(store: Store) -> set[str]:
    with store.read() as tx:
        return set(tx.conn.execute(select(runs.c.id).where(runs.c.status.in_(ENDED))).scalars())


def test_forgetting_leaves_a_run_that_ended_again(aged: Store) -> None:
    cutoff = T0 - timedelta(days=30)
    with aged.read() as tx:
        page = tx.retention.page(ended_before=cutoff, limit=500)
    assert page.settled
    run_id, ended_at = page.settled[0]
    with aged.transaction() as tx:  # rewound and ended again between the listing and the forgetting
        tx.conn.execute(update(runs).where(runs.c.id == run_id).values(status="ready"))
        tx.conn.execute(update(runs).where(runs.c.id == run_id).values(status="failed", updated_at=T0))
    with aged.transaction() as tx:
        assert tx.retention.forget(page.settled) == len(page.settled) - 1
        assert tx.conn.execute(select(prunable_runs.c.ended_at).where(prunable_runs.c.run_id == run_id)
                               ).scalar_one() == T0


# -- the plans -------------------------------------------------------------------------------------------------

@contextmanager
def statements(store: Store) -> Iterator[list[tuple[str, object]]]:
    seen: list[tuple[str, object]] = []

    def grab(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001, ARG001
        seen.append((statement, parameters))

    def traced(conn, stmt, params):  # noqa: ANN001, ANN202 (store.fast sends to the driver directly)
        c, values = fast.prepared(conn, stmt, params)
        seen.append((c.sql, values))
        return execute(conn, stmt, params)

    execute = fast.execute
    event.listen(store.engine, "before_cursor_execute", grab)
    fast.execute = traced
    try:
        yield seen
    finally:
        fast.execute = execute
        event.remove(store.engine, "before_cursor_execute", grab)


def plans(store: Store, call: Callable) -> str:  # noqa: ANN001
    """The plans of the SELECTs ``call(tx)`` runs, one line each."""
    with statements(store) as seen:
        with store.read() as tx:
            call(tx)
    sqlite = store.dialect == "sqlite"
    lines = []
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        for sql, params in seen:
            if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            cur.execute(("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN (COSTS OFF) ") + sql, params)
            lines.append(" | ".join(str(row[-1] if sqlite else row[0]).strip() for row in cur.fetchall()))
        raw.rollback()
    finally:
        raw.close()
    return "\n".join(lines)


@functools.cache
def big_rows() -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """The rows of ``big`` (runs, requests, checkpoints, decisions): the same every time (seeded), so made once
    per process. Callers insert them and never change them."""
    rng = random.Random(1)
    rows, reqs, cps, votes = [], [], [], []
    for i in range(8000):
        status = "waiting" if i % 10 < 4 else "completed" if i % 10 < 9 else "failed"
        at = T0 - timedelta(seconds=rng.random() * 60 * 86_400)
        run_id = hex_id(rng)
        rows.append(run_row(run_id, workflow=f"w{i % 3}", status=status, at=at, updated=at, head=1))
        if status == "waiting":
            reqs.append(request_row(run_id, created_at=at))
        else:
            cps.extend(checkpoint_rows(run_id, 2))
            if status == "completed":
                reqs.extend(request_row(run_id, created_at=at, status="decided") for _ in range(3))
                votes.append(dict(run_id=run_id, request_id=100_000 + i, action="approve", actor_id="sme",
                                  channel="console", payload={}, created_at=at, person="sme"))
    return rows, reqs, cps, votes


_BIG_SQLITE: dict[str, Path] = {}  # "plain"/"analyzed" -> a built SQLite file of this process, copied per test


@pytest.fixture(params=["plain", "analyzed"])
def big(request: pytest.FixtureRequest, store: Store) -> Store:
    """8,000 runs (40 % waiting with a pending request, 50 % completed with two checkpoints and three decided
    requests, 10 % failed), created over 60 days; SQLite both as Hazel leaves it (no statistics) and ANALYZEd,
    PostgreSQL ANALYZEd in both (as autovacuum leaves it: it gathers statistics by itself).

    Each test gets its own database (tests write to it). On SQLite the first test of a process builds it and
    keeps a copy; the next ones get a copy of that copy (``sqlite3`` backup), the same bytes they would build."""
    built = _BIG_SQLITE.get(request.param) if store.dialect == "sqlite" else None
    if built is not None:
        _sqlite_copy(built, Path(store.engine.url.database))
        return store
    rows, reqs, cps, votes = big_rows()
    with store.transaction() as tx:
        tx.conn.execute(insert(runs), rows)
        tx.conn.execute(insert(steering_requests), reqs)
        tx.conn.execute(insert(checkpoints), cps)
        tx.conn.execute(insert(decisions), votes)
    if request.param == "analyzed" or store.dialect == "postgresql":  # PostgreSQL: autovacuum analyzes it
        with store.engine.connect() as conn:
            conn.execute(text("ANALYZE"))
            conn.commit()
    if store.dialect == "sqlite":
        keep = request.getfixturevalue("tmp_path_factory").mktemp("big") / f"{request.param}.db"
        _sqlite_copy(Path(store.engine.url.database), keep)
        _BIG_SQLITE[request.param] = keep
    return store


def _sqlite_copy(source: Path, target: Path) -> None:
    """``target`` becomes a copy of the SQLite database ``source`` (the backup API: consistent, WAL included)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def test_every_changed_query_uses_its_index(big: Store) -> None:
    sqlite = big.dialect == "sqlite"
    with big.read() as tx:
        waiting = tx.conn.execute(select(runs.c.id).where(runs.c.status == "waiting").order_by(runs.c.id)
                                  .limit(60)).scalars().all()

    def index(name: str, plan: str, *, times: int = 1) -> None:
        assert plan.count(name) >= times, plan

    def unsorted(plan: str) -> None:
        assert ("TEMP B-TREE FOR ORDER BY" not in plan) if sqlite else ("Sort" not in plan), plan

    def no_scan_of(table: str, plan: str) -> None:  # searched on an index, never read whole
        assert not re.search(rf"\bSCAN {table}\b" if sqlite else rf"Seq Scan on {table}\b", plan), plan

    def not_read(table: str, plan: str) -> None:
        assert not re.search(rf"\b{table}\b", plan), plan

    plan = plans(big, lambda tx: tx.runs.list(limit=50))
    index("ix_hazel_runs_created_at_id", plan)
    unsorted(plan)
    plan = plans(big, lambda tx: tx.runs.list(statuses=["waiting"], limit=50))
    index("ix_hazel_runs_status_created_at_id", plan)
    unsorted(plan)
    plan = plans(big, lambda tx: tx.runs.list(statuses=["running"], limit=50))  # in no listing index (0007)
    index("ix_hazel_runs_status_wake_at", plan)
    no_scan_of("hazel_runs", plan)
    plan = plans(big, lambda tx: tx.runs.list(statuses=["completed", "failed"], limit=50))
    index("ix_hazel_runs_status_created_at_id", plan, times=2)
    no_scan_of("hazel_runs", plan)
    plan = plans(big, lambda tx: tx.runs.list(workflow="w1", limit=50))
    index("ix_hazel_runs_workflow_status_created_at_id", plan)  # (PostgreSQL reads a status it knows empty on either)
    assert plan.count("Index Scan using ix_hazel_runs_" if not sqlite else "USING INDEX ix_hazel_runs_") >= len(
        STATUSES), plan
    no_scan_of("hazel_runs", plan)
    plan = plans(big, lambda tx: tx.runs.list(workflow="w1", statuses=["completed"], limit=50))
    index("ix_hazel_runs_workflow_status_created_at_id", plan)
    unsorted(plan)

    plan = plans(big, lambda tx: tx.runs.find_by_prefix(waiting[7][:6], limit=6))
    assert ("sqlite_autoindex_hazel_runs_1 (id>? AND id<?)" in plan) if sqlite else (
        "pk_hazel_runs" in plan and "id >=" in plan), plan

    plan = plans(big, lambda tx: tx.requests.pending_for_run(waiting[3]))
    index("ix_hazel_steering_requests_run_id_status_id", plan)
    plan = plans(big, lambda tx: tx.requests.pending(run_ids=waiting[:50]))
    index("ix_hazel_steering_requests_run_id_status_id", plan)
    no_scan_of("hazel_steering_requests", plan)
    plan = plans(big, lambda tx: tx.decisions.by_person(100_005, "sme"))  # what App Home asks of each request
    index("uq_hazel_decisions_request_id_person", plan)  # (votes only: the query says so)
    no_scan_of("hazel_decisions", plan)
    plan = plans(big, lambda tx: tx.decisions.for_request(100_005, waiting[3]))
    index("ix_hazel_decisions_run_id", plan)
    no_scan_of("hazel_decisions", plan)
    plan = plans(big, lambda tx: tx.requests.pending(limit=500))
    index("ix_hazel_steering_requests_status_created_at_id", plan)
    unsorted(plan)

    plan = plans(big, lambda tx: tx.metrics.snapshot(now=T0, age_bounds_sec=BOUNDS))
    not_read("hazel_runs", plan)  # counted by the triggers
    index("pk_hazel_pending_counts" if not sqlite else "sqlite_autoindex_hazel_pending_counts_1", plan,
          times=len(BOUNDS))
    index("ix_hazel_steering_requests_status_created_at_id", plan, times=len(BOUNDS) + 1)
    no_scan_of("hazel_steering_requests", plan)
    for call in (lambda tx: tx.runs.count_by_status(), lambda tx: tx.runs.count_by_version(STATUSES)):
        plan = plans(big, call)
        index("hazel_run_counts", plan)
        not_read("hazel_runs", plan)

    plan = plans(big, lambda tx: tx.retention.page(ended_before=T0 - timedelta(days=59, hours=20), limit=100))
    index("ix_hazel_prunable_runs_ended_at_run_id", plan)
    no_scan_of("hazel_checkpoints", plan)
    no_scan_of("hazel_runs", plan)
