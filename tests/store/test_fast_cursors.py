"""``store.fast.Result`` closes its DBAPI cursor once its answer is read in full (``rows``, ``tuples``, ``one``,
``scalar``, a ``row`` that finds no more, ``rowcount`` of a statement without rows), instead of leaving it to
reference counting (a cursor in a reference cycle is finalised by the garbage collector in any thread: that
once deadlocked SQLite). A whole decision and the run it resumes, inside and outside a ``pipeline``, leave no
cursor of a statement that answers rows open. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from sqlalchemy import func, select, update

from store import NewCheckpoint, Store, fast
from store.models import RunStatus
from store.schema import runs
from tests.support.engine import make_hazel, person
from tests.workflows.doc import doc_workflow

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def closed(cursor: Any) -> bool:
    if hasattr(cursor, "closed"):  # psycopg
        return bool(cursor.closed)
    try:  # sqlite3: a closed cursor refuses every operation
        cursor.fetchone()
    except Exception as exc:  # noqa: BLE001
        return "closed" in str(exc).lower()
    return False


def _runs(store: Store, n: int) -> None:
    with store.transaction() as tx:
        for i in range(n):
            tx.runs.insert(run_id=f"r{i}", workflow="w", workflow_version=1, started_by="me", started_via="console",
                           now=NOW, status=RunStatus.WAITING)
            tx.checkpoints.write(NewCheckpoint(run_id=f"r{i}", seq=0, parent_seq=None, branch=0, step="start",
                                               next_step="s", workflow_version=1, created_at=NOW), {"n": i}, None)


def test_each_way_of_reading_a_result_closes_its_cursor(store: Store) -> None:
    _runs(store, 3)
    every = select(runs.c.id).order_by(runs.c.id)
    with store.transaction() as tx:
        conn = tx.conn
        reads = {
            "rows": lambda r: r.rows(), "tuples": lambda r: r.tuples(), "one": lambda r: r.one(),
            "scalar": lambda r: r.scalar(),
        }
        for name, read in reads.items():
            res = fast.execute(conn, every, {})
            read(res)
            assert closed(res.cursor), name
        res = fast.execute(conn, every, {})
        assert [res.row()["id"] for _ in range(3)] == ["r0", "r1", "r2"] and not closed(res.cursor)
        assert res.row() is None and closed(res.cursor)  # read to the end
        res = fast.execute(conn, select(runs.c.id).where(runs.c.id == "nope"), {})
        assert res.one() is None and closed(res.cursor)
        res = fast.execute(conn, update(runs).where(runs.c.id == "r1").values(attempt=1), {})
        assert res.rowcount == 1 and closed(res.cursor) and res.rowcount == 1  # (read again: remembered)
        res = fast.execute(conn, update(runs).where(runs.c.id == "r2").values(attempt=2).returning(runs.c.id), {})
        assert res.rows() == [{"id": "r2"}] and closed(res.cursor)  # (its rowcount alone leaves it open)
        res = fast.execute(conn, select(func.count()).select_from(runs), {})
        assert res.scalar() == 3 and closed(res.cursor)


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch) -> list[fast.Result]:
    """Every ``store.fast.Result`` made while the test runs."""
    made: list[fast.Result] = []
    execute = fast.execute

    def kept(*args: Any, **kwargs: Any) -> fast.Result:
        made.append(res := execute(*args, **kwargs))
        return res

    monkeypatch.setattr(fast, "execute", kept)
    return made


def test_a_decision_and_its_run_leave_no_cursor_with_rows_open(db_url: str, results: list[fast.Result]) -> None:
    hazel = make_hazel(db_url, doc_workflow())
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=person("author"))
    hazel.drive(run_id=run.id)
    hazel.request_view(request_id=hazel.pending_request(run_id=run.id).id)
    alice = hazel.identify(channel="api", id="alice", name="alice")
    hazel.decide(run_id=run.id, action="approve", actor=alice, claim=True)
    hazel.drive(run_id=run.id)  # (from the claim in hand)
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    # (an INSERT's implicit RETURNING of its id on PostgreSQL is never read: released as its Result is dropped)
    read = [r for r in results if r.compiled.returns_rows and not r.compiled.sql.lstrip().startswith("INSERT")]
    assert len(read) >= 5, len(read)
    left_open = [r.compiled.sql.split("\n")[0][:80] for r in read if not closed(r.cursor)]
    assert left_open == [], left_open


def test_rows_are_keyed_by_the_names_the_driver_describes(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Result`` keys rows by the result column names known when the statement was compiled
    (``Compiled.names``), not by ``cursor.description`` (psycopg builds it anew at each access): for every
    statement a decision and its run read, the two agree."""
    compared: list[tuple[str, tuple[str, ...] | None, tuple[str, ...]]] = []
    to_dict = fast.Result._dict

    def checked(self: fast.Result, values: tuple) -> dict[str, Any]:
        described = tuple(d[0] for d in self.cursor.description)
        compared.append((self.compiled.sql.split("\n")[0][:60], self.compiled.names, described))
        return to_dict(self, values)

    monkeypatch.setattr(fast.Result, "_dict", checked)
    hazel = make_hazel(db_url, doc_workflow())
    run = hazel.start(workflow="doc", input={"topic": "backups"}, actor=person("author"))
    hazel.drive(run_id=run.id)
    hazel.request_view(request_id=hazel.pending_request(run_id=run.id).id)
    hazel.decide(run_id=run.id, action="approve", actor=hazel.identify(channel="api", id="alice", name="alice"))
    hazel.drive(run_id=run.id)
    assert hazel.get(run_id=run.id).status is RunStatus.COMPLETED
    assert len(compared) >= 5 and all(names is not None for _, names, _ in compared), compared
    assert [c for c in compared if c[1] != c[2]] == []
