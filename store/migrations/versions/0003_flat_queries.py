"""flat queries: indexes for listings and lookups; counters and the prunable-run list kept by triggers

Revision ID: 0003
Revises: 0002

What a person or a scrape asks must not cost more as the database grows:

- indexes: runs newest first (alone, by status, by workflow and status), a run's pending request, pending
  requests oldest first; the two indexes they replace (steering requests by run, by status) are dropped; a
  request's decisions (the unique index on request and person is partial, ``action <> 'rewind'``, and serves
  no lookup by request);
- ``hazel_run_counts``: runs per (workflow, version, status), in shards (PostgreSQL: 16, by a hash of the run
  id, so that concurrent writers rarely meet and a run's -1 and +1 land in the same shard; SQLite: one, it has
  one writer); ``hazel_pending_counts``: pending steering requests per creation minute, hour, 4 hours,
  day and in all (grain 60, 3600, 14400, 86400 and 0), with the sum of their creation times (seconds, and
  microseconds within the second), in the same shards; ``hazel_prunable_runs``: ended runs whose checkpoint
  history has not been compacted yet, by the time they ended. All three are kept exact by triggers, in the
  transaction that changes the rows they count; a trigger fires only when what it counts changes (a run's
  status, workflow or version; a request entering or leaving ``pending``), so a step that keeps its status
  pays nothing. On PostgreSQL a transaction counts in ONE shard, that of the first run it changes, whose
  transaction-level advisory lock (``pg_advisory_xact_lock(1214347884, shard)``) it takes first and holds to
  its end: only the holder of a shard's lock writes that shard's counter rows, and no transaction waits for a
  second shard lock while holding one, so two transactions never deadlock on counters, in whatever order their
  statements change runs and requests, one run or many at once (a run changed by a transaction that first
  changed another run is counted in that run's shard: each shard may drift, their sum is exact).
  TRUNCATE empties the counters too (statement triggers).
- existing rows are counted here, with the tables locked against writers.
"""
from alembic import op
import sqlalchemy as sa

from store.schema import UTCDateTime

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

ENDED = "('completed', 'failed', 'rejected', 'cancelled')"
GRAINS = (0, 60, 3600, 14400, 86400)
LOCK_CLASS = 1214347884  # "Hazl"
PG_SHARDS = 16

# -- SQLite ---------------------------------------------------------------------------------------------------

_SQLITE_GRAINS = " UNION ALL ".join(f"SELECT {g}" + (" AS grain" if i == 0 else "") for i, g in enumerate(GRAINS))


def _sqlite_run_count(row: str, delta: int) -> str:
    return (f"INSERT INTO hazel_run_counts (workflow, workflow_version, status, shard, n) "
            f"VALUES ({row}.workflow, {row}.workflow_version, {row}.status, 0, {delta}) "
            f"ON CONFLICT (workflow, workflow_version, status, shard) DO UPDATE SET n = n + excluded.n;")


def _sqlite_pending_count(row: str, delta: int) -> str:
    """``delta`` for the request ``row`` in each grain. SQLite keeps UTC as 'YYYY-MM-DD HH:MM:SS.ffffff': the
    seconds come from the first 19 characters (strftime would round the fraction to milliseconds first, and
    23:59:59.9999 to the next day), the microseconds from the last six."""
    return (f"INSERT INTO hazel_pending_counts (grain, bucket, shard, n, sec_sum, us_sum) "
            f"SELECT g.grain, CASE WHEN g.grain = 0 THEN 0 ELSE (t.sec / g.grain) * g.grain END, 0, {delta}, "
            f"{delta} * t.sec, {delta} * t.us "
            f"FROM (SELECT CAST(strftime('%s', substr({row}.created_at, 1, 19)) AS INTEGER) AS sec, "
            f"CAST(substr({row}.created_at, 21, 6) AS INTEGER) AS us) AS t, ({_SQLITE_GRAINS}) AS g WHERE true "
            f"ON CONFLICT (grain, bucket, shard) DO UPDATE SET n = n + excluded.n, "
            f"sec_sum = sec_sum + excluded.sec_sum, us_sum = us_sum + excluded.us_sum;")


