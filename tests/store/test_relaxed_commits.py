"""Commits that need not wait for the disk (``Store.transaction(durable=False)``, the LangGraph saver's pending
writes through ``store.lgraph.LangGraphWriter``) never leave a connection relaxed for the durable transactions
after them: every other transaction on that connection commits at the store's ``synchronous`` level again."""

from __future__ import annotations

import pytest

from store import Store
from store.lgraph_writer import LangGraphWriter


def _level(tx) -> str:  # noqa: ANN001
    sql = "PRAGMA synchronous" if tx.dialect.name == "sqlite" else "SHOW synchronous_commit"
    return str(tx.conn.exec_driver_sql(sql).scalar())


@pytest.fixture
def one_connection_store(db_url: str):  # noqa: ANN201
    store = Store(db_url, pool_size=1)  # sequential transactions reuse the one pooled connection
    yield store
    store.dispose()


def test_a_relaxed_transaction_is_followed_by_durable_ones(one_connection_store: Store) -> None:
    store = one_connection_store
    full, relaxed = ("2", "1") if store.dialect == "sqlite" else ("on", "off")
    with store.transaction() as tx:
        assert _level(tx) == full
    with store.transaction(durable=False) as tx:
        assert _level(tx) == relaxed
    with store.transaction() as tx:
        assert _level(tx) == full
    with store.read() as tx:
        assert _level(tx) == full


def test_relaxed_langgraph_writes_leave_the_connection_durable_for_the_store(one_connection_store: Store) -> None:
    store = one_connection_store
    writer = LangGraphWriter(store.engine, synchronous=store.sqlite_synchronous)
    row = {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c", "task_id": "k", "idx": 0, "channel": "ch",
           "type": "bytes", "blob": b"x", "task_path": ""}
    writer.insert_writes([row], upsert=False, durable=False)
    with store.transaction() as tx:
        assert _level(tx) == ("2" if store.dialect == "sqlite" else "on")
        assert tx.conn.exec_driver_sql("SELECT count(*) FROM hazel_lg_writes").scalar() == 1
