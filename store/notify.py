"""Cross-process wake-ups on PostgreSQL: ``NOTIFY hazel_ready, '<run id>'`` sent inside the transaction that
made a run ready (delivered to listeners only when it commits). A no-op on SQLite, where workers share one
process or fall back to their periodic sweep."""

from __future__ import annotations

from sqlalchemy import Connection, text

READY_CHANNEL = "hazel_ready"


def notify_ready(conn: Connection, run_id: str) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:channel, :run_id)"), {"channel": READY_CHANNEL, "run_id": run_id})