_SQLITE_QUEUE_ENTER = (
    "INSERT INTO hazel_prunable_runs (run_id, ended_at) SELECT new.id, new.updated_at "
    f"WHERE new.status IN {ENDED} ON CONFLICT (run_id) DO UPDATE SET ended_at = excluded.ended_at;")

SQLITE_TRIGGERS = {
    "hazel_runs_counted_insert": f"""
        CREATE TRIGGER hazel_runs_counted_insert AFTER INSERT ON hazel_runs
        BEGIN
            {_sqlite_run_count('new', 1)}
            {_SQLITE_QUEUE_ENTER}
        END""",
    "hazel_runs_counted_update": f"""
        CREATE TRIGGER hazel_runs_counted_update AFTER UPDATE OF status, workflow, workflow_version ON hazel_runs
        WHEN old.status IS NOT new.status OR old.workflow IS NOT new.workflow
            OR old.workflow_version IS NOT new.workflow_version
        BEGIN
            {_sqlite_run_count('old', -1)}
            {_sqlite_run_count('new', 1)}
            DELETE FROM hazel_prunable_runs WHERE run_id = old.id AND old.status IS NOT new.status
                AND new.status NOT IN {ENDED};
            INSERT INTO hazel_prunable_runs (run_id, ended_at) SELECT new.id, new.updated_at
                WHERE new.status IN {ENDED} AND old.status IS NOT new.status
                ON CONFLICT (run_id) DO UPDATE SET ended_at = excluded.ended_at;
        END""",
    "hazel_runs_counted_delete": f"""
        CREATE TRIGGER hazel_runs_counted_delete AFTER DELETE ON hazel_runs
        BEGIN
            {_sqlite_run_count('old', -1)}
            DELETE FROM hazel_prunable_runs WHERE run_id = old.id;
        END""",
    "hazel_requests_counted_insert": f"""
        CREATE TRIGGER hazel_requests_counted_insert AFTER INSERT ON hazel_steering_requests
        WHEN new.status = 'pending'
        BEGIN
            {_sqlite_pending_count('new', 1)}
        END""",
    "hazel_requests_counted_leave": f"""
        CREATE TRIGGER hazel_requests_counted_leave AFTER UPDATE OF status, created_at ON hazel_steering_requests
        WHEN old.status = 'pending' AND (new.status IS NOT 'pending' OR old.created_at IS NOT new.created_at)
        BEGIN
            {_sqlite_pending_count('old', -1)}
        END""",
    "hazel_requests_counted_enter": f"""
        CREATE TRIGGER hazel_requests_counted_enter AFTER UPDATE OF status, created_at ON hazel_steering_requests
        WHEN new.status = 'pending' AND (old.status IS NOT 'pending' OR old.created_at IS NOT new.created_at)
        BEGIN
            {_sqlite_pending_count('new', 1)}
        END""",
    "hazel_requests_counted_delete": f"""
        CREATE TRIGGER hazel_requests_counted_delete AFTER DELETE ON hazel_steering_requests
        WHEN old.status = 'pending'
        BEGIN
            {_sqlite_pending_count('old', -1)}
        END""",
}

SQLITE_FILL = [
    "INSERT INTO hazel_run_counts (workflow, workflow_version, status, shard, n) "
    "SELECT workflow, workflow_version, status, 0, count(*) FROM hazel_runs "
    "GROUP BY workflow, workflow_version, status",
    "INSERT INTO hazel_pending_counts (grain, bucket, shard, n, sec_sum, us_sum) "
    "SELECT g.grain, CASE WHEN g.grain = 0 THEN 0 ELSE (t.sec / g.grain) * g.grain END AS b, 0, count(*), "
    "sum(t.sec), sum(t.us) FROM (SELECT CAST(strftime('%s', substr(created_at, 1, 19)) AS INTEGER) AS sec, "
    "CAST(substr(created_at, 21, 6) AS INTEGER) AS us FROM hazel_steering_requests WHERE status = 'pending') AS t, "
    f"({_SQLITE_GRAINS}) AS g GROUP BY g.grain, b",
]

# -- PostgreSQL -----------------------------------------------------------------------------------------------

