"""fewer index pages per resume: the run listings' status indexes leave out running runs; one index on decisions

Revision ID: 0007
Revises: 0006

A run's status change moves its entry in each index that holds the status, often from one leaf to another: on
SQLite every leaf is a page its commit writes (about 15 µs each on a VM disk at ``synchronous=FULL``,
``bench/README.md``), on PostgreSQL an entry its non-HOT update inserts. A resume moves a run from ``waiting``
to ``running`` to ``completed``; the two listing indexes by status (``ix_hazel_runs_status_created_at_id``,
``ix_hazel_runs_workflow_status_created_at_id``) now leave out ``running`` runs (partial indexes), so that a
resume removes the run's ``waiting`` entry and adds its ``completed`` one, and nothing in between: 41.5 → 36
pages per resume on SQLite. The listings say ``status <> 'running'`` for every other status (``store.listing``:
SQLite uses a partial index only for a query that states its condition), and list running runs through
``ix_hazel_runs_status_wake_at``, sorting them: as many as there are runs in flight, whatever the size of the
database.

It also drops ``ix_hazel_decisions_request_id_person``, the twin of the partial unique index on the same columns
(``uq_hazel_decisions_request_id_person``, votes only): one person's vote is read on the unique one (the query
says ``action <> 'rewind'``), a request's decisions among its run's (``ix_hazel_decisions_run_id``). One page
fewer in every decision's commit on SQLite.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

LISTED = "status <> 'running'"
INDEXES = {
    'ix_hazel_runs_status_created_at_id': ['status', sa.text('created_at DESC'), 'id'],
    'ix_hazel_runs_workflow_status_created_at_id': ['workflow', 'status', sa.text('created_at DESC'), 'id'],
}


def _create(partial: bool) -> None:
    where = {'sqlite_where': sa.text(LISTED), 'postgresql_where': sa.text(LISTED)} if partial else {}
    for name, columns in INDEXES.items():
        op.create_index(name, 'hazel_runs', columns, **where)


TWIN = 'ix_hazel_decisions_request_id_person'


def upgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name='hazel_runs')
    _create(partial=True)
    op.drop_index(TWIN, table_name='hazel_decisions')


def downgrade() -> None:
    op.create_index(TWIN, 'hazel_decisions', ['request_id', 'person'])
    for name in INDEXES:
        op.drop_index(name, table_name='hazel_runs')
    _create(partial=False)
