-- Suspended durable jobs (docs/durable.md, "Sleep"): a job whose task sleeps gives up its
-- attempt and waits in PostgreSQL, status 'suspended', until run_at (its wake time); the
-- wake is a new claim of the row. A suspended job is live: it is counted, listed, held by
-- its unique key, waited on by its children and cancelled at once.
--
-- suspensions: attempts that ended suspended (a wake is an attempt, not a try: the tries
--   counted against max_retries are attempts - attempt_base - suspensions).
-- first_started_at: the start of the job's first attempt, kept across its suspensions
--   (started_at is the running attempt's start, as before).
-- suspended_for: what a suspended job waits for, in words (shown as waiting_for).
-- The checks are replaced NOT VALID: every existing row satisfies the wider ones.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('waiting', 'queued', 'processing', 'suspended', 'completed', 'dead',
                      'cancelled')) NOT VALID;
ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_outcome_check;
ALTER TABLE job_attempts ADD CONSTRAINT job_attempts_outcome_check
    CHECK (outcome IN ('completed', 'failed', 'timed_out', 'lost', 'cancelled', 'suspended'))
    NOT VALID;
ALTER TABLE jobs
    ADD COLUMN suspensions      integer NOT NULL DEFAULT 0,
    ADD COLUMN first_started_at timestamptz,
    ADD COLUMN suspended_for    text;
ALTER TABLE jobs ADD CONSTRAINT jobs_suspended_for_check
    CHECK (length(suspended_for) <= 500) NOT VALID;

-- Recovery's scan for due suspended jobs Redis lost (scan_due_suspended), and the
-- listings of suspended jobs (a status filter; ?task= / ?queue= without one), each along
-- a partial index that holds the suspended rows only: plain jobs never enter them.
CREATE INDEX jobs_suspended_run_at_idx ON jobs (run_at, id) WHERE status = 'suspended';
CREATE INDEX jobs_suspended_idx ON jobs (created_at DESC, id DESC) WHERE status = 'suspended';
CREATE INDEX jobs_task_suspended_idx ON jobs (task, created_at DESC, id DESC)
    WHERE status = 'suspended';
CREATE INDEX jobs_queue_suspended_idx ON jobs (queue, created_at DESC, id DESC)
    WHERE status = 'suspended';

-- The live counts (migration 0013) count suspended jobs too.
ALTER TABLE job_live_counts DROP CONSTRAINT job_live_counts_status_check;
ALTER TABLE job_live_counts ADD CONSTRAINT job_live_counts_status_check
    CHECK (status IN ('waiting', 'queued', 'processing', 'suspended', 'dead'));

CREATE OR REPLACE FUNCTION asyncz_count_added_or_gone_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_changes (queue, status, n)
    SELECT queue, status, CASE TG_OP WHEN 'DELETE' THEN -count(*) ELSE count(*) END
      FROM changed
     WHERE status IN ('waiting', 'queued', 'processing', 'suspended', 'dead')
     GROUP BY queue, status;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION asyncz_count_updated_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_changes (queue, status, n)
    SELECT queue, status, sum(n) FROM (
        SELECT queue, status, -1 AS n FROM old_rows
         WHERE status IN ('waiting', 'queued', 'processing', 'suspended', 'dead')
        UNION ALL
        SELECT queue, status, 1 FROM new_rows
         WHERE status IN ('waiting', 'queued', 'processing', 'suspended', 'dead')
    ) d
     GROUP BY queue, status
    HAVING sum(n) <> 0;
    RETURN NULL;
END
$$;

-- A suspended job holds its unique key as a running one does ('queued_or_running'). The
-- hold index is rebuilt under a new name with the wider predicate (sql/unique.sql repeats
-- it); the old one stays, so the previous release's debounced submit (its ON CONFLICT names
-- the old predicate) still finds its index during a deploy. Every row the old predicate
-- holds, the new one holds too, so the new index alone decides for this release. A later
-- release drops jobs_unique_hold_idx once no earlier api runs.
CREATE UNIQUE INDEX jobs_unique_live_hold_idx ON jobs (unique_key)
 WHERE unique_key IS NOT NULL AND attempt_base = 0
   AND CASE unique_scope
         WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
         WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing', 'suspended')
         ELSE unique_until IS NOT NULL
       END;