# The shard a transaction counts in: that of the first run it changes (a hash of its id, modulo 16; hashtext,
# not md5, which FIPS builds refuse), remembered in a transaction-local setting, its advisory lock taken then
# and held to the end of the transaction; later changes in the same transaction reuse it (no query).
_PG_SHARD = f"""
            s := nullif(current_setting('hazel.counter_shard', true), '')::integer;
            IF s IS NULL THEN
                s := hazel_shard({{run_id}});
                PERFORM set_config('hazel.counter_shard', s::text, true), pg_advisory_xact_lock({LOCK_CLASS}, s);
            END IF;"""

PG_FUNCTIONS = [
    f"""CREATE FUNCTION hazel_shard(run_id text) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $$ SELECT hashtext(run_id) & {PG_SHARDS - 1} $$""",
    f"""CREATE FUNCTION hazel_runs_counted() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            s integer;
        BEGIN{_PG_SHARD.format(run_id="CASE WHEN TG_OP = 'INSERT' THEN NEW.id ELSE OLD.id END")}
            IF TG_OP = 'UPDATE' THEN  -- one statement for the -1 and the +1 (the trigger's WHEN: two keys)
                INSERT INTO hazel_run_counts AS c (workflow, workflow_version, status, shard, n)
                VALUES (OLD.workflow, OLD.workflow_version, OLD.status, s, -1),
                       (NEW.workflow, NEW.workflow_version, NEW.status, s, 1)
                ON CONFLICT (workflow, workflow_version, status, shard) DO UPDATE SET n = c.n + excluded.n;
            ELSIF TG_OP = 'INSERT' THEN
                INSERT INTO hazel_run_counts AS c (workflow, workflow_version, status, shard, n)
                VALUES (NEW.workflow, NEW.workflow_version, NEW.status, s, 1)
                ON CONFLICT (workflow, workflow_version, status, shard) DO UPDATE SET n = c.n + excluded.n;
            ELSE
                INSERT INTO hazel_run_counts AS c (workflow, workflow_version, status, shard, n)
                VALUES (OLD.workflow, OLD.workflow_version, OLD.status, s, -1)
                ON CONFLICT (workflow, workflow_version, status, shard) DO UPDATE SET n = c.n + excluded.n;
                RETURN NULL;
            END IF;
            IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
                IF NEW.status IN {ENDED} THEN
                    INSERT INTO hazel_prunable_runs AS q (run_id, ended_at) VALUES (NEW.id, NEW.updated_at)
                    ON CONFLICT (run_id) DO UPDATE SET ended_at = excluded.ended_at;
                ELSIF TG_OP = 'UPDATE' AND OLD.status IN {ENDED} THEN
                    DELETE FROM hazel_prunable_runs WHERE run_id = OLD.id;
                END IF;
            END IF;
            RETURN NULL;
        END $$""",
    # a request leaving pending counts -1 in every grain for its creation time, one entering +1 (both when its
    # creation time or run changes while pending)
    f"""CREATE FUNCTION hazel_requests_counted() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            s integer;
            delta integer;
            us bigint;
            sec bigint;
        BEGIN{_PG_SHARD.format(run_id="CASE WHEN TG_OP = 'INSERT' THEN NEW.run_id ELSE OLD.run_id END")}
            FOR step IN 1..2 LOOP
                IF step = 1 AND TG_OP <> 'INSERT' AND OLD.status = 'pending' THEN
                    delta := -1;
                    us := (extract(epoch FROM OLD.created_at) * 1000000)::bigint;
                ELSIF step = 2 AND TG_OP <> 'DELETE' AND NEW.status = 'pending' THEN
                    delta := 1;
                    us := (extract(epoch FROM NEW.created_at) * 1000000)::bigint;
                ELSE
                    CONTINUE;
                END IF;
                sec := floor(us / 1000000.0)::bigint;
                INSERT INTO hazel_pending_counts AS c (grain, bucket, shard, n, sec_sum, us_sum)
                SELECT g, CASE WHEN g = 0 THEN 0 ELSE (sec / g) * g END, s, delta, delta * sec,
                       delta * (us - sec * 1000000)
                FROM unnest(ARRAY{list(GRAINS)}) AS g
                ON CONFLICT (grain, bucket, shard) DO UPDATE SET n = c.n + excluded.n,
                    sec_sum = c.sec_sum + excluded.sec_sum, us_sum = c.us_sum + excluded.us_sum;
            END LOOP;
            RETURN NULL;
        END $$""",
    """CREATE FUNCTION hazel_counts_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_TABLE_NAME = 'hazel_runs' THEN
                DELETE FROM hazel_run_counts;
                DELETE FROM hazel_prunable_runs;
            ELSE
                DELETE FROM hazel_pending_counts;
            END IF;
            RETURN NULL;
        END $$""",
]

