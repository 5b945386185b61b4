"""Hazel's tables (SQLAlchemy Core). One definition for SQLite and PostgreSQL; Alembic migrations mirror it.

Identity: a run is ``runs.id`` (short random hex); a checkpoint is ``(run_id, seq)``; requests, decisions,
events and outbox rows have integer ids. Races are settled here: unique keys and conditional UPDATEs.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator):
    """A timezone-aware UTC datetime on both backends (SQLite stores text and forgets the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect):  # noqa: ANN001
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use timezone-aware UTC")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect):  # noqa: ANN001
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


VERSION_TABLE = "hazel_alembic_version"
"""Alembic's revision table, named so that it never meets an application's own Alembic history."""

JSONDoc = JSON().with_variant(JSONB(), "postgresql")

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    }
)

runs = Table(
    "hazel_runs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("workflow", String(200), nullable=False),
    Column("workflow_version", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("head_seq", Integer, nullable=False),
    Column("last_seq", Integer, nullable=False),
    Column("branch", Integer, nullable=False, default=0),
    Column("last_branch", Integer, nullable=False, default=0),
    Column("started_by", String(200), nullable=False),
    Column("started_via", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("attempt", Integer, nullable=False, default=0),
    Column("wake_at", UTCDateTime, nullable=True),
    Column("lease_owner", String(200), nullable=True),
    Column("lease_token", String(40), nullable=True),
    Column("lease_expires_at", UTCDateTime, nullable=True),
    Column("error", Text, nullable=True),
    Column("error_traceback", Text, nullable=True),
    # Who started it, as a person (bot.engine.people); the self-approval ban compares it with the decider's.
    Column("started_by_person", String(200), nullable=True),
    Index("ix_hazel_runs_status_wake_at", "status", "wake_at"),
)

checkpoints = Table(
    "hazel_checkpoints",
    metadata,
    Column("run_id", String(32), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("parent_seq", Integer, nullable=True),
    Column("branch", Integer, nullable=False),
    Column("step", String(200), nullable=False),
    Column("next_step", String(200), nullable=True),
    Column("workflow_version", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    # Storage: a full snapshot (base_seq == seq, chain_len 0) or an RFC 6902 patch against parent_seq.
    Column("base_seq", Integer, nullable=False),
    Column("chain_len", Integer, nullable=False),
    Column("stored_bytes", Integer, nullable=False),
    Column("compressed", Boolean, nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("decision_id", Integer, nullable=True),
    Column("handoff", JSONDoc, nullable=True),
    PrimaryKeyConstraint("run_id", "seq"),
    ForeignKeyConstraint(["run_id"], ["hazel_runs.id"], ondelete="CASCADE"),
)

steering_requests = Table(
    "hazel_steering_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), nullable=False),
    Column("checkpoint_seq", Integer, nullable=False),
    Column("point", String(200), nullable=False),
    Column("title", String(500), nullable=False),
    Column("channel", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("approvals_required", Integer, nullable=False),
    Column("approvals", Integer, nullable=False, default=0),
    Column("created_at", UTCDateTime, nullable=False),
    Column("due_at", UTCDateTime, nullable=True),
    Column("decided_at", UTCDateTime, nullable=True),
    Column("decided_by", String(200), nullable=True),
    Column("decided_action", String(16), nullable=True),
    Column("message_ref", JSONDoc, nullable=True),
    # The channel's own key for the posted request ("C123:1700000000.000100" on Slack, "MIG-12" on Jira),
    # to find the request when the channel calls back.
    Column("message_key", String(200), nullable=True),
    Column("escalated_at", UTCDateTime, nullable=True),
    Column("reminders_sent", Integer, nullable=False, default=0),
    # When the scheduler must next look at this pending request (reminder, escalation or timeout); NULL: never.
    Column("next_action_at", UTCDateTime, nullable=True),
    ForeignKeyConstraint(["run_id"], ["hazel_runs.id"], ondelete="CASCADE"),
    Index("ix_hazel_steering_requests_run_id", "run_id"),
    Index("ix_hazel_steering_requests_status", "status"),
    Index("ix_hazel_steering_requests_message_key", "message_key"),
    Index("ix_hazel_steering_requests_status_next_action_at", "status", "next_action_at"),
)

decisions = Table(
    "hazel_decisions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), nullable=False),
    Column("request_id", Integer, nullable=True),
    Column("action", String(16), nullable=False),
    Column("actor_id", String(200), nullable=False),
    Column("actor_name", String(200), nullable=True),
    Column("channel", String(16), nullable=False),
    Column("payload", JSONDoc, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("delivery_id", String(200), nullable=True),
    # Whose vote it is: the person behind the identity actor_id/channel (the person acted for, for --as).
    Column("person", String(200), nullable=False),
    Column("acting_for", String(200), nullable=True),
    ForeignKeyConstraint(["run_id"], ["hazel_runs.id"], ondelete="CASCADE"),
    # One decision per PERSON per request (quorum votes included), whichever channels they use; the request
    # row settles who won.
    UniqueConstraint("request_id", "person"),
    # A channel's delivery id (Slack retry, Jira webhook identifier, comment id) decides once.
    UniqueConstraint("channel", "delivery_id"),
    Index("ix_hazel_decisions_run_id", "run_id"),
)

events = Table(
    "hazel_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), nullable=True),
    Column("request_id", Integer, nullable=True),
    Column("actor_id", String(200), nullable=False),
    Column("actor_name", String(200), nullable=True),
    Column("channel", String(16), nullable=False),
    Column("action", String(64), nullable=False),
    Column("detail", JSONDoc, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("person", String(200), nullable=True),
    Index("ix_hazel_events_run_id", "run_id"),
)

outbox = Table(
    "hazel_outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), nullable=True),
    Column("request_id", Integer, nullable=True),
    Column("channel", String(200), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("payload", JSONDoc, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", UTCDateTime, nullable=False),
    Column("last_error", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime, nullable=True),
    Index("ix_hazel_outbox_status_next_attempt_at", "status", "next_attempt_at"),
)

ALL_TABLES = (runs, checkpoints, steering_requests, decisions, events, outbox)
