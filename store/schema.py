"""Hazel's tables (SQLAlchemy Core). One definition for SQLite and PostgreSQL; Alembic migrations mirror it.

Identity: a run is ``runs.id`` (short random hex); a checkpoint is ``(run_id, seq)``; requests, decisions,
events and outbox rows have integer ids. Races are settled here: unique keys and conditional UPDATEs.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    BigInteger,
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
from sqlalchemy import text
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

class JSONDoc(TypeDecorator):
    """A JSON document: ``JSONB`` on PostgreSQL, ``JSON`` (text) on SQLite. PostgreSQL's type is looked up
    when a PostgreSQL dialect first asks (importing SQLAlchemy's PostgreSQL dialect costs a SQLite
    deployment's every CLI command about 50 ms)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect):  # noqa: ANN001, ANN201
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())

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
    # A start sent with a delivery id (a REST ``Idempotency-Key``, scoped to its caller): the SHA-256 of that id
    # (hex), so that the key is not kept as sent and its length is fixed (migration 0008). Null without one.
    Column("start_key", String(64), nullable=True),
    Index("ix_hazel_runs_status_wake_at", "status", "wake_at"),
)
# One run per start key on a channel: two starts sent with one key at the same time make one run, the database
# deciding which (the other's insert fails: ``store.runs.duplicate_start``). Partial on both databases
# (the migration creates it so): runs started without a key, nearly all of them, have no entry in it.
STARTED_WITH_KEY = "start_key IS NOT NULL"
Index("uq_hazel_runs_started_via_start_key", runs.c.started_via, runs.c.start_key, unique=True,
      sqlite_where=text(STARTED_WITH_KEY))
# Listings, newest first (ties by id): all runs, by status, by workflow and status (``RunRepo.list``). The two by
# status leave out running runs (``LISTED``, migration 0007: a resume then moves no entry of theirs in and out),
# which ``store.listing`` reads through ``ix_hazel_runs_status_wake_at``. Partial on both databases (the
# migration creates them so; ``postgresql_where`` is not repeated here, as for ``hazel_decisions`` below).
LISTED = "status <> 'running'"
"""The condition of the run listings' status indexes; a query that uses them states it (SQLite's rule)."""
Index("ix_hazel_runs_created_at_id", runs.c.created_at.desc(), runs.c.id)
Index("ix_hazel_runs_status_created_at_id", runs.c.status, runs.c.created_at.desc(), runs.c.id,
      sqlite_where=text(LISTED))
Index("ix_hazel_runs_workflow_status_created_at_id", runs.c.workflow, runs.c.status, runs.c.created_at.desc(),
      runs.c.id, sqlite_where=text(LISTED))

VOTES = "action <> 'rewind'"
"""The condition of the partial unique index of votes on ``hazel_decisions`` (a rewind is no vote); a query that
uses it states it (``DecisionRepo.by_person``)."""

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
    # Where it waits, for "waiting on me" (``store.waiting``, migration 0006): its run's workflow and version,
    # and ``point_key``: '' for a native workflow's point, a digest of the permission settings of a point asked
    # at run time (LangGraph), '*' unknown (requests older than 0006: checked one by one).
    Column("workflow", String(200), nullable=False, server_default=""),
    Column("workflow_version", Integer, nullable=False, server_default="0"),
    Column("point_key", String(32), nullable=False, server_default="*"),
    ForeignKeyConstraint(["run_id"], ["hazel_runs.id"], ondelete="CASCADE"),
    # a run's requests, its pending one first-hand (``RequestRepo.pending_for_run``)
    Index("ix_hazel_steering_requests_run_id_status_id", "run_id", "status", "id"),
    # pending requests oldest first (``RequestRepo.pending``, the oldest for ``/metrics``)
    Index("ix_hazel_steering_requests_status_created_at_id", "status", "created_at", "id"),
    Index("ix_hazel_steering_requests_message_key", "message_key"),
    Index("ix_hazel_steering_requests_status_next_action_at", "status", "next_action_at"),
    # requests by status and where they wait, oldest first within each place (``store.waiting``)
    Index("ix_hazel_steering_requests_status_place", "status", "workflow", "workflow_version", "point",
          "point_key", "channel", "created_at", "id"),
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
    # row settles who won. A rewind is no vote: whoever voted may still fork the run from the request.
    # Partial on both databases (the migrations create it so); ``postgresql_where`` is not repeated here
    # because naming a PostgreSQL option makes SQLAlchemy import its PostgreSQL dialect on every CLI command.
    Index("uq_hazel_decisions_request_id_person", "request_id", "person", unique=True,
          sqlite_where=text(VOTES)),
    # One person's vote on a request (``DecisionRepo.by_person``) reads the partial unique index above, saying
    # ``action <> 'rewind'``; a request's decisions (``for_request``) are read among its run's (migration 0007
    # dropped an index on ``request_id, person`` beside it: one page fewer for every decision's commit).
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

