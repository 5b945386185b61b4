"""SQLite writers of one process take turns before ``BEGIN IMMEDIATE`` (``store.db``): a thread never waits in
SQLite's busy handler for another thread of its own process, so the writer it waits for can never be stuck on
the waiting connection's mutex (the deadlock that failed ``test_one_person_one_vote`` now and then: the
garbage collector, running in the thread holding the write lock, finalised a cursor of the connection whose
``BEGIN IMMEDIATE`` was waiting in the busy handler; both waited until the busy timeout)."""

from __future__ import annotations

import threading

from sqlalchemy import text

from store import db


def test_a_writer_finalising_a_waiting_writers_cursor_is_not_stuck(tmp_path) -> None:  # noqa: ANN001
    engine = db.make_engine(f"sqlite:///{tmp_path / 'turns.db'}", busy_timeout_ms=3_000)
    with db.transaction(engine) as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
        conn.execute(text("INSERT INTO t VALUES (1), (2), (3)"))
    shared = engine.connect()  # the pooled connection the second writer will get
    cursor = shared.connection.driver_connection.cursor()
    cursor.execute("SELECT x FROM t")
    cursor.fetchone()  # a statement left active on that connection, as an unfinished result leaves one
    first_holds, second_waits, done = threading.Event(), threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def first() -> None:
        with db.transaction(engine) as conn:
            conn.execute(text("INSERT INTO t VALUES (10)"))
            first_holds.set()
            second_waits.wait(5)
            threading.Event().wait(0.3)  # the second writer is waiting by now
            nonlocal cursor
            del cursor  # its statement is reset here, which needs its connection's mutex
            outcome["first"] = "committed"

    def second() -> None:
        first_holds.wait(5)
        shared.close()  # back to the pool: the second writer's transaction takes it
        second_waits.set()
        try:
            with db.transaction(engine) as conn:
                conn.execute(text("INSERT INTO t VALUES (20)"))
            outcome["second"] = "committed"
        except Exception as exc:  # noqa: BLE001 (what the test reports)
            outcome["second"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcome == {"first": "committed", "second": "committed"}
    with db.transaction(engine, write=False) as conn:
        assert sorted(conn.execute(text("SELECT x FROM t")).scalars()) == [1, 2, 3, 10, 20]
    engine.dispose()


def test_writers_of_one_file_share_turns_across_engines(tmp_path) -> None:  # noqa: ANN001
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    a, b = db.make_engine(url), db.make_engine(url)
    assert db.write_turns(a) is not None and db.write_turns(a).lock is db.write_turns(b).lock
    assert db.write_turns(db.make_engine(f"sqlite:///{tmp_path / 'other.db'}")).lock is not db.write_turns(a).lock
