"""A pooled PostgreSQL connection found dead at checkout, and the new one opened in its place killed too before
it is lent (backends terminated over and over, ``pg_terminate_backend`` in a loop): the transaction fails with
the disconnect's ``OperationalError`` (``connection_invalidated``), an outage the worker waits out in one log
line, where SQLAlchemy's pool gave up with ``InvalidRequestError: This connection is closed`` (a traceback of
``worker loop error``)."""

from __future__ import annotations

import select
import time

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import OperationalError

from bot.engine import is_transient
from store import Store


def _backend_pid(store: Store) -> int:
    with store.read() as tx:
        return tx.conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


def _terminate(admin, pid: int) -> None:  # noqa: ANN001
    with admin.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()


def _until_readable(driver) -> None:  # noqa: ANN001
    """Until the server's goodbye (or the socket's end) reached ``driver``'s socket."""
    deadline = time.monotonic() + 10
    while not select.select([driver.fileno()], [], [], 0.05)[0]:
        assert time.monotonic() < deadline, "the terminated backend's connection never heard of it"


def test_a_connection_killed_as_it_replaces_a_dead_one_is_an_outage(pg_url: str) -> None:
    store = Store(pg_url, pool_size=1)
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        first = _backend_pid(store)
        with store.engine.connect() as conn:  # (the same pooled connection: pool_size=1, used last)
            driver = conn.connection.driver_connection
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar_one() == first
        _terminate(admin, first)
        _until_readable(driver)
        killed: list[int] = []

        @event.listens_for(store.engine.pool, "connect")
        def kill_the_new_one(dbapi_conn, _record) -> None:  # noqa: ANN001
            if not killed:  # the connection opened in place of the dead one: its backend ends before it is lent
                pid = dbapi_conn.info.backend_pid
                killed.append(pid)
                _terminate(admin, pid)
                _until_readable(dbapi_conn)

        with pytest.raises(OperationalError) as caught:
            with store.transaction():
                pytest.fail("a transaction began on a dead connection")
        assert killed and caught.value.connection_invalidated and is_transient(caught.value)
        assert _backend_pid(store) not in (first, *killed)  # the next transaction gets a live connection
    finally:
        admin.dispose()
        store.dispose()
