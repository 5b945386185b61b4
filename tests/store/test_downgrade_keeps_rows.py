"""A downgrade, and the upgrade after it, keep the rows of every table that exists at both revisions: on
SQLite, Alembic's batch mode rebuilds ``hazel_runs`` (create, copy, DROP the old one, rename), and with the
connection's foreign keys on, that DROP cascaded into the checkpoints, steering requests and decisions
(``store.migration_fks``). A run waiting before the downgrade is still answered and completes after it. A migration that leaves a row
pointing at no row (``PRAGMA foreign_key_check``) fails the command in one line that names it."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.pool import NullPool

from store import Store
from store.migrate import downgrade, known_revisions, upgrade
from store.migration_fks import ForeignKeyViolationError, check_foreign_keys
from store.models import RunStatus
from tests.support.cli import in_process_cli
from tests.support.engine import make_hazel, person
from tests.workflows.sample import docs


def _counts(url: str) -> dict[str, int]:
    """Rows of each Hazel table (the version table left out), on a connection of its own."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            names = [n for n in inspect(conn).get_table_names() if n.startswith("hazel_") and "version" not in n]
            return {n: conn.execute(text(f"SELECT COUNT(*) FROM {n}")).scalar_one() for n in names}
    finally:
        engine.dispose()


def test_downgrade_to_each_revision_and_back_keeps_a_waiting_run(empty_url: str) -> None:
    hazel = make_hazel(empty_url, docs)
    run = hazel.start(workflow="doc-review", input={"topic": "keys"}, actor=person("author"))
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING
    hazel.decide(run_id=run.id, action="feedback", actor=person("ann"), payload={"text": "shorter"})
    assert hazel.drive(run_id=run.id).run.status is RunStatus.WAITING  # drafted again, asked again
    hazel.close()
    at_head = _counts(empty_url)
    for table in ("hazel_runs", "hazel_checkpoints", "hazel_steering_requests", "hazel_decisions"):
        assert at_head[table] > 0, table
    store = Store(empty_url)
    try:
        for revision in sorted(known_revisions(), reverse=True)[1:]:
            downgrade(store.engine, revision)
            down = _counts(empty_url)
            assert down == {t: n for t, n in at_head.items() if t in down}, f"downgrade to {revision}"
            upgrade(store.engine)
            up = _counts(empty_url)
            assert {t: up[t] for t in down} == down, f"upgrade from {revision}"
    finally:
        store.dispose()
    hazel = make_hazel(empty_url, docs)
    assert hazel.get(run_id=run.id).status is RunStatus.WAITING
    hazel.decide(run_id=run.id, action="approve", actor=person("ann"))
    done = hazel.drive(run_id=run.id).run
    assert done.status is RunStatus.COMPLETED


def test_a_dangling_foreign_key_after_a_migration_is_named(tmp_path) -> None:  # noqa: ANN001
    engine = create_engine(f"sqlite:///{tmp_path / 'fk.db'}", poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
            conn.exec_driver_sql("CREATE TABLE child (id INTEGER PRIMARY KEY, "
                                 "parent_id INTEGER REFERENCES parent(id))")
            conn.exec_driver_sql("INSERT INTO child VALUES (7, 42)")  # foreign keys are off on this engine
        with engine.connect() as conn, \
                pytest.raises(ForeignKeyViolationError, match=r"1 row\(s\).*child row 7 -> parent"):
            check_foreign_keys(conn)
    finally:
        engine.dispose()


def test_a_migration_that_leaves_a_dangling_row_fails_in_one_line(tmp_path,  # noqa: ANN001
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'hazel.db'}"
    hazel = make_hazel(url, docs)
    run = hazel.start(workflow="doc-review", input={"topic": "keys"}, actor=person("author"))
    hazel.drive(run_id=run.id)
    hazel.close()
    engine = create_engine(url, poolclass=NullPool)  # foreign keys off: plain SQLAlchemy leaves them so
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE hazel_checkpoints SET run_id = 'ghost' WHERE seq = 0")
    finally:
        engine.dispose()
    hazel_cli = in_process_cli(monkeypatch, tmp_path, db_url=url, workflows="tests.workflows.sample")
    refused = hazel_cli("db", "downgrade", "0006", code=1)
    assert "left 1 row(s) whose foreign key points at no row: hazel_checkpoints row" in refused.output
    assert "-> hazel_runs" in refused.output and "Traceback" not in refused.output
