"""Alembic, driven from code: the migration scripts ship inside the ``store`` package.

Every command checks the schema before it starts (``ensure``). That check reads the version table with one plain
query and compares it with ``HEAD``; Alembic (and the Mako templates it pulls in, ~65 ms of imports) is loaded
only to migrate or when the revisions differ. ``tests/store/test_migrations.py`` keeps ``HEAD`` equal to the
newest script's revision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

from store.errors import SchemaNotReadyError
from store.schema import VERSION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Engine

SCRIPT_LOCATION = "store:migrations"
HEAD = "0006"
"""The revision of the newest script in ``store/migrations/versions`` (what ``hazel db upgrade`` reaches)."""


def _config(engine: Engine | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    if engine is not None:
        cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str:
    """The newest revision among the migration scripts, as Alembic reads them (``HEAD`` is the cached answer)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config()).get_current_head() or ""


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None when it has no version table (or an empty one)."""
    with engine.connect() as conn:
        try:
            return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
        except DBAPIError:  # no version table: a database Alembic has never touched
            return None


def known_revisions() -> set[str]:
    """Every revision among this Hazel's migration scripts."""
    from alembic.script import ScriptDirectory

    return {script.revision for script in ScriptDirectory.from_config(_config()).walk_revisions()}


class SchemaTooNewError(SchemaNotReadyError):
    """The database is at a revision this Hazel has no script for: a newer Hazel migrated it. Neither running
    nor ``hazel db upgrade`` can work with it (Alembic cannot go from a revision it does not know); a newer Hazel
    is needed."""

    def __init__(self, current: str, head: str) -> None:
        super().__init__(f"the database is at schema revision {current!r}, newer than this Hazel (which knows "
                         f"revisions up to {head}): use a newer Hazel with this database")
        self.current, self.head = current, head


def check_not_newer(engine: Engine, current: str | None = None) -> None:
    """Refuse a database whose revision no script of this Hazel knows (``current``: its revision, when the
    caller has read it).

    Raises:
        SchemaTooNewError: the database is at an unknown (newer) revision.
    """
    current = current_revision(engine) if current is None else current
    if current is not None and current not in known_revisions():
        raise SchemaTooNewError(current, head_revision())


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run every migration up to ``revision`` on ``engine``'s database.

    Raises:
        SchemaTooNewError: the database is at a revision newer than this Hazel's scripts.
    """
    from alembic import command

    check_not_newer(engine)
    command.upgrade(_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Undo the migrations after ``revision`` (one of this Hazel's revisions, e.g. ``0003``) on ``engine``'s
    database: the step before rolling back to an older Hazel whose newest revision is ``revision``.

    Raises:
        SchemaTooNewError: the database is at a revision newer than this Hazel's scripts.
        ValueError: ``revision`` is not one of this Hazel's revisions.
    """
    from alembic import command

    check_not_newer(engine)
    if revision not in known_revisions():
        raise ValueError(f"unknown schema revision {revision!r}; this Hazel knows "
                         f"{', '.join(sorted(known_revisions()))}")
    command.downgrade(_config(engine), revision)


def ensure(engine: Engine, *, upgrade_if_empty: bool = True) -> None:
    """Create the schema on an empty database; refuse to run on an out-of-date one.

    Raises:
        SchemaTooNewError: the database is at a revision newer than this Hazel (a newer Hazel is needed).
        SchemaNotReadyError: the database has Hazel tables at an older revision, or is empty and
            ``upgrade_if_empty`` is False.
    """
    current = current_revision(engine)
    if current == HEAD:
        return
    head = head_revision()
    if current == head:
        return
    if current is None and not any(t.startswith("hazel_") for t in inspect(engine).get_table_names()):
        if upgrade_if_empty:
            upgrade(engine)
            return
        raise SchemaNotReadyError("the database has no Hazel tables: run `hazel db upgrade`")
    check_not_newer(engine, current)
    raise SchemaNotReadyError(
        f"the database is at schema revision {current or 'unknown'}, this Hazel needs {head}: "
        "run `hazel db upgrade`"
    )
