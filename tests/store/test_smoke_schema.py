from store import Store


def test_schema_upgrade_is_idempotent(db_url: str) -> None:
    store = Store(db_url)
    store.ensure_schema()
    store.upgrade()
    store.ensure_schema()
    store.dispose()


def test_head_is_the_newest_migration_script() -> None:
    """``ensure`` compares the database with ``HEAD`` before it loads Alembic: it must name the newest script."""
    from store.migrate import HEAD, head_revision

    assert HEAD == head_revision()


def test_a_database_at_an_old_revision_is_refused(db_url: str) -> None:
    import pytest
    from sqlalchemy import text

    from store.errors import SchemaNotReadyError
    from store.migrate import HEAD, current_revision
    from store.schema import VERSION_TABLE

    store = Store(db_url)
    try:
        store.ensure_schema()
        assert current_revision(store.engine) == HEAD
        with store.engine.begin() as conn:
            conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '0001'"))
        with pytest.raises(SchemaNotReadyError, match="revision 0001.*hazel db upgrade"):
            store.ensure_schema()
        with store.engine.begin() as conn:
            conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = :v"), {"v": HEAD})
        store.ensure_schema()
    finally:
        store.dispose()
