-- Named queries of durable tasks' steps (see queries.sql for the conventions; migration
-- 0017 for the table).

-- name: save_step
-- THE FENCE of a step: store its outcome only while the attempt holds the job's lease, in
-- one statement. FOR SHARE holds the job row until this commits, so a statement that ends
-- the attempt or moves its lease waits for it (recovery's SKIP LOCKED passes the row over
-- until its next run), and any later attempt reads this step; a write that comes after such
-- a change sees another token (or none) and stores nothing: no row back = the lease is
-- lost, and the attempt stops. (Should the lease move to a table of its own, the holder
-- CTE reads and locks that row instead.) A 'failed' row (the step raised) is overwritten by the
-- next run's outcome; a 'completed' one never is, nor a 'waiting' one (a wait, stored by
-- open_wait: only its resolve or timeout completes it, sql/waits.sql). started_at is now()
-- less the run's time.
WITH holder AS (
    SELECT id FROM jobs
     WHERE id = %(job_id)s AND lease_token = %(token)s AND status = 'processing'
       FOR SHARE
)
INSERT INTO job_steps AS s (job_id, seq, name, kind, after_name, status, result,
                            result_bytes, error, attempts, job_attempt, started_at)
SELECT id, %(seq)s, %(name)s, %(kind)s, %(after_name)s, %(status)s, %(result)s::jsonb,
       %(result_bytes)s, %(error)s, %(attempts)s, %(job_attempt)s,
       now() - make_interval(secs => %(seconds)s)
  FROM holder
ON CONFLICT (job_id, seq) DO UPDATE
   SET status = EXCLUDED.status, result = EXCLUDED.result,
       result_bytes = EXCLUDED.result_bytes, error = EXCLUDED.error,
       attempts = s.attempts + EXCLUDED.attempts, job_attempt = EXCLUDED.job_attempt,
       started_at = EXCLUDED.started_at, finished_at = now()
 WHERE s.status = 'failed' AND s.name = EXCLUDED.name
RETURNING seq;

-- name: load_steps
-- One page of a job's history, in the order the steps were first stored (the primary key).
SELECT seq, name, kind, after_name, status, result, result_bytes, attempts, job_attempt,
       wait_until
  FROM job_steps
 WHERE job_id = %(job_id)s AND seq > %(after_seq)s
 ORDER BY seq
 LIMIT %(limit)s;

-- name: list_steps
-- GET /jobs/{id}/steps: one page, without the results (their size only).
SELECT seq, name, kind, status, attempts, job_attempt, started_at, finished_at,
       floor(extract(epoch FROM finished_at - started_at) * 1000)::bigint AS duration_ms,
       result_bytes, error
  FROM job_steps
 WHERE job_id = %(job_id)s AND seq > %(after_seq)s
 ORDER BY seq
 LIMIT %(limit)s;

-- name: reset_steps
-- A replay that starts the task over: the steps of a dead job go (at most the per-job cap
-- of rows: ASYNCZ_MAX_STEPS_PER_JOB). A job in any other status keeps them.
DELETE FROM job_steps
 WHERE job_id = %(job_id)s
   AND EXISTS (SELECT 1 FROM jobs WHERE id = %(job_id)s AND status = 'dead')
RETURNING seq;

-- name: prune_finished_steps
-- Retention, before prune_finished: up to %(limit)s step rows of the next %(jobs)s jobs that
-- prune_finished will delete (its selection, along jobs_finished_idx), so the cascade of the
-- job delete finds none and no statement grows with a job's steps.
WITH old AS (
    SELECT id FROM jobs
     WHERE status IN ('completed', 'cancelled')
       AND finished_at < now() - make_interval(secs => %(older_than)s)
       AND NOT (has_dependents AND EXISTS (
           SELECT 1 FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
            WHERE d.parent_id = jobs.id AND c.status IN ('waiting', 'queued', 'processing', 'suspended')))
     ORDER BY finished_at, id
     LIMIT %(jobs)s
), gone AS (
    DELETE FROM job_steps WHERE ctid = ANY(ARRAY(
        SELECT s.ctid FROM old JOIN job_steps s ON s.job_id = old.id LIMIT %(limit)s))
    RETURNING 1
)
SELECT count(*)::int AS n FROM gone;

-- name: prune_dead_steps
-- The same before prune_dead, along jobs_dead_finished_idx.
WITH old AS (
    SELECT id FROM jobs
     WHERE status = 'dead' AND finished_at < now() - make_interval(secs => %(older_than)s)
       AND NOT (has_dependents AND EXISTS (
           SELECT 1 FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
            WHERE d.parent_id = jobs.id AND c.status IN ('waiting', 'queued', 'processing', 'suspended')))
     ORDER BY finished_at, id
     LIMIT %(jobs)s
), gone AS (
    DELETE FROM job_steps WHERE ctid = ANY(ARRAY(
        SELECT s.ctid FROM old JOIN job_steps s ON s.job_id = old.id LIMIT %(limit)s))
    RETURNING 1
)
SELECT count(*)::int AS n FROM gone;
