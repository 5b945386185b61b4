"""Alembic environment: runs against the engine Hazel hands over in ``config.attributes["engine"]``.

On SQLite the migrations run with foreign keys off (a batch-mode table rebuild drops the old table, which would
cascade into the tables that reference it) and the foreign keys are checked before the last commit
(``store.migration_fks``)."""

from alembic import context
from sqlalchemy import create_engine

from store.migration_fks import check_foreign_keys, foreign_keys_off
from store.schema import VERSION_TABLE, metadata

config = context.config
engine = config.attributes.get("engine")
if engine is None:  # plain `alembic` command line: take the URL from the ini file
    engine = create_engine(config.get_main_option("sqlalchemy.url"))

with engine.connect() as connection, foreign_keys_off(connection):
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True,
                      version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()
    check_foreign_keys(connection)
    connection.commit()
