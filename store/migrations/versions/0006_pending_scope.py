"""pending scope: a steering request names its run's workflow and version and who may decide it

Revision ID: 0006
Revises: 0005

"Waiting on me" (``Hazel.waiting_on``) read the 500 oldest pending requests and checked each in Python, so a
person whose requests came after them never saw them. It now finds the distinct places requests wait at
(workflow, version, steering point, permission key, channel: ``store.waiting``), decides once per place
whether the person may decide there, and reads only the pending requests of those places, oldest first. So a
request carries:

- ``workflow``, ``workflow_version``: its run's (kept equal when a waiting run migrates: ``RequestRepo.repoint``);
- ``point_key``: ``''`` for a point of a native workflow (its definition is the registered one), a digest of the
  permission settings of a point asked at run time (a LangGraph ``steer()``: ``permissions.permission_key``),
  ``'*'`` when unknown (the requests before this revision: each is checked on its own, as before);
- the index ``ix_hazel_steering_requests_status_place``: the status, those, the point and the channel, then
  ``created_at, id`` (not a partial index over pending requests: SQLite, without statistics, prefers the
  index on ``status, created_at, id`` to it and sorts).

Existing requests take their run's workflow and version here.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

INDEX = 'ix_hazel_steering_requests_status_place'


def upgrade() -> None:
    op.add_column('hazel_steering_requests',
                  sa.Column('workflow', sa.String(200), nullable=False, server_default=''))
    op.add_column('hazel_steering_requests',
                  sa.Column('workflow_version', sa.Integer(), nullable=False, server_default='0'))
    op.add_column('hazel_steering_requests',
                  sa.Column('point_key', sa.String(32), nullable=False, server_default='*'))
    op.execute("UPDATE hazel_steering_requests SET "
               "workflow = (SELECT r.workflow FROM hazel_runs AS r WHERE r.id = hazel_steering_requests.run_id), "
               "workflow_version = (SELECT r.workflow_version FROM hazel_runs AS r "
               "WHERE r.id = hazel_steering_requests.run_id) "
               "WHERE EXISTS (SELECT 1 FROM hazel_runs AS r WHERE r.id = hazel_steering_requests.run_id)")
    op.create_index(INDEX, 'hazel_steering_requests', ['status', 'workflow', 'workflow_version', 'point',
                                                       'point_key', 'channel', 'created_at', 'id'])


def downgrade() -> None:
    op.drop_index(INDEX, table_name='hazel_steering_requests')
    for column in ('point_key', 'workflow_version', 'workflow'):
        op.drop_column('hazel_steering_requests', column)
