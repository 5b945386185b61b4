"""A message whose delivery met a database going away (PostgreSQL, its backend terminated as the message was
rendered) is logged and stored with one line of error: the error's class and the driver's message. SQLAlchemy's
own text of it went on with ``[SQL: …]`` and ``[parameters: …]`` (seven lines in the log; parameters can hold
the users' text)."""

from __future__ import annotations

import logging
import time

import pytest
from sqlalchemy import create_engine, text

from bot.ops.outbox import ChannelRouter, Deliverer
from store.models import OutboxKind
from tests.support.engine import make_hazel


def _kill(db_url: str, driver) -> None:  # noqa: ANN001
    """Terminate ``driver``'s backend from another connection; return once it has ended."""
    pid = driver.info.backend_pid
    admin = create_engine(db_url, isolation_level="AUTOCOMMIT")
    deadline = time.monotonic() + 10
    try:
        with admin.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
            while conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
                               ).scalar_one():
                assert time.monotonic() < deadline, "the backend did not end"
                time.sleep(0.01)
    finally:
        admin.dispose()


def test_a_message_cut_short_by_a_killed_connection_is_one_line_without_sql(
        pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """(PostgreSQL only: a backend terminated under a transaction.)"""
    from tests.conftest import _truncate

    _truncate(pg_url)  # (the session's database, emptied as ``db_url`` empties it: the message is #1)
    db_url = pg_url
    hazel = make_hazel(db_url)
    deliverer = Deliverer(hazel, ChannelRouter({"console": hazel.console}, fallback=hazel.console))
    with hazel.store.transaction() as tx:
        tx.outbox.add(channel="console", kind=OutboxKind.RUN_PROGRESS, now=hazel.clock(), payload={"event": "x"})

    def rendering(_message) -> None:  # noqa: ANN001 (a channel's rendering reads the database: its backend ends)
        with hazel.store.read() as tx:
            tx.conn.execute(text("SELECT 1"))  # (the transaction begun)
            _kill(db_url, tx.conn.connection.driver_connection)
            tx.conn.execute(text("SELECT :note"), {"note": "Priya's private note"})

    deliverer.senders[OutboxKind.RUN_PROGRESS] = rendering
    with caplog.at_level(logging.WARNING, logger="hazel"):
        assert deliverer.deliver_due() == 0
    [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("outbox message ")]
    assert said.startswith("outbox message 1 (run.progress to console) failed, attempt 1: OperationalError: "
                           "(psycopg.errors.AdminShutdown) terminating connection due to administrator command ("), said
    assert "\n" not in said and "[SQL" not in said and "Priya" not in said, said
    with hazel.store.read() as tx:
        stored = tx.outbox.get(1)
    assert stored.last_error == said.split("attempt 1: ", 1)[1].removesuffix(said[said.rindex(" ("):])
    assert hazel.outbox_backlog().get("pending", 0) == 1  # kept, to be tried again


def test_the_one_line_of_a_failed_message_is_still_redacted(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """A channel's error quoting a secret setting (its first line, the one kept) is logged and stored with
    ``**********`` in its place (``Hazel.redact``), and its further lines are left out."""
    import io

    from rich.console import Console

    from bot.engine import Registry
    from bot.server.app import HazelApp as Hazel
    from bot.settings import Settings
    from integrations.console import ConsoleChannel

    token = "ApiTok3nSECRETbbbb"
    hazel = Hazel(Settings(HAZEL_DATABASE_URL=db_url, HAZEL_API_TOKEN=token), registry=Registry(),
                  load_workflows=False, console=ConsoleChannel(console=Console(file=io.StringIO()), command="hazel"))
    hazel.prepare()
    try:
        deliverer = Deliverer(hazel, ChannelRouter({"console": hazel.console}, fallback=hazel.console))
        with hazel.store.transaction() as tx:
            tx.outbox.add(channel="console", kind=OutboxKind.RUN_PROGRESS, now=hazel.clock(), payload={"e": 1})

        def leaky(_message) -> None:  # noqa: ANN001
            raise RuntimeError(f"upstream refused token={token}\nits answer: Priya's private note")

        deliverer.senders[OutboxKind.RUN_PROGRESS] = leaky
        with caplog.at_level(logging.WARNING, logger="hazel"):
            assert deliverer.deliver_due() == 0
        [said] = [r.getMessage() for r in caplog.records if "failed, attempt 1: " in r.getMessage()]
        assert said.split("attempt 1: ")[1].split(" (retry in ")[0] == "RuntimeError: upstream refused token=**********"
        with hazel.store.read() as tx:
            assert tx.outbox.get(1).last_error == "RuntimeError: upstream refused token=**********"
    finally:
        hazel.close()
