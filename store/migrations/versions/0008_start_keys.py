"""start keys: a start sent with an idempotency key makes one run

Revision ID: 0008
Revises: 0007

``POST /api/runs`` honours an ``Idempotency-Key`` (scoped to the calling token, as a decision's is): the same
caller sending the same key again gets the run the first request started, also when both arrive at once. A run
started so keeps the SHA-256 (hex) of that key in ``hazel_runs.start_key`` (null for every other run), and the
partial unique index ``uq_hazel_runs_started_via_start_key`` on ``(started_via, start_key)`` (over keyed runs
only) lets one of two such starts commit: the other's insert fails, and it answers with the run that did.
Existing runs have no key. The downgrade drops the index and the column (a later start with a key used before
the downgrade then starts a new run, as it did before this revision).
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

INDEX = 'uq_hazel_runs_started_via_start_key'
KEYED = "start_key IS NOT NULL"


def upgrade() -> None:
    op.add_column('hazel_runs', sa.Column('start_key', sa.String(64), nullable=True))
    op.create_index(INDEX, 'hazel_runs', ['started_via', 'start_key'], unique=True,
                    sqlite_where=sa.text(KEYED), postgresql_where=sa.text(KEYED))


def downgrade() -> None:
    op.drop_index(INDEX, table_name='hazel_runs')
    op.drop_column('hazel_runs', 'start_key')
