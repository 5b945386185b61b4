"""PostgreSQL pool: a connection idle for ``PING_IDLE_SEC`` is pinged before use and replaced when dead;
one used a moment ago is not pinged (no extra round trip per step of a run executing back to back), unless
the server wrote to it or closed it meanwhile (its backend terminated, the server restarted)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, text

from store import Store, db


@pytest.fixture
def pg_store(pg_url: str):  # noqa: ANN201
    store = Store(pg_url, pool_size=1)
    yield store
    store.dispose()


def _backend_pid(store: Store) -> int:
    with store.read() as tx:
        return tx.conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


def _count_pings(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    pings: list[int] = []
    real = store.engine.dialect.do_ping

    def counting(dbapi_conn):  # noqa: ANN001, ANN202
        pings.append(1)
        return real(dbapi_conn)

    monkeypatch.setattr(store.engine.dialect, "do_ping", counting)
    return pings


def test_recently_used_connection_is_not_pinged(pg_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "PING_IDLE_SEC", 60.0)
    pings = _count_pings(pg_store, monkeypatch)
    first = _backend_pid(pg_store)
    assert _backend_pid(pg_store) == first
    assert pings == []


def test_idle_connection_is_pinged(pg_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    pings = _count_pings(pg_store, monkeypatch)
    _backend_pid(pg_store)
    monkeypatch.setattr(db, "PING_IDLE_SEC", 0.0)
    _backend_pid(pg_store)
    assert pings == [1]


def test_dead_idle_connection_is_replaced(pg_store: Store, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _backend_pid(pg_store)
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first}).scalar_one()
    admin.dispose()
    monkeypatch.setattr(db, "PING_IDLE_SEC", 0.0)
    second = _backend_pid(pg_store)  # would raise OperationalError without the ping
    assert second != first


def test_recently_used_connection_whose_backend_ended_is_replaced(pg_store: Store, pg_url: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection used last (the one the pool lends next) is not pinged for being idle, but its server
    ended it: the next transaction gets a new connection instead of failing (a request answered 503)."""
    monkeypatch.setattr(db, "PING_IDLE_SEC", 60.0)
    pings = _count_pings(pg_store, monkeypatch)
    first = _backend_pid(pg_store)
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first}).scalar_one()
        deadline = time.monotonic() + 10
        while conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": first}).scalar_one():
            assert time.monotonic() < deadline, "the backend did not end"
            time.sleep(0.01)
    admin.dispose()
    second = _backend_pid(pg_store)  # raised OperationalError (AdminShutdown) before the check at checkout
    assert second != first
    assert pings == [1]  # the dead one was pinged; nothing else was
