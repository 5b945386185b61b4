"""people: decisions are unique per person per request; runs and audit events record the person

Revision ID: 0002
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

# Rows written before people existed: a console or API name is its own person, any other identity is
# "<channel>:<id>" (the same key bot.engine.people gives an identity no person claims).
_PERSON_OF = ("CASE WHEN {channel} IN ('console', 'api') THEN {id} "
              "ELSE {channel} || ':' || {id} END")


def upgrade() -> None:
    with op.batch_alter_table('hazel_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('started_by_person', sa.String(length=200), nullable=True))
    op.execute("UPDATE hazel_runs SET started_by_person = "
               + _PERSON_OF.format(channel="started_via", id="started_by"))

    with op.batch_alter_table('hazel_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('person', sa.String(length=200), nullable=True))
    op.execute("UPDATE hazel_events SET person = " + _PERSON_OF.format(channel="channel", id="actor_id"))

    with op.batch_alter_table('hazel_decisions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('person', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('acting_for', sa.String(length=200), nullable=True))
    op.execute("UPDATE hazel_decisions SET person = " + _PERSON_OF.format(channel="channel", id="actor_id"))
    # Two votes of one person on one request, recorded before people existed (a console and an API name that
    # are the same string): the later ones keep their rows under a person of their own.
    op.execute("UPDATE hazel_decisions SET person = person || '#' || id WHERE action <> 'rewind' AND id NOT IN "
               "(SELECT min(id) FROM hazel_decisions WHERE action <> 'rewind' GROUP BY request_id, person)")
    with op.batch_alter_table('hazel_decisions', schema=None) as batch_op:
        batch_op.alter_column('person', existing_type=sa.String(length=200), nullable=False)
        batch_op.drop_constraint('uq_hazel_decisions_request_id_channel_actor_id', type_='unique')
    # One decision per person per request; a rewind is no vote (whoever voted may still fork the run).
    op.create_index('uq_hazel_decisions_request_id_person', 'hazel_decisions', ['request_id', 'person'],
                    unique=True, sqlite_where=sa.text("action <> 'rewind'"),
                    postgresql_where=sa.text("action <> 'rewind'"))


def downgrade() -> None:
    op.drop_index('uq_hazel_decisions_request_id_person', table_name='hazel_decisions')
    with op.batch_alter_table('hazel_decisions', schema=None) as batch_op:
        batch_op.create_unique_constraint('uq_hazel_decisions_request_id_channel_actor_id',
                                          ['request_id', 'channel', 'actor_id'])
        batch_op.drop_column('acting_for')
        batch_op.drop_column('person')
    with op.batch_alter_table('hazel_events', schema=None) as batch_op:
        batch_op.drop_column('person')
    with op.batch_alter_table('hazel_runs', schema=None) as batch_op:
        batch_op.drop_column('started_by_person')
