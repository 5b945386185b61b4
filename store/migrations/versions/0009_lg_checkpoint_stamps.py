"""LangGraph checkpoint stamps: a saver never writes a change against a parent another saver re-put

Revision ID: 0009
Revises: 0008

``hazel_lg_checkpoints.stamp`` is a random 63-bit number drawn at each write of a row's content. ``HazelSaver``
writes a checkpoint as a change of its parent only while the parent still holds the stamp the saver decoded it
with (checked in the INSERT's own statement); when another saver on the same database has re-put the parent
since (LangGraph's ``put`` of an id already stored replaces it), the change is refused and the checkpoint is
written whole. Existing rows get stamp 0, which a saver holding them decoded as well. The downgrade drops the
column: savers of the older Hazel compare no stamp (their limit: README, LangGraph "Limits").
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('hazel_lg_checkpoints',
                  sa.Column('stamp', sa.BigInteger(), nullable=False, server_default=sa.text('0')))


def downgrade() -> None:
    op.drop_column('hazel_lg_checkpoints', 'stamp')
