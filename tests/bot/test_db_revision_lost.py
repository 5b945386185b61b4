"""A database whose revision row was lost (``DELETE FROM hazel_alembic_version``, or the table dropped) while its
tables are there: ``hazel db current`` said ``current none`` with exit 0, every command said "run `hazel db
upgrade`", and ``hazel db upgrade`` failed with ``table hazel_events already exists``: a loop with no way out (a
fresh-user finding, s27 F10). Now each says what happened and the way out, ``hazel db stamp REVISION``
(Alembic's ``stamp``), which records the revision without migrating; SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Iterator

import pytest
from sqlalchemy import create_engine, text

from tests.bot.test_cli_malformed import hostile  # noqa: F401  (the fixture)

LOST = ("the database has Hazel's tables but no schema revision (hazel_alembic_version is gone or empty): Hazel "
        "cannot tell which migrations ran; restore it from a backup, or record the revision it is at with `hazel "
        "db stamp REVISION`")


@pytest.fixture(params=["row", "table"])
def lost_revision(request: pytest.FixtureRequest, db_url: str) -> Iterator[str]:
    """``db_url`` without its revision (the row deleted, or the version table dropped); put back afterwards
    (on PostgreSQL the database is the session's)."""
    engine = create_engine(db_url)
    with engine.begin() as conn:
        real = conn.execute(text("SELECT version_num FROM hazel_alembic_version")).scalar_one()
        conn.execute(text("DELETE FROM hazel_alembic_version" if request.param == "row"
                          else "DROP TABLE hazel_alembic_version"))
    try:
        yield real
    finally:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE IF NOT EXISTS hazel_alembic_version (version_num VARCHAR(32) NOT NULL "
                              "PRIMARY KEY)"))
            conn.execute(text("DELETE FROM hazel_alembic_version"))
            conn.execute(text("INSERT INTO hazel_alembic_version (version_num) VALUES (:v)"), {"v": real})
        engine.dispose()


def test_a_lost_revision_is_named_and_stamped_back(hostile, lost_revision: str) -> None:  # noqa: ANN001, F811
    current = hostile("db", "current")
    assert current.exit_code == 1 and LOST in " ".join(current.stdout.split()), current.output
    assert json.loads(hostile("db", "current", "--json").stdout)["problem"].startswith(LOST[:60])
    for argv in (["runs"], ["db", "upgrade"]):  # (upgrade: "table … already exists")
        refused = hostile(*argv)
        assert refused.exit_code == 1 and LOST in " ".join(refused.output.split()), (argv, refused.output)
    assert "unknown schema revision '9999'" in hostile("db", "stamp", "9999").output
    typo = hostile("db", "stamp", "0005")  # (s30 F5: recorded; nothing in the CLI could undo it)
    assert typo.exit_code == 1 and (f"the tables are those of revision {lost_revision}, this Hazel's newest (every "
                                    "table and column it has is there), not 0005's") in " ".join(typo.output.split()), \
        typo.output
    assert hostile("db", "current").exit_code == 1  # (still lost: nothing recorded)
    stamped = hostile("db", "stamp", lost_revision)
    assert stamped.exit_code == 0 and f"database recorded at revision {lost_revision} (was none)" in stamped.stdout
    assert hostile("runs").exit_code == 0 and hostile("db", "current").exit_code == 0


def test_stamp_records_only_a_lost_revision(hostile, tmp_path, monkeypatch) -> None:  # noqa: ANN001, F811
    """``hazel db stamp`` on a database that has a revision changed it, even downward, and on an empty file
    recorded tables it lacked: every command then failed with ``no such table`` while ``db current`` said all
    was well (a fresh-user finding, s29 F1 HIGH, F2). Both are refused now, nothing changed."""
    from store.migrate import HEAD

    refused = hostile("db", "stamp", "0008")
    assert refused.exit_code == 1 and f"the database is at schema revision {HEAD}: `hazel db stamp` only records a " \
        "lost one" in " ".join(refused.output.split()), refused.output
    assert hostile("db", "current").exit_code == 0 and f"current {HEAD}" in hostile("db", "current").stdout
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    monkeypatch.setenv("HAZEL_DATABASE_URL", f"sqlite:///{empty}")
    refused = hostile("db", "stamp", HEAD)
    assert refused.exit_code == 1 and "the database has no Hazel tables: nothing to stamp" in refused.output, \
        refused.output
    assert hostile("db", "upgrade").exit_code == 0 and hostile("runs").exit_code == 0


