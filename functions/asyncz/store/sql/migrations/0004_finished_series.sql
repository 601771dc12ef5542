-- The dashboard's per-minute series (issue 19): attempts by the time they finished. Partial
-- (open attempts have no finished_at) and covering (outcome), so the last hour is one index
-- range scan however many attempts the table holds. Grants: 0002's default privileges
-- already cover the table; an index needs none.
CREATE INDEX IF NOT EXISTS job_attempts_finished_idx
    ON job_attempts (finished_at) INCLUDE (outcome) WHERE finished_at IS NOT NULL;
