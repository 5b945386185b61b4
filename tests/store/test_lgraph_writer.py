"""The LangGraph saver's hot writes (``store.lgraph_writer``) on SQLite: one connection the engine keeps lent to
its writers (no pool checkout per write), closed when the engine is disposed, replaced after a driver error."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError

from store import Store
from store.lgraph_writer import LangGraphWriter


def _write(writer: LangGraphWriter, i: int, *, durable: bool = True, blob: object = b"x") -> int:
    row = {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": f"c{i:04d}", "task_id": "k", "idx": 0,
           "channel": "ch", "type": "bytes", "blob": blob, "task_path": ""}
    return writer.insert_writes([row], upsert=False, durable=durable)


@pytest.fixture
def sqlite_store(tmp_path: Path):  # noqa: ANN201
    # (the log's growth before the first write checks out a connection of its own: store.wal, tested there)
    store = Store(f"sqlite:///{tmp_path / 'hazel.db'}", wal_preallocate_pages=0)
    store.ensure_schema()
    yield store
    store.dispose()


def test_writes_check_out_one_connection_for_all_of_them(sqlite_store: Store) -> None:
    checkouts: list[object] = []
    event.listen(sqlite_store.engine.pool, "checkout", lambda *_args: checkouts.append(1))
    writer = LangGraphWriter(sqlite_store.engine, synchronous="FULL")
    assert [_write(writer, i, durable=i % 2 == 0) for i in range(20)] == [1] * 20
    assert len(checkouts) == 1
    other = LangGraphWriter(sqlite_store.engine, synchronous="FULL")  # (another saver on the same store)
    assert _write(other, 20) == 1
    assert len(checkouts) == 1


def test_the_kept_connection_closes_with_the_engine(sqlite_store: Store, tmp_path: Path) -> None:
    writer = LangGraphWriter(sqlite_store.engine, synchronous="FULL", relaxed=sqlite_store.relaxed_engine)
    _write(writer, 0)
    _write(writer, 1, durable=False)
    assert (tmp_path / "hazel.db-wal").exists()
    sqlite_store.dispose()
    # SQLite folds the WAL into the file and removes it when the last connection to the file closes
    assert not (tmp_path / "hazel.db-wal").exists()
    assert _write(writer, 2) == 1  # a disposed engine lends a new connection on the next write
    sqlite_store.dispose()
    assert not (tmp_path / "hazel.db-wal").exists()


def test_a_driver_error_drops_the_kept_connection_and_the_next_write_takes_another(sqlite_store: Store) -> None:
    closed: list[object] = []
    event.listen(sqlite_store.engine.pool, "invalidate", lambda *_args: closed.append(1))
    writer = LangGraphWriter(sqlite_store.engine, synchronous="FULL")
    assert _write(writer, 0) == 1
    with pytest.raises(DBAPIError):
        _write(writer, 1, blob={"not": "bindable"})
    assert closed == [1]
    assert _write(writer, 2) == 1
    with sqlite_store.read() as tx:
        assert tx.conn.exec_driver_sql("SELECT count(*) FROM hazel_lg_writes").scalar() == 2
