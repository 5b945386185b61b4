"""SQLite's foreign keys while Alembic migrates: off for the migration, checked after it, on again.

Alembic's batch mode (``batch_alter_table``) changes a SQLite table by rebuilding it: create a new table, copy
the rows, DROP the old one, rename the new one. Hazel's SQLite connections run with ``PRAGMA foreign_keys=ON``
(``store.db``), and dropping ``hazel_runs`` that way deleted every row of the tables that reference it with ON
DELETE CASCADE (checkpoints, steering requests, decisions): ``hazel db downgrade 0001`` left every waiting
run without its state. SQLite ignores ``PRAGMA foreign_keys`` inside a transaction, so it is turned off on the
migration's connection before its first statement (Alembic's transaction begins with it), and the database is
checked with ``PRAGMA foreign_key_check`` once the migrations ran. PostgreSQL keeps its constraints as they are
(``ALTER TABLE`` changes a table in place).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

from store.errors import SchemaNotReadyError

if TYPE_CHECKING:
    from sqlalchemy import Connection

_SHOWN = 5
"""How many violations a ``ForeignKeyViolationError`` names."""


class ForeignKeyViolationError(SchemaNotReadyError):
    """After a migration on SQLite, rows reference rows that are not there (``PRAGMA foreign_key_check``).

    ``violations``: ``(table, rowid, parent table, foreign key index)`` tuples, as SQLite reports them."""

    def __init__(self, violations: list[tuple]) -> None:
        shown = "; ".join(f"{table} row {rowid} -> {parent}" for table, rowid, parent, _fk in violations[:_SHOWN])
        more = f" (and {len(violations) - _SHOWN} more)" if len(violations) > _SHOWN else ""
        super().__init__(f"the migration left {len(violations)} row(s) whose foreign key points at no row: "
                         f"{shown}{more}; restore the backup taken before migrating, or repair those rows")
        self.violations = violations


@contextlib.contextmanager
def foreign_keys_off(connection: Connection) -> Iterator[None]:
    """On SQLite, turn ``connection``'s foreign keys off for the ``with`` block, then set them back to what they
    were (ON for Hazel's connections); other databases are left alone. ``connection`` must not be in a
    transaction yet (SQLite ignores the pragma inside one); one the block leaves open is rolled back first.

    Raises:
        RuntimeError: ``connection`` is already in a transaction.
    """
    if connection.dialect.name != "sqlite":
        yield
        return
    if connection.in_transaction():
        raise RuntimeError("foreign keys can only be turned off outside a transaction (SQLite ignores it inside)")
    driver = connection.connection.driver_connection
    was = driver.execute("PRAGMA foreign_keys").fetchone()[0]
    driver.execute("PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        if connection.in_transaction():
            connection.rollback()
        driver.execute(f"PRAGMA foreign_keys={'ON' if was else 'OFF'}")


def check_foreign_keys(connection: Connection) -> None:
    """On SQLite, ``PRAGMA foreign_key_check`` over the whole database, once the migrations ran (Alembic commits
    each SQLite migration on its own: the database is at the new revision either way); nothing elsewhere.

    Raises:
        ForeignKeyViolationError: some row references a row that does not exist.
    """
    if connection.dialect.name != "sqlite":
        return
    violations = [tuple(row) for row in connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()]
    if violations:
        raise ForeignKeyViolationError(violations)
