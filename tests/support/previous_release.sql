-- The worker's statements of the release before an attempt's row was written once (its claim
-- opened the row, its completion or failure closed it), and its api's keyed submit, word for
-- word. During a deploy, functions of that release still run (a worker's invocation lasts up
-- to 15 minutes) after the new release's migrations ran: tests/integration/
-- test_upgrade_in_flight.py runs these against the current schema beside the current code.

-- name: claim_jobs
-- One statement claims every id that is still queued and due (and not in a paused queue:
-- a worker's view of the pauses may be a second old, this one is not), each with a fresh
-- lease token, and opens its attempt row (progress starts again: it is the attempt's). Ids that
-- fail the guard are simply not returned. The token is derived from the claim's random nonce
-- and the id (a 128-bit secret of this claim): a worker whose answer was lost reads back the
-- leases it took (adopt_claim) instead of leaving them to recovery's lease expiry.
WITH claimed AS (
    UPDATE jobs
       SET status = 'processing', lease_token = md5(%(nonce)s || id::text)::uuid,
           worker_id = %(worker_id)s,
           attempts = attempts + 1, heartbeat_at = now(), started_at = now(), updated_at = now(),
           progress = NULL, progress_message = NULL
     WHERE id = ANY(%(ids)s::uuid[]) AND status = 'queued' AND run_at <= now()
       AND NOT cancel_requested AND timeout_seconds <= %(max_timeout)s
       AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.queue = jobs.queue)
    RETURNING id, lease_token, task, payload, queue, priority, attempts, attempt_base,
              max_retries, timeout_seconds, worker_id, started_at, depth, concurrency_key,
              traceparent, tracestate
), opened AS (
    INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, task)
    SELECT id, attempts, worker_id, started_at, task FROM claimed
)
SELECT id::text AS id, lease_token::text AS lease_token, task, payload, queue, priority,
       attempts, attempt_base, max_retries, timeout_seconds, depth > 0 AS has_parents,
       concurrency_key, traceparent, tracestate
  FROM claimed;

-- name: heartbeat_jobs
-- Renews every lease the worker holds in one statement. A missing id = a lost lease.
UPDATE jobs j
   SET heartbeat_at = now(), updated_at = now()
  FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS l(id, token)
 WHERE j.id = l.id AND j.lease_token = l.token AND j.status = 'processing'
RETURNING j.id, j.cancel_requested;

-- name: complete_jobs
-- The same fenced completion for a batch of attempts in one statement (one commit): each
-- row still needs its own lease token; the ids returned are the ones completed. The batch
-- comes as ONE JSON array of {id, token, result}: one json.dumps for the batch instead of
-- three arrays adapted element by element in Python (most of a worker's CPU per batch).
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(done)s::jsonb) AS i(id uuid, token uuid, result jsonb)
), done AS (
    UPDATE jobs j
       SET status = 'completed', result = i.result, finished_at = now(), updated_at = now(),
           lease_token = NULL, heartbeat_at = NULL, last_error = NULL
      FROM input i
     WHERE j.id = i.id AND j.lease_token = i.token AND j.status = 'processing'
    RETURNING j.id, j.attempts, j.finished_at, j.has_dependents
), closed AS (
    UPDATE job_attempts a
       SET finished_at = d.finished_at, outcome = 'completed',
           duration_ms = floor(extract(epoch FROM d.finished_at - a.started_at) * 1000)::int
      FROM done d WHERE a.job_id = d.id AND a.attempt = d.attempts
)
SELECT id::text AS id, has_dependents FROM done;

-- name: finish_failed_job
-- Ends a failed/timed-out/cancelled attempt: the job becomes %(status)s ('queued' with a
-- backoff, 'dead' or 'cancelled'), fenced by the lease token. A cancel requested while the
-- attempt ran wins over a retry or a dead-letter: the job ends 'cancelled', never 'queued'
-- with the flag set (nothing would ever claim it).
WITH done AS (
    UPDATE jobs
       SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE %(status)s END,
           run_at = CASE WHEN %(status)s = 'queued' AND NOT cancel_requested
                         THEN now() + make_interval(secs => %(delay_seconds)s) ELSE run_at END,
           finished_at = CASE WHEN %(status)s = 'queued' AND NOT cancel_requested
                              THEN NULL ELSE now() END,
           last_error = %(error)s, updated_at = now(), lease_token = NULL, heartbeat_at = NULL
     WHERE id = %(id)s AND lease_token = %(token)s AND status = 'processing'
    RETURNING id, attempts, status, queue, priority, run_at, updated_at, has_dependents
), closed AS (
    UPDATE job_attempts a
       SET finished_at = d.updated_at, outcome = %(outcome)s, error = %(error)s,
           duration_ms = floor(extract(epoch FROM d.updated_at - a.started_at) * 1000)::int
      FROM done d WHERE a.job_id = d.id AND a.attempt = d.attempts
)
SELECT id, status, queue, priority, run_at, has_dependents FROM done;

-- name: insert_job_idempotent
-- A duplicate idempotency key inserts nothing and returns no row; the caller then reads
-- the existing job. The UNIQUE constraint, not a pre-check, decides.
INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds,
                  idempotency_key, run_at, submitted_by, submitted_by_key_id, concurrency_key,
                  traceparent,
                  tracestate)
VALUES (%(id)s, %(task)s, %(payload)s, %(queue)s, %(priority)s, %(max_retries)s,
        %(timeout_seconds)s, %(idempotency_key)s,
        coalesce(%(run_at)s, now() + make_interval(secs => %(delay_seconds)s)),
        %(submitted_by)s, %(submitted_by_key_id)s, %(concurrency_key)s, %(traceparent)s,
        %(tracestate)s)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING floor(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms, run_at <= now() AS due;
