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
HEAD = "0004"
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


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run every migration up to ``revision`` on ``engine``'s database."""
    from alembic import command

    command.upgrade(_config(engine), revision)


def ensure(engine: Engine, *, upgrade_if_empty: bool = True) -> None:
    """Create the schema on an empty database; refuse to run on an out-of-date one.

    Raises:
        SchemaNotReadyError: the database has Hazel tables at another revision, or is empty and
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
    raise SchemaNotReadyError(
        f"the database is at schema revision {current or 'unknown'}, this Hazel needs {head}: "
        "run `hazel db upgrade`"
    )
