"""The counters migration 0003 keeps by triggers (runs per workflow, version and status; pending steering
requests per creation minute, hour, 4 hours and day; ended runs not compacted yet) stay exact through inserts,
status changes, deletes, truncation, an upgrade of a database that already holds rows, and concurrent writers
on PostgreSQL, on SQLite and PostgreSQL."""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, func, insert, select, text, update

from store import Store
from store.migrate import upgrade
from store.models import RunStatus
from store.schema import ALL_TABLES, checkpoints, pending_counts, prunable_runs, run_counts, runs, steering_requests
from tests.conftest import _truncate

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
BOUNDS = (60, 300, 900, 3600, 4 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600)
ENDED = ("completed", "failed", "rejected", "cancelled")
STATUSES = [s.value for s in RunStatus]


def run_row(run_id: str, *, workflow: str = "wf", version: int = 1, status: str = "ready",
            at: datetime = T0) -> dict:
    return dict(id=run_id, workflow=workflow, workflow_version=version, status=status, head_seq=0, last_seq=0,
                branch=0, last_branch=0, started_by="t", started_via="console", created_at=at, updated_at=at,
                attempt=0)


def request_row(run_id: str, *, created_at: datetime, status: str = "pending") -> dict:
    return dict(run_id=run_id, checkpoint_seq=0, point="review", title="t", channel="console", status=status,
                approvals_required=1, approvals=0, created_at=created_at, reminders_sent=0)


def checkpoint_row(run_id: str, seq: int) -> dict:
    return dict(run_id=run_id, seq=seq, parent_seq=seq - 1 if seq else None, branch=0, step=f"s{seq}",
                next_step=None, workflow_version=1, created_at=T0, base_seq=0, chain_len=seq, stored_bytes=10,
                compressed=False, payload=b"{}")


def counted_runs(conn) -> dict[tuple[str, int, str], int]:  # noqa: ANN001
    c = run_counts.c
    n = func.sum(c.n)
    return {(w, v, s): int(k) for w, v, s, k in conn.execute(
        select(c.workflow, c.workflow_version, c.status, n).group_by(c.workflow, c.workflow_version, c.status)
        .having(n != 0))}


def actual_runs(conn) -> dict[tuple[str, int, str], int]:  # noqa: ANN001
    c = runs.c
    return {(w, v, s): int(k) for w, v, s, k in conn.execute(
        select(c.workflow, c.workflow_version, c.status, func.count()).group_by(c.workflow, c.workflow_version,
                                                                                c.status))}


def counted_pending(conn) -> dict[tuple[int, int], tuple[int, int, int]]:  # noqa: ANN001
    """``(grain, bucket) -> (n, sec_sum, us_sum)`` summed over shards, zero rows left out."""
    c = pending_counts.c
    return {(g, b): (int(n), int(s), int(u)) for g, b, n, s, u in conn.execute(
        select(c.grain, c.bucket, func.sum(c.n), func.sum(c.sec_sum), func.sum(c.us_sum))
        .group_by(c.grain, c.bucket).having(func.sum(c.n) != 0))}


