"""The million-row ``jobs`` table of the recovery-at-scale tests
(tests/integration/test_recovery_scale.py): its shape, and the database that holds it.

The table lives in a dedicated database (the test database's name + ``_scale``, beside it),
generated once with one ``INSERT … SELECT generate_series`` and reused by later runs while
its row count and shape are right. Each run resets the handful of rows a sweep changes."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from tests.support.databases import ensure_database, sibling_url

ROWS = 1_000_000

# Shape of the table, by i = 1..ROWS (everything else is completed):
#   i % 1000 = 1   → processing with a stale heartbeat (task 'scale_stale'), 1,000 rows,
#                    of which i % 4000 = 1 have no retry left (→ dead on recovery)
#   i % 1000 = 2   → processing with a fresh heartbeat (task 'scale_fresh'), untouched
#   i % 1000 = 3   → dead (the DLQ), 1,000 rows
#   i % 500  = 4   → queued (2,000 rows): half due now, half due in a day
STALE = ROWS // 1000
STALE_EXHAUSTED = ROWS // 4000
DEAD = ROWS // 1000
QUEUED = ROWS // 500
QUEUED_DUE = QUEUED // 2

GENERATE = """
INSERT INTO jobs (id, task, payload, status, attempts, max_retries, lease_token, worker_id,
                  heartbeat_at, run_at, result, last_error, created_at, started_at,
                  finished_at, updated_at)
SELECT gen_random_uuid(),
       CASE WHEN i %% 1000 = 1 THEN 'scale_stale' WHEN i %% 1000 = 2 THEN 'scale_fresh'
            ELSE 'echo' END,
       '{"n": 1}'::jsonb,
       CASE WHEN i %% 1000 IN (1, 2) THEN 'processing' WHEN i %% 1000 = 3 THEN 'dead'
            WHEN i %% 500 = 4 THEN 'queued' ELSE 'completed' END,
       CASE WHEN i %% 500 = 4 THEN 0 WHEN i %% 4000 = 1 THEN 4 ELSE 1 END,
       3,
       CASE WHEN i %% 1000 IN (1, 2) THEN gen_random_uuid() END,
       CASE WHEN i %% 500 = 4 THEN NULL ELSE 'scale-worker' END,
       CASE WHEN i %% 1000 = 1 THEN now() - interval '1 hour'
            WHEN i %% 1000 = 2 THEN now() + interval '100 years' END,
       CASE WHEN i %% 500 = 4 AND (i / 500) %% 2 = 0 THEN now() + interval '1 day'
            ELSE now() - make_interval(secs => i) END,
       CASE WHEN i %% 1000 > 3 AND i %% 500 <> 4 THEN '{"n": 1}'::jsonb END,
       CASE WHEN i %% 1000 = 3 THEN 'boom' END,
       now() - make_interval(secs => i), now() - make_interval(secs => i),
       CASE WHEN i %% 1000 IN (1, 2) OR i %% 500 = 4 THEN NULL
            ELSE now() - make_interval(secs => i) END,
       now()
  FROM generate_series(1, %(rows)s) AS i
 ORDER BY 1
"""

# Before each run: the stale rows a previous sweep moved go back to processing/stale.
RESET = """
UPDATE jobs
   SET status = 'processing', lease_token = gen_random_uuid(), worker_id = 'scale-worker',
       heartbeat_at = now() - interval '1 hour', finished_at = NULL, last_error = NULL,
       attempts = CASE WHEN attempt_base = 0 AND max_retries = 3 AND attempts >= 4
                       THEN 4 ELSE attempts END
 WHERE task = 'scale_stale' AND status <> 'processing'
"""

# The table is written by hand, finished_at backdated: count it afresh, as a fold would.
RECOUNT = [
    "DELETE FROM job_counts",
    "UPDATE job_counts_folded SET folded_to = now()",
    """INSERT INTO job_counts (queue, status, n)
       SELECT queue, status, count(*) FROM jobs
        WHERE status IN ('completed', 'cancelled')
          AND finished_at <= (SELECT folded_to FROM job_counts_folded)
        GROUP BY queue, status""",
]

SHAPE = """
SELECT count(*) AS total,
       count(*) FILTER (WHERE task = 'scale_stale') AS stale,
       count(*) FILTER (WHERE task = 'scale_stale' AND attempts >= 4) AS exhausted,
       count(*) FILTER (WHERE status = 'dead' AND task = 'echo') AS dead,
       count(*) FILTER (WHERE status = 'queued' AND task = 'echo') AS queued,
       count(*) FILTER (WHERE status = 'queued' AND task = 'echo' AND run_at <= now()) AS due
  FROM jobs
"""


SECONDARY_INDEXES = """
SELECT i.indexname, i.indexdef FROM pg_indexes i
 WHERE i.schemaname = current_schema() AND i.tablename = 'jobs'
   AND i.indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = 'jobs'::regclass)
"""


def scale_url() -> str:
    return sibling_url("scale")


def shape_ok(conn: psycopg.Connection[Any]) -> bool:
    shape = conn.execute(SHAPE).fetchone()
    return shape == (ROWS, STALE, STALE_EXHAUSTED, DEAD, QUEUED, QUEUED_DUE)


def prepare() -> str:
    """The scale database, migrated, holding the table in its shape; its URL."""
    from asyncz.store.migrations import apply_migrations

    url = scale_url()
    ensure_database(url)
    apply_migrations(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RESET)
        if not shape_ok(conn):
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = off")
                conn.execute(
                    "TRUNCATE jobs, job_steps, job_gathers, job_attempts, job_dependencies"
                )
                # the migrations' indexes, built once over the million rows rather than kept
                # up row by row (the constraints' own, the primary key's, stay): half the time
                indexes = conn.execute(SECONDARY_INDEXES).fetchall()
                for name, _ in indexes:
                    conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
                conn.execute(GENERATE, {"rows": ROWS})
                for _, definition in indexes:
                    conn.execute(definition)
            assert shape_ok(conn), "generated table has the wrong shape"
            conn.execute("VACUUM ANALYZE jobs")
        else:
            conn.execute("ANALYZE jobs")
        with conn.transaction():
            for statement in RECOUNT:
                conn.execute(statement)
    return url