PG_TRIGGERS = {
    "hazel_runs_counted_insert": "AFTER INSERT ON hazel_runs FOR EACH ROW EXECUTE FUNCTION hazel_runs_counted()",
    "hazel_runs_counted_update": (
        "AFTER UPDATE OF status, workflow, workflow_version ON hazel_runs FOR EACH ROW "
        "WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.workflow IS DISTINCT FROM NEW.workflow "
        "OR OLD.workflow_version IS DISTINCT FROM NEW.workflow_version) EXECUTE FUNCTION hazel_runs_counted()"),
    "hazel_runs_counted_delete": "AFTER DELETE ON hazel_runs FOR EACH ROW EXECUTE FUNCTION hazel_runs_counted()",
    "hazel_runs_counted_truncate": (
        "AFTER TRUNCATE ON hazel_runs FOR EACH STATEMENT EXECUTE FUNCTION hazel_counts_truncated()"),
    "hazel_requests_counted_insert": (
        "AFTER INSERT ON hazel_steering_requests FOR EACH ROW WHEN (NEW.status = 'pending') "
        "EXECUTE FUNCTION hazel_requests_counted()"),
    "hazel_requests_counted_update": (
        "AFTER UPDATE OF status, created_at, run_id ON hazel_steering_requests FOR EACH ROW "
        "WHEN ((OLD.status = 'pending' OR NEW.status = 'pending') AND (OLD.status IS DISTINCT FROM NEW.status "
        "OR OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.run_id IS DISTINCT FROM NEW.run_id)) "
        "EXECUTE FUNCTION hazel_requests_counted()"),
    "hazel_requests_counted_delete": (
        "AFTER DELETE ON hazel_steering_requests FOR EACH ROW WHEN (OLD.status = 'pending') "
        "EXECUTE FUNCTION hazel_requests_counted()"),
    "hazel_requests_counted_truncate": (
        "AFTER TRUNCATE ON hazel_steering_requests FOR EACH STATEMENT EXECUTE FUNCTION hazel_counts_truncated()"),
}

PG_FILL = [
    "INSERT INTO hazel_run_counts (workflow, workflow_version, status, shard, n) "
    "SELECT workflow, workflow_version, status, hazel_shard(id), count(*) FROM hazel_runs GROUP BY 1, 2, 3, 4",
    "INSERT INTO hazel_pending_counts (grain, bucket, shard, n, sec_sum, us_sum) "
    "SELECT g, CASE WHEN g = 0 THEN 0 ELSE (t.sec / g) * g END, t.s, count(*), sum(t.sec), sum(t.us - t.sec * 1000000) "
    "FROM (SELECT hazel_shard(run_id) AS s, floor(u / 1000000.0)::bigint AS sec, u AS us "
    "      FROM (SELECT run_id, (extract(epoch FROM created_at) * 1000000)::bigint AS u "
    "            FROM hazel_steering_requests WHERE status = 'pending') AS p) AS t, "
    f"unnest(ARRAY{list(GRAINS)}) AS g GROUP BY 1, 2, 3",
]

