"""initial schema

Revision ID: 0001
Revises: 
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from store.schema import UTCDateTime

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('hazel_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=True),
    sa.Column('request_id', sa.Integer(), nullable=True),
    sa.Column('actor_id', sa.String(length=200), nullable=False),
    sa.Column('actor_name', sa.String(length=200), nullable=True),
    sa.Column('channel', sa.String(length=16), nullable=False),
    sa.Column('action', sa.String(length=64), nullable=False),
    sa.Column('detail', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hazel_events'))
    )
    with op.batch_alter_table('hazel_events', schema=None) as batch_op:
        batch_op.create_index('ix_hazel_events_run_id', ['run_id'], unique=False)

    op.create_table('hazel_outbox',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=True),
    sa.Column('request_id', sa.Integer(), nullable=True),
    sa.Column('channel', sa.String(length=200), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', UTCDateTime(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', UTCDateTime(), nullable=False),
    sa.Column('sent_at', UTCDateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hazel_outbox'))
    )
    with op.batch_alter_table('hazel_outbox', schema=None) as batch_op:
        batch_op.create_index('ix_hazel_outbox_status_next_attempt_at', ['status', 'next_attempt_at'], unique=False)

    op.create_table('hazel_runs',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('workflow', sa.String(length=200), nullable=False),
    sa.Column('workflow_version', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('head_seq', sa.Integer(), nullable=False),
    sa.Column('last_seq', sa.Integer(), nullable=False),
    sa.Column('branch', sa.Integer(), nullable=False),
    sa.Column('last_branch', sa.Integer(), nullable=False),
    sa.Column('started_by', sa.String(length=200), nullable=False),
    sa.Column('started_via', sa.String(length=16), nullable=False),
    sa.Column('created_at', UTCDateTime(), nullable=False),
    sa.Column('updated_at', UTCDateTime(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('wake_at', UTCDateTime(), nullable=True),
    sa.Column('lease_owner', sa.String(length=200), nullable=True),
    sa.Column('lease_token', sa.String(length=40), nullable=True),
    sa.Column('lease_expires_at', UTCDateTime(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('error_traceback', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hazel_runs'))
    )
    with op.batch_alter_table('hazel_runs', schema=None) as batch_op:
        batch_op.create_index('ix_hazel_runs_status_wake_at', ['status', 'wake_at'], unique=False)

    op.create_table('hazel_checkpoints',
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('parent_seq', sa.Integer(), nullable=True),
    sa.Column('branch', sa.Integer(), nullable=False),
    sa.Column('step', sa.String(length=200), nullable=False),
    sa.Column('next_step', sa.String(length=200), nullable=True),
    sa.Column('workflow_version', sa.Integer(), nullable=False),
    sa.Column('created_at', UTCDateTime(), nullable=False),
    sa.Column('base_seq', sa.Integer(), nullable=False),
    sa.Column('chain_len', sa.Integer(), nullable=False),
    sa.Column('stored_bytes', sa.Integer(), nullable=False),
    sa.Column('compressed', sa.Boolean(), nullable=False),
    sa.Column('payload', sa.LargeBinary(), nullable=False),
    sa.Column('decision_id', sa.Integer(), nullable=True),
    sa.Column('handoff', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['hazel_runs.id'], name=op.f('fk_hazel_checkpoints_run_id_hazel_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_id', 'seq', name=op.f('pk_hazel_checkpoints'))
    )
    op.create_table('hazel_decisions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('request_id', sa.Integer(), nullable=True),
    sa.Column('action', sa.String(length=16), nullable=False),
    sa.Column('actor_id', sa.String(length=200), nullable=False),
    sa.Column('actor_name', sa.String(length=200), nullable=True),
    sa.Column('channel', sa.String(length=16), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', UTCDateTime(), nullable=False),
    sa.Column('delivery_id', sa.String(length=200), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['hazel_runs.id'], name=op.f('fk_hazel_decisions_run_id_hazel_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hazel_decisions')),
    sa.UniqueConstraint('channel', 'delivery_id', name=op.f('uq_hazel_decisions_channel_delivery_id')),
    sa.UniqueConstraint('request_id', 'channel', 'actor_id', name=op.f('uq_hazel_decisions_request_id_channel_actor_id'))
    )
    with op.batch_alter_table('hazel_decisions', schema=None) as batch_op:
        batch_op.create_index('ix_hazel_decisions_run_id', ['run_id'], unique=False)

    op.create_table('hazel_steering_requests',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('checkpoint_seq', sa.Integer(), nullable=False),
    sa.Column('point', sa.String(length=200), nullable=False),
    sa.Column('title', sa.String(length=500), nullable=False),
    sa.Column('channel', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('approvals_required', sa.Integer(), nullable=False),
    sa.Column('approvals', sa.Integer(), nullable=False),
    sa.Column('created_at', UTCDateTime(), nullable=False),
    sa.Column('due_at', UTCDateTime(), nullable=True),
    sa.Column('decided_at', UTCDateTime(), nullable=True),
    sa.Column('decided_by', sa.String(length=200), nullable=True),
    sa.Column('decided_action', sa.String(length=16), nullable=True),
    sa.Column('message_ref', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('message_key', sa.String(length=200), nullable=True),
    sa.Column('escalated_at', UTCDateTime(), nullable=True),
    sa.Column('reminders_sent', sa.Integer(), nullable=False),
    sa.Column('next_action_at', UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['hazel_runs.id'], name=op.f('fk_hazel_steering_requests_run_id_hazel_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hazel_steering_requests'))
    )
    with op.batch_alter_table('hazel_steering_requests', schema=None) as batch_op:
        batch_op.create_index('ix_hazel_steering_requests_message_key', ['message_key'], unique=False)
        batch_op.create_index('ix_hazel_steering_requests_run_id', ['run_id'], unique=False)
        batch_op.create_index('ix_hazel_steering_requests_status', ['status'], unique=False)
        batch_op.create_index('ix_hazel_steering_requests_status_next_action_at', ['status', 'next_action_at'], unique=False)




def downgrade() -> None:

    with op.batch_alter_table('hazel_steering_requests', schema=None) as batch_op:
        batch_op.drop_index('ix_hazel_steering_requests_status_next_action_at')
        batch_op.drop_index('ix_hazel_steering_requests_status')
        batch_op.drop_index('ix_hazel_steering_requests_run_id')
        batch_op.drop_index('ix_hazel_steering_requests_message_key')

    op.drop_table('hazel_steering_requests')
    with op.batch_alter_table('hazel_decisions', schema=None) as batch_op:
        batch_op.drop_index('ix_hazel_decisions_run_id')

    op.drop_table('hazel_decisions')
    op.drop_table('hazel_checkpoints')
    with op.batch_alter_table('hazel_runs', schema=None) as batch_op:
        batch_op.drop_index('ix_hazel_runs_status_wake_at')

    op.drop_table('hazel_runs')
    with op.batch_alter_table('hazel_outbox', schema=None) as batch_op:
        batch_op.drop_index('ix_hazel_outbox_status_next_attempt_at')

    op.drop_table('hazel_outbox')
    with op.batch_alter_table('hazel_events', schema=None) as batch_op:
        batch_op.drop_index('ix_hazel_events_run_id')

    op.drop_table('hazel_events')

