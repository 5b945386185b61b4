"""``bench.db_size`` on tiny databases, so that it cannot rot: both databases get built with the shape asked for,
every operation is measured on both, on SQLite and PostgreSQL. No timing is asserted."""

from __future__ import annotations


from sqlalchemy import func, select

from bench.db_size import OPERATIONS, build, db_size, _database
from store import Store
from store.schema import checkpoints, runs, steering_requests

KEYS = [*OPERATIONS, "prune_per_run"]




def test_every_operation_is_measured_on_both_sizes(backend) -> None:  # noqa: ANN001
    result = db_size(backend, small_runs=20, big_runs=60, samples=3, budget_sec=0.005, prune_runs=2, prune_reps=2)
    for key in KEYS:
        for name in (key, f"{key}_small_ms", f"{key}_big_ms"):
            assert result[name] > 0, (name, result)
    assert result["build_small_s"] > 0 and result["build_big_s"] > 0


def test_the_database_has_the_shape_asked_for(backend) -> None:  # noqa: ANN001
    with _database(backend, "shape") as url:
        built = build(url, 50, prune_runs=3, prune_reps=2)
        store = Store(url)
        with store.read() as tx:
            by_status = tx.runs.count_by_status()
            actual = dict(tx.conn.execute(select(runs.c.status, func.count()).group_by(runs.c.status)).all())
            per_run = dict(tx.conn.execute(select(checkpoints.c.run_id, func.count())
                                           .group_by(checkpoints.c.run_id)).all())
            statuses = dict(tx.conn.execute(select(runs.c.id, runs.c.status)).all())
            pending = tx.conn.execute(select(func.count()).where(steering_requests.c.status == "pending")).scalar_one()
            ids = list(statuses)
        store.dispose()
    assert by_status == actual == {"waiting": 20, "completed": 25, "failed": 5}
    assert pending == 20 and len(set(ids)) == 50 and all(len(i) == 12 for i in ids)
    assert {per_run[r] for r, s in statuses.items() if s == "completed"} == {20}
    assert built.waiting and built.prune_runs == 3