PRUNABLE_FILL = (
    "INSERT INTO hazel_prunable_runs (run_id, ended_at) SELECT r.id, r.updated_at FROM hazel_runs r "
    f"WHERE r.status IN {ENDED} AND EXISTS (SELECT 1 FROM hazel_checkpoints c "
    "WHERE c.run_id = r.id AND c.seq <> r.head_seq)")


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    if pg:  # no writer may slip between the counting below and the triggers taking over
        op.execute("LOCK TABLE hazel_runs, hazel_steering_requests IN SHARE ROW EXCLUSIVE MODE")

    op.create_index('ix_hazel_runs_created_at_id', 'hazel_runs', [sa.text('created_at DESC'), 'id'])
    op.create_index('ix_hazel_runs_status_created_at_id', 'hazel_runs',
                    ['status', sa.text('created_at DESC'), 'id'])
    op.create_index('ix_hazel_runs_workflow_status_created_at_id', 'hazel_runs',
                    ['workflow', 'status', sa.text('created_at DESC'), 'id'])
    op.drop_index('ix_hazel_steering_requests_run_id', table_name='hazel_steering_requests')
    op.drop_index('ix_hazel_steering_requests_status', table_name='hazel_steering_requests')
    op.create_index('ix_hazel_steering_requests_run_id_status_id', 'hazel_steering_requests',
                    ['run_id', 'status', 'id'])
    op.create_index('ix_hazel_steering_requests_status_created_at_id', 'hazel_steering_requests',
                    ['status', 'created_at', 'id'])
    op.create_index('ix_hazel_decisions_request_id_person', 'hazel_decisions', ['request_id', 'person'])

    op.create_table(
        'hazel_run_counts',
        sa.Column('workflow', sa.String(length=200), nullable=False),
        sa.Column('workflow_version', sa.Integer(), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('shard', sa.Integer(), nullable=False),
        sa.Column('n', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('workflow', 'workflow_version', 'status', 'shard', name=op.f('pk_hazel_run_counts')),
    )
    op.create_table(
        'hazel_pending_counts',
        sa.Column('grain', sa.Integer(), nullable=False),
        sa.Column('bucket', sa.BigInteger(), nullable=False),
        sa.Column('shard', sa.Integer(), nullable=False),
        sa.Column('n', sa.BigInteger(), nullable=False),
        sa.Column('sec_sum', sa.BigInteger(), nullable=False),
        sa.Column('us_sum', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('grain', 'bucket', 'shard', name=op.f('pk_hazel_pending_counts')),
    )
    op.create_table(
        'hazel_prunable_runs',
        sa.Column('run_id', sa.String(length=32), nullable=False),
        sa.Column('ended_at', UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['run_id'], ['hazel_runs.id'],
                                name=op.f('fk_hazel_prunable_runs_run_id_hazel_runs'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('run_id', name=op.f('pk_hazel_prunable_runs')),
    )
    op.create_index('ix_hazel_prunable_runs_ended_at_run_id', 'hazel_prunable_runs', ['ended_at', 'run_id'])

    if pg:
        for table in ("hazel_run_counts", "hazel_pending_counts"):  # room on each page for HOT updates
            op.execute(f"ALTER TABLE {table} SET (fillfactor = 50)")
        for ddl in PG_FUNCTIONS:
            op.execute(ddl)
        for name, body in PG_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {body}")
        fill = PG_FILL
    else:
        for ddl in SQLITE_TRIGGERS.values():
            op.execute(ddl)
        fill = SQLITE_FILL
    for statement in [*fill, PRUNABLE_FILL]:
        op.execute(statement)


def downgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    if pg:
        for name in PG_TRIGGERS:
            table = "hazel_runs" if name.startswith("hazel_runs") else "hazel_steering_requests"
            op.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        for fn in ("hazel_counts_truncated()", "hazel_requests_counted()", "hazel_runs_counted()",
                   "hazel_shard(text)"):
            op.execute(f"DROP FUNCTION IF EXISTS {fn}")
    else:
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_index('ix_hazel_prunable_runs_ended_at_run_id', table_name='hazel_prunable_runs')
    op.drop_table('hazel_prunable_runs')
    op.drop_table('hazel_pending_counts')
    op.drop_table('hazel_run_counts')
    op.drop_index('ix_hazel_decisions_request_id_person', table_name='hazel_decisions')
    op.drop_index('ix_hazel_steering_requests_status_created_at_id', table_name='hazel_steering_requests')
    op.drop_index('ix_hazel_steering_requests_run_id_status_id', table_name='hazel_steering_requests')
    op.create_index('ix_hazel_steering_requests_status', 'hazel_steering_requests', ['status'])
    op.create_index('ix_hazel_steering_requests_run_id', 'hazel_steering_requests', ['run_id'])
    op.drop_index('ix_hazel_runs_workflow_status_created_at_id', table_name='hazel_runs')
    op.drop_index('ix_hazel_runs_status_created_at_id', table_name='hazel_runs')
    op.drop_index('ix_hazel_runs_created_at_id', table_name='hazel_runs')
