from store import Store


def test_schema_upgrade_is_idempotent(db_url: str) -> None:
    store = Store(db_url)
    store.ensure_schema()
    store.upgrade()
    store.ensure_schema()
    store.dispose()
