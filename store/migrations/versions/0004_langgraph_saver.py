"""langgraph saver: LangGraph's checkpoints and pending writes (hazel.langgraph.HazelSaver)

Revision ID: 0004
Revises: 0003

``hazel_lg_checkpoints`` holds one row per LangGraph checkpoint, stored as Hazel stores a run's state: a full
snapshot, or what changed since its parent (store/lgraph.py); ``hazel_lg_writes`` holds the pending writes of
tasks against a checkpoint.
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    op.create_table(
        'hazel_lg_checkpoints',
        sa.Column('thread_id', sa.Text(), nullable=False),
        sa.Column('checkpoint_ns', sa.Text(), nullable=False),
        sa.Column('checkpoint_id', sa.Text(), nullable=False),
        sa.Column('parent_checkpoint_id', sa.Text(), nullable=True),
        sa.Column('run_id', sa.Text(), nullable=True),
        sa.Column('chain_len', sa.Integer(), nullable=False),
        sa.Column('stored_bytes', sa.Integer(), nullable=False),
        sa.Column('compressed', sa.Boolean(), nullable=False),
        sa.Column('payload', sa.LargeBinary(), nullable=False),
        sa.Column('channel_type', sa.String(length=32), nullable=True),
        sa.Column('channel_blob', sa.LargeBinary(), nullable=True),
        sa.Column('metadata', _JSON, nullable=False),
        sa.PrimaryKeyConstraint('thread_id', 'checkpoint_ns', 'checkpoint_id', name=op.f('pk_hazel_lg_checkpoints')),
    )
    op.create_index('ix_hazel_lg_checkpoints_run_id', 'hazel_lg_checkpoints', ['run_id'])
    op.create_table(
        'hazel_lg_writes',
        sa.Column('thread_id', sa.Text(), nullable=False),
        sa.Column('checkpoint_ns', sa.Text(), nullable=False),
        sa.Column('checkpoint_id', sa.Text(), nullable=False),
        sa.Column('task_id', sa.Text(), nullable=False),
        sa.Column('idx', sa.Integer(), nullable=False),
        sa.Column('channel', sa.Text(), nullable=False),
        sa.Column('type', sa.String(length=32), nullable=True),
        sa.Column('blob', sa.LargeBinary(), nullable=True),
        sa.Column('task_path', sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint('thread_id', 'checkpoint_ns', 'checkpoint_id', 'task_id', 'idx',
                                name=op.f('pk_hazel_lg_writes')),
    )


def downgrade() -> None:
    op.drop_table('hazel_lg_writes')
    op.drop_index('ix_hazel_lg_checkpoints_run_id', table_name='hazel_lg_checkpoints')
    op.drop_table('hazel_lg_checkpoints')
