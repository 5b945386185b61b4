"""Alembic environment: runs against the engine Hazel hands over in ``config.attributes["engine"]``."""

from alembic import context
from sqlalchemy import create_engine

from store.schema import VERSION_TABLE, metadata

config = context.config
engine = config.attributes.get("engine")
if engine is None:  # plain `alembic` command line: take the URL from the ini file
    engine = create_engine(config.get_main_option("sqlalchemy.url"))

with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True,
                      version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
