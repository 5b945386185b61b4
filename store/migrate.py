"""Alembic, driven from code: the migration scripts ship inside the ``store`` package."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect

from store.errors import SchemaNotReadyError
from store.schema import VERSION_TABLE

SCRIPT_LOCATION = "store:migrations"


def _config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(_config_without_engine()).get_current_head() or ""


def _config_without_engine() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    return cfg


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run every migration up to ``revision`` on ``engine``'s database."""
    command.upgrade(_config(engine), revision)


def ensure(engine: Engine, *, upgrade_if_empty: bool = True) -> None:
    """Create the schema on an empty database; refuse to run on an out-of-date one.

    Raises:
        SchemaNotReadyError: the database has Hazel tables at another revision, or is empty and
            ``upgrade_if_empty`` is False.
    """
    current = current_revision(engine)
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