def tables_at(hostile, tmp_path, monkeypatch, revision: str, *flags: str):  # noqa: ANN001, ANN201, F811
    """A SQLite file (``HAZEL_DATABASE_URL``) whose tables are at ``revision`` and whose revision row was lost;
    its engine (dispose it)."""
    path = tmp_path / "older.db"
    monkeypatch.setenv("HAZEL_DATABASE_URL", f"sqlite:///{path}")
    assert hostile("db", "upgrade").exit_code == 0
    assert hostile("db", "downgrade", revision, *flags).exit_code == 0
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM hazel_alembic_version"))
    return engine


def test_stamp_of_the_newest_revision_on_older_tables_is_refused(hostile, tmp_path, monkeypatch) -> None:  # noqa: ANN001, F811
    """A fresh-user finding (s31 F6): tables at 0008 whose revision row was lost took ``hazel db stamp 0009``
    (what ``db current`` says this Hazel needs), and a LangGraph run then failed on ``no such column:
    c.stamp``."""
    from store.migrate import HEAD

    engine = tables_at(hostile, tmp_path, monkeypatch, "0008")
    engine.dispose()
    refused = hostile("db", "stamp", HEAD)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 1 and f"the tables lack what revision {HEAD} has (hazel_lg_checkpoints.stamp): they " \
        "are at an older revision" in said, refused.output
    assert hostile("db", "stamp", "0008").exit_code == 0
    assert hostile("db", "upgrade").exit_code == 0 and f"current {HEAD}" in hostile("db", "current").stdout


def test_stamp_of_a_revision_between_is_refused_naming_the_one_the_tables_are_at(hostile, tmp_path,  # noqa: ANN001, F811
                                                                                 monkeypatch) -> None:
    """A fresh-operator finding (s33 F2): tables at 0005 whose revision row was lost took ``hazel db stamp 0006``
    (only the newest revision was checked): ``db upgrade`` then said it succeeded without 0006's columns, every
    command failed on ``no such column``, and stamping 0005 afterwards failed in ``upgrade`` (``no such
    index``). Every revision's tables are checked now, and the refusal names the revision they are at."""
    engine = tables_at(hostile, tmp_path, monkeypatch, "0006")
    engine.dispose()
    older = " ".join(hostile("db", "stamp", "0005").output.split())  # (0006 adds columns)
    assert "the tables are those of revision 0006 (every table and column it has is there), not 0005's: `hazel " \
        "db stamp 0006`" in older, older
    newer = " ".join(hostile("db", "stamp", "0008").output.split())
    assert "the tables lack what revision 0008 has (hazel_runs.start_key, index uq_hazel_runs_started_via_start_key): " \
        "they are at an older revision; `hazel db stamp 0006`, then `hazel db upgrade` (nothing changed)" in newer, newer
    between = " ".join(hostile("db", "stamp", "0007").output.split())  # (0007 only drops an index)
    assert "the tables hold what revision 0007 has not (index ix_hazel_decisions_request_id_person): they are those " \
        "of revision 0006; `hazel db stamp 0006`, then `hazel db upgrade` (nothing changed)" in between, between
    assert hostile("db", "current").exit_code == 1  # (nothing recorded)
    assert hostile("db", "stamp", "0006").exit_code == 0
    assert hostile("db", "upgrade").exit_code == 0 and hostile("runs").exit_code == 0


def test_stamp_names_every_revision_whose_tables_match(hostile, tmp_path, monkeypatch) -> None:  # noqa: ANN001, F811
    """s34 F10: tables at 0004 were told `hazel db stamp 0005` (0005 makes the same tables: it rewrites Jira
    decisions' keys), which skipped that rewrite; tables changed by hand were told to stamp an older revision."""
    engine = tables_at(hostile, tmp_path, monkeypatch, "0004", "--discard-graph-state")
    said = " ".join(hostile("db", "stamp", "0003").output.split())
    assert "the tables are those of revision 0004 or 0005, not 0003's (each of those makes the same tables): " \
        "record the newest migration of the Hazel that last ran on it, `hazel db stamp 0004` when you cannot " \
        "tell" in said, said
    with engine.begin() as conn:  # an index dropped by hand: no revision's tables
        conn.execute(text("DROP INDEX ix_hazel_lg_checkpoints_run_id"))
    engine.dispose()
    said = " ".join(hostile("db", "stamp", "0004").output.split())
    assert "match no revision of this Hazel (changed by hand?); restore the database from a backup" in said, said
    assert hostile("db", "current").exit_code == 1  # (nothing recorded)