run_counts = Table(
    "hazel_run_counts",
    metadata,
    # Runs per workflow, version and status, kept by triggers (migration 0003) in the transaction that changes
    # a run; ``shard`` spreads concurrent writers over rows (PostgreSQL: 16 by a hash of the run id, SQLite:
    # 0). The count is the sum over shards (a shard may hold 0).
    Column("workflow", String(200), nullable=False),
    Column("workflow_version", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("shard", Integer, nullable=False),
    Column("n", BigInteger, nullable=False),
    PrimaryKeyConstraint("workflow", "workflow_version", "status", "shard"),
)

pending_counts = Table(
    "hazel_pending_counts",
    metadata,
    # Pending steering requests by creation time, kept by triggers (migration 0003): per ``grain`` seconds
    # (60, 3600, 14400, 86400; 0: all of them, ``bucket`` 0) the requests created in
    # [bucket, bucket + grain) (Unix seconds), with the sum of their creation times (whole seconds, and the
    # microseconds within them). Summed over shards, as ``run_counts``.
    Column("grain", Integer, nullable=False),
    Column("bucket", BigInteger, nullable=False),
    Column("shard", Integer, nullable=False),
    Column("n", BigInteger, nullable=False),
    Column("sec_sum", BigInteger, nullable=False),
    Column("us_sum", BigInteger, nullable=False),
    PrimaryKeyConstraint("grain", "bucket", "shard"),
)

prunable_runs = Table(
    "hazel_prunable_runs",
    metadata,
    # Ended runs whose checkpoint history retention has not compacted yet, by when they ended (their
    # ``updated_at`` then): a trigger adds a run entering an ended status and removes one leaving it
    # (migration 0003); compacting removes it (``store.retention``).
    Column("run_id", String(32), nullable=False),
    Column("ended_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("run_id"),
    ForeignKeyConstraint(["run_id"], ["hazel_runs.id"], ondelete="CASCADE"),
    Index("ix_hazel_prunable_runs_ended_at_run_id", "ended_at", "run_id"),
)


# -- LangGraph's checkpoints (``hazel.langgraph.HazelSaver``, SQL in ``store.lgraph``) ----------------------------

lg_checkpoints = Table(
    "hazel_lg_checkpoints",
    metadata,
    # LangGraph's identity of a checkpoint: its thread, namespace ("" for the root graph, "node:task" for a
    # subgraph) and id (a UUID v6: sorting by it sorts by creation within a thread).
    Column("thread_id", Text, nullable=False),
    Column("checkpoint_ns", Text, nullable=False),
    Column("checkpoint_id", Text, nullable=False),
    Column("parent_checkpoint_id", Text, nullable=True),
    # metadata["run_id"], copied out so that ``delete_for_runs`` reads an index
    Column("run_id", Text, nullable=True),
    # Storage, as ``hazel_checkpoints``: chain_len 0 is a full snapshot; otherwise the row holds what changed since
    # its parent (an RFC 6902 patch of the checkpoint's versions in ``payload``, the channels written and the
    # suffixes appended in ``channel_blob``), and loading reads back to the snapshot. chain_len > 0 counts the
    # changes back to the snapshot when the row was written (a bound once an ancestor was rewritten as one).
    Column("chain_len", Integer, nullable=False),
    Column("stored_bytes", Integer, nullable=False),
    Column("compressed", Boolean, nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("channel_type", String(32), nullable=True),
    Column("channel_blob", LargeBinary, nullable=True),
    Column("metadata", JSONDoc, nullable=False),
    # A random 63-bit number drawn at each write of the row's content (0 for rows older than migration 0009); a
    # change is stored only while its parent still has the stamp the writer decoded it with, so that a saver
    # holding a parent another saver has since re-put writes a snapshot instead of a change of the old content
    # (``store.lgraph_writer``). Rewriting a row as the same checkpoint (a change made a snapshot) keeps it.
    Column("stamp", BigInteger, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("thread_id", "checkpoint_ns", "checkpoint_id"),
    Index("ix_hazel_lg_checkpoints_run_id", "run_id"),
)

lg_writes = Table(
    "hazel_lg_writes",
    metadata,
    # A task's pending writes against a checkpoint (``put_writes``): what the next super-step applies.
    Column("thread_id", Text, nullable=False),
    Column("checkpoint_ns", Text, nullable=False),
    Column("checkpoint_id", Text, nullable=False),
    Column("task_id", Text, nullable=False),
    Column("idx", Integer, nullable=False),
    Column("channel", Text, nullable=False),
    Column("type", String(32), nullable=True),
    Column("blob", LargeBinary, nullable=True),
    Column("task_path", Text, nullable=False, default=""),
    PrimaryKeyConstraint("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
)

ALL_TABLES = (runs, checkpoints, steering_requests, decisions, events, outbox, run_counts, pending_counts,
              prunable_runs, lg_checkpoints, lg_writes)
