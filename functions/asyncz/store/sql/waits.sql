-- Named queries of durable tasks' waits (migration 0019; docs/durable.md, "Waits"). A wait
-- is a step row with status 'waiting', its deadline (wait_until) and routing key (wait_key).
-- Lock order, in every statement here: the job's row first, then the step's, as save_step
-- (sql/steps.sql) and suspend_job take them, so a resolve and an attempt never deadlock.
--
-- A kind of wait plugs in with named queries of its own file: open_<kind>_wait (stores the
-- wait, or completes it at once when what it waits for is already there; the parameters of
-- save_step, returning status and result; fenced by the lease like save_step) and,
-- optionally, lock_<kind>_wait, run first in the same transaction (e.g. an advisory lock
-- its deliveries take too). A kind without them is stored by open_wait.

-- name: open_wait
-- A new wait, through the lease fence (save_step's rule): no row back = the lease is lost.
WITH holder AS (
    SELECT id FROM jobs
     WHERE id = %(job_id)s AND lease_token = %(token)s AND status = 'processing'
       FOR SHARE
)
INSERT INTO job_steps (job_id, seq, name, kind, after_name, status, result, result_bytes,
                       error, attempts, job_attempt, started_at, wait_until, wait_key)
SELECT id, %(seq)s, %(name)s, %(kind)s, %(after_name)s, 'waiting', %(result)s::jsonb, 0,
       NULL, 1, %(job_attempt)s, now(), %(wait_until)s, %(wait_key)s
  FROM holder
ON CONFLICT (job_id, seq) DO NOTHING
RETURNING status, result;

-- name: resolve_wait
-- Complete one waiting step with a value and wake its job, in one statement. Conditional
-- on 'waiting': the first resolve (or timeout) to commit wins; a later one finds no waiting
-- row and changes nothing (no row back). A job still running (its suspension not yet
-- committed) is marked woken, so suspend_job wakes it at once; a suspended one is due now
-- (run_at = now(): recovery's due-suspended scan enqueues it should the caller's enqueue
-- be lost). A queued job (its attempt was lost before it suspended) runs anyway; a job that
-- has ended is left alone and its wait with it.
WITH target AS (
    SELECT j.id FROM jobs j
     WHERE j.id = %(job_id)s AND j.status IN ('queued', 'processing', 'suspended')
       FOR NO KEY UPDATE
), resolved AS (
    UPDATE job_steps s
       SET status = 'completed', result = %(result)s::jsonb, result_bytes = %(result_bytes)s,
           finished_at = now()
      FROM target
     WHERE s.job_id = target.id AND s.seq = %(seq)s AND s.status = 'waiting'
    RETURNING s.job_id
), woken AS (
    UPDATE jobs j
       SET woken = j.woken OR j.status = 'processing',
           run_at = CASE WHEN j.status = 'suspended' THEN least(j.run_at, now())
                         ELSE j.run_at END,
           updated_at = now()
      FROM resolved
     WHERE j.id = resolved.job_id
    RETURNING j.id, j.status, j.queue, j.priority, j.run_at
)
SELECT id, status, queue, priority, run_at, true AS due FROM woken;

-- name: resolve_keyed_waits
-- A delivery's page: the waits of kind %(kind)s on routing key %(wait_key)s of jobs after
-- %(after_job)s (each job's earliest such wait only: one value per wait, in order), along
-- job_steps_waiting_idx, each completed with %(result)s and its job woken as resolve_wait
-- does. A wait whose terms name the resolvers it accepts ({"from": [...]}) takes a value
-- only from one of them (%(resolver)s). One row per wait the page scanned, by job id:
-- resolved says whether this statement took it (a full page: there may be more).
WITH waits AS (
    SELECT DISTINCT ON (s.job_id) s.job_id, s.seq, s.result AS terms
      FROM job_steps s
     WHERE s.status = 'waiting' AND s.kind = %(kind)s AND s.wait_key = %(wait_key)s
       AND s.job_id > %(after_job)s::uuid
     ORDER BY s.job_id, s.seq
     LIMIT %(limit)s
), target AS (
    SELECT j.id, w.seq FROM jobs j JOIN waits w ON w.job_id = j.id
     WHERE j.status IN ('queued', 'processing', 'suspended')
       AND (w.terms IS NULL OR NOT (w.terms ? 'from')
            OR coalesce(w.terms -> 'from' ? %(resolver)s::text, false))
     ORDER BY j.id
       FOR NO KEY UPDATE OF j
), resolved AS (
    UPDATE job_steps s
       SET status = 'completed', result = %(result)s::jsonb, result_bytes = %(result_bytes)s,
           finished_at = now()
      FROM target
     WHERE s.job_id = target.id AND s.seq = target.seq AND s.status = 'waiting'
    RETURNING s.job_id
), woken AS (
    UPDATE jobs j
       SET woken = j.woken OR j.status = 'processing',
           run_at = CASE WHEN j.status = 'suspended' THEN least(j.run_at, now())
                         ELSE j.run_at END,
           updated_at = now()
      FROM resolved
     WHERE j.id = resolved.job_id
    RETURNING j.id, j.status, j.queue, j.priority, j.run_at
)
SELECT w.job_id AS id, r.status, r.queue, r.priority, r.run_at, true AS due,
       r.id IS NOT NULL AS resolved
  FROM waits w LEFT JOIN woken r ON r.id = w.job_id
 ORDER BY w.job_id;

-- name: time_out_wait
-- A replay finds its wait waiting past its deadline: the timeout resolves it, through the
-- lease fence (holder, as save_step) and on the same condition as a resolve ('waiting'), so
-- the timeout and a value race fairly and exactly one wins. timed_out false: a value won
-- first (read it with load_step); no row back: the lease is lost.
WITH holder AS (
    SELECT id FROM jobs
     WHERE id = %(job_id)s AND lease_token = %(token)s AND status = 'processing'
       FOR SHARE
), timed AS (
    UPDATE job_steps s
       SET status = 'completed', result = %(result)s::jsonb, result_bytes = %(result_bytes)s,
           job_attempt = %(job_attempt)s, finished_at = now()
      FROM holder
     WHERE s.job_id = holder.id AND s.seq = %(seq)s AND s.status = 'waiting'
    RETURNING s.seq
)
SELECT EXISTS (SELECT 1 FROM timed) AS timed_out FROM holder;

-- name: load_step
-- One stored step by its position (a wait's value after its timeout lost the race).
SELECT status, result FROM job_steps WHERE job_id = %(job_id)s AND seq = %(seq)s;