def actual_pending(conn) -> dict[tuple[int, int], tuple[int, int, int]]:  # noqa: ANN001
    """The same, computed from the pending requests themselves."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    out: dict[tuple[int, int], list[int]] = {}
    for (created,) in conn.execute(select(steering_requests.c.created_at)
                                   .where(steering_requests.c.status == "pending")):
        micro = (created - epoch) // timedelta(microseconds=1)
        sec, us = divmod(micro, 1_000_000)
        for grain in (0, 60, 3600, 14400, 86400):
            acc = out.setdefault((grain, sec // grain * grain if grain else 0), [0, 0, 0])
            acc[0] += 1
            acc[1] += sec
            acc[2] += us
    return {k: tuple(v) for k, v in out.items()}


def assert_exact(store: Store) -> None:
    with store.read() as tx:
        assert counted_runs(tx.conn) == actual_runs(tx.conn)
        assert counted_pending(tx.conn) == actual_pending(tx.conn)


def test_run_counts_follow_inserts_status_changes_and_deletes(store: Store) -> None:
    rng = random.Random(3)
    ids = [f"r{i:03d}" for i in range(60)]
    with store.transaction() as tx:
        tx.conn.execute(insert(runs), [run_row(r, workflow=rng.choice(["a", "b"]), version=rng.choice([1, 2]),
                                               status=rng.choice(STATUSES)) for r in ids])
    assert_exact(store)
    with store.transaction() as tx:  # one at a time, through the repository
        for r in ids[:20]:
            tx.runs.transition(r, from_statuses=STATUSES, now=T0, status=rng.choice(STATUSES))
    assert_exact(store)
    with store.transaction() as tx:  # many in one statement; the same status again changes nothing
        tx.conn.execute(update(runs).where(runs.c.id.in_(ids[20:40])).values(status="waiting"))
        tx.conn.execute(update(runs).values(status=runs.c.status))
        tx.conn.execute(update(runs).where(runs.c.id.in_(ids[40:50])).values(workflow_version=3))
        tx.conn.execute(update(runs).where(runs.c.id.in_(ids[45:55])).values(workflow="c", status="failed"))
    assert_exact(store)
    with store.transaction() as tx:
        tx.conn.execute(delete(runs).where(runs.c.id.in_(ids[::3])))
    assert_exact(store)
    with store.read() as tx:
        expected = actual_runs(tx.conn)
        assert tx.runs.count_by_status() == {s: sum(n for (_, _, st), n in expected.items() if st == s)
                                             for s in {k[2] for k in expected}}
        assert tx.runs.count_by_version(["waiting", "failed"]) == sorted(
            (w, v, s, n) for (w, v, s), n in expected.items() if s in ("waiting", "failed"))
    with store.transaction() as tx:
        tx.conn.execute(delete(runs))
    with store.read() as tx:
        assert counted_runs(tx.conn) == {} and tx.runs.count_by_status() == {}


def test_pending_counts_follow_requests(store: Store) -> None:
    offsets = [0, 0.000001, 30.5, 59.999999, 60, 3599.999999, 3600, 14_400.25, 86_399.999999, 86_400, 3 * 86_400 + 7,
               30 * 86_400, -5]
    with store.transaction() as tx:
        tx.conn.execute(insert(runs), [run_row(f"p{i}", status="waiting") for i in range(len(offsets))])
        for i, off in enumerate(offsets):
            tx.conn.execute(insert(steering_requests), request_row(f"p{i}", created_at=T0 - timedelta(seconds=off)))
        tx.conn.execute(insert(steering_requests), request_row("p0", created_at=T0, status="decided"))
    assert_exact(store)
    with store.transaction() as tx:
        t = steering_requests.c
        ids = [r for (r,) in tx.conn.execute(select(t.id).where(t.status == "pending").order_by(t.id))]
        tx.requests.settle(ids[1], now=T0, actor="x", action="approve")  # leaves pending
        tx.conn.execute(update(steering_requests).where(t.id == ids[2]).values(approvals=1))  # stays pending
        tx.conn.execute(update(steering_requests).where(t.id == ids[3])
                        .values(created_at=T0 - timedelta(days=2, microseconds=3)))  # moves
        tx.conn.execute(update(steering_requests).where(t.status == "decided").values(status="pending"))  # back
        tx.conn.execute(delete(runs).where(runs.c.id == "p5"))  # its request goes with it
        tx.conn.execute(delete(steering_requests).where(t.id == ids[6]))
    assert_exact(store)


def test_truncating_every_table_leaves_the_counters_at_zero(db_url: str) -> None:
    store = Store(db_url)
    with store.transaction() as tx:
        tx.conn.execute(insert(runs), [run_row("t1", status="waiting"), run_row("t2", status="completed")])
        tx.conn.execute(insert(steering_requests), request_row("t1", created_at=T0))
        tx.conn.execute(insert(checkpoints), [checkpoint_row("t2", 0), checkpoint_row("t2", 1)])
    if store.dialect == "postgresql":
        _truncate(db_url)  # what tests and the bench do: every table of ALL_TABLES
        with store.transaction() as tx:
            tx.conn.execute(insert(runs), [run_row("t3", status="completed")])
            tx.conn.execute(insert(steering_requests), request_row("t3", created_at=T0))
        with store.transaction() as tx:  # the runs alone: the counters follow
            tx.conn.execute(text("TRUNCATE hazel_runs CASCADE"))
    else:  # SQLite has no TRUNCATE: deleting the rows keeps the counters at zero, deleting them too empties them
        with store.transaction() as tx:
            for table in ALL_TABLES:
                tx.conn.execute(delete(table))
    with store.read() as tx:
        for table in (run_counts, pending_counts, prunable_runs):
            assert tx.conn.execute(select(func.count()).select_from(table)).scalar_one() == 0
        snap = tx.metrics.snapshot(now=T0, age_bounds_sec=BOUNDS)
    assert (snap.runs, snap.waiting_total, snap.waiting_within) == ([], 0, [0] * len(BOUNDS))
    store.dispose()


# -- an existing database --------------------------------------------------------------------------------------

def test_the_upgrade_counts_the_rows_already_there(empty_url: str) -> None:
    store = Store(empty_url)
    upgrade(store.engine, "0002")
    rng = random.Random(5)
    old = [run_row(f"o{i:02d}", workflow=rng.choice(["a", "b"]), status=rng.choice(STATUSES),
                   at=T0 - timedelta(days=rng.randint(0, 9), seconds=rng.random() * 86_400)) for i in range(40)]
    person = {"started_by_person": "t"}
    with store.engine.begin() as conn:
        conn.execute(insert(runs), [{**r, **person} for r in old])
        conn.execute(insert(steering_requests), [request_row(r["id"], created_at=r["created_at"],
                                                             status="pending" if r["status"] == "waiting" else
                                                             "decided") for r in old])
        for r in old:  # ended runs: some with history to drop, some with one checkpoint only
            conn.execute(insert(checkpoints), [checkpoint_row(r["id"], s) for s in range(rng.choice([1, 3]))])
    upgrade(store.engine, "head")
    assert_exact(store)
    with store.read() as tx:
        listed = set(tx.conn.execute(select(prunable_runs.c.run_id)).scalars())
        many = {r for r, n in tx.conn.execute(select(checkpoints.c.run_id, func.count())
                                              .group_by(checkpoints.c.run_id)) if n > 1}
    assert listed == {r["id"] for r in old if r["status"] in ENDED} & many
    store.dispose()


# -- concurrent writers ----------------------------------------------------------------------------------------

def test_concurrent_status_changes_never_deadlock_and_stay_exact(pg_url: str) -> None:
    """Two threads change the statuses of many runs at once (one run per transaction, several runs per
    transaction, several runs in one statement), open and settle requests, for their own runs: no deadlock
    (PostgreSQL would abort one after ``deadlock_timeout``), and every counter exact afterwards."""
    _truncate(pg_url)
    store = Store(pg_url, pool_size=4)
    ids = [f"c{i:03d}" for i in range(200)]
    with store.transaction() as tx:
        tx.conn.execute(insert(runs), [run_row(r, workflow=f"w{i % 3}", status="ready") for i, r in enumerate(ids)])
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def work(mine: list[str], seed: int) -> None:
        rng = random.Random(seed)
        try:
            barrier.wait()
            for i in range(150):
                with store.transaction() as tx:
                    batch = rng.sample(mine, rng.randint(1, 10))
                    if i % 3 == 0:
                        tx.conn.execute(update(runs).where(runs.c.id.in_(batch)).values(status=rng.choice(STATUSES)))
                    else:
                        for r in batch:
                            tx.conn.execute(update(runs).where(runs.c.id == r).values(status=rng.choice(STATUSES)))
                    if i % 5 == 0:
                        tx.conn.execute(insert(steering_requests), request_row(
                            batch[0], created_at=T0 - timedelta(seconds=rng.randint(0, 10 * 86_400))))
                    if i % 7 == 0:
                        tx.conn.execute(update(steering_requests).where(
                            steering_requests.c.run_id.in_(batch) & (steering_requests.c.status == "pending"))
                            .values(status="decided"))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(ids[k::2], k)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert_exact(store)
    with store.read() as tx:  # and in all: 200 runs
        assert sum(tx.runs.count_by_status().values()) == 200
    store.dispose()
