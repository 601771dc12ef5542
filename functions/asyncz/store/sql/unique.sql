-- Named queries of unique jobs (see queries.sql for the conventions). "Holds" is the
-- predicate of jobs_unique_live_hold_idx (migration 0018), repeated word for word so the
-- planner uses that index and ON CONFLICT infers it:
--   unique_key IS NOT NULL AND attempt_base = 0 AND CASE unique_scope
--     WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
--     WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing', 'suspended')
--     ELSE unique_until IS NOT NULL END
-- Each insert first ends the hold of a 'period' job of the same key whose period has
-- passed (the `expired` CTE; the insert reads its count, so it runs first), then inserts;
-- the unique index decides, also between concurrent submits.

-- name: insert_unique_job
-- No row back when the key (or the idempotency key) is held: the caller reads the holder.
WITH expired AS (
    UPDATE jobs SET unique_until = NULL
     WHERE unique_key = %(unique_key)s AND unique_scope = 'period' AND unique_until <= now()
       AND unique_key IS NOT NULL AND attempt_base = 0 AND CASE unique_scope
             WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
             WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing', 'suspended')
             ELSE unique_until IS NOT NULL END
    RETURNING 1
)
INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds,
                  idempotency_key, run_at, unique_key, unique_scope, unique_until, submitted_by,
                  submitted_by_key_id,
                  concurrency_key, traceparent, tracestate)
SELECT %(id)s, %(task)s, %(payload)s, %(queue)s, %(priority)s, %(max_retries)s,
       %(timeout_seconds)s, %(idempotency_key)s,
       coalesce(%(run_at)s, now() + make_interval(secs => %(delay_seconds)s)),
       %(unique_key)s, %(unique_scope)s,
       now() + make_interval(secs => %(unique_for)s::float8), %(submitted_by)s,
       %(submitted_by_key_id)s,
       %(concurrency_key)s, %(traceparent)s, %(tracestate)s
  FROM (SELECT count(*) FROM expired) AS e
ON CONFLICT DO NOTHING
RETURNING id::text AS id, status, ceil(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms,
          run_at <= now() AS due;

-- name: insert_unique_job_debounced
-- Debounce: when the holder has not started yet (queued, no attempt) and is of the same
-- task and submitter (API key, by its id), it takes this submit's payload and start instead,
-- and its row comes back (another id than the one given); otherwise no row comes back and nothing
-- changes. A held idempotency key fails the statement (the caller reads that key's holder).
WITH expired AS (
    UPDATE jobs SET unique_until = NULL
     WHERE unique_key = %(unique_key)s AND unique_scope = 'period' AND unique_until <= now()
       AND unique_key IS NOT NULL AND attempt_base = 0 AND CASE unique_scope
             WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
             WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing', 'suspended')
             ELSE unique_until IS NOT NULL END
    RETURNING 1
)
INSERT INTO jobs AS j (id, task, payload, queue, priority, max_retries, timeout_seconds,
                       idempotency_key, run_at, unique_key, unique_scope, unique_until,
                       submitted_by, submitted_by_key_id, concurrency_key, traceparent, tracestate)
SELECT %(id)s, %(task)s, %(payload)s, %(queue)s, %(priority)s, %(max_retries)s,
       %(timeout_seconds)s, %(idempotency_key)s,
       coalesce(%(run_at)s, now() + make_interval(secs => %(delay_seconds)s)),
       %(unique_key)s, %(unique_scope)s,
       now() + make_interval(secs => %(unique_for)s::float8), %(submitted_by)s,
       %(submitted_by_key_id)s,
       %(concurrency_key)s, %(traceparent)s, %(tracestate)s
  FROM (SELECT count(*) FROM expired) AS e
ON CONFLICT (unique_key)
 WHERE unique_key IS NOT NULL AND attempt_base = 0 AND CASE unique_scope
         WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
         WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing', 'suspended')
         ELSE unique_until IS NOT NULL END
DO UPDATE SET payload = EXCLUDED.payload, run_at = EXCLUDED.run_at, updated_at = now()
 WHERE j.status = 'queued' AND j.attempts = 0 AND NOT j.cancel_requested
   AND j.task = EXCLUDED.task
   AND j.submitted_by_key_id IS NOT DISTINCT FROM EXCLUDED.submitted_by_key_id
RETURNING j.id::text AS id, j.status, j.queue, j.priority,
          ceil(extract(epoch FROM j.run_at) * 1000)::bigint AS run_at_ms, j.run_at <= now() AS due;

-- name: insert_unique_jobs
-- A batch of which some items carry a unique key, in one statement (one commit). An item
-- whose key (or idempotency key) is held, by another job or by an earlier item of this
-- batch, is skipped: the ids returned are the ones inserted.
WITH expired AS (
    UPDATE jobs SET unique_until = NULL
     WHERE unique_key = ANY(%(unique_keys)s::text[]) AND unique_scope = 'period'
       AND unique_until <= now()
       AND unique_key IS NOT NULL AND attempt_base = 0 AND CASE unique_scope
             WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
             WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing', 'suspended')
             ELSE unique_until IS NOT NULL END
    RETURNING 1
)
INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds,
                  idempotency_key, run_at, unique_key, unique_scope, unique_until, submitted_by,
                  submitted_by_key_id,
                  concurrency_key, traceparent, tracestate)
SELECT i.id, i.task, i.payload, i.queue, i.priority, i.max_retries, i.timeout_seconds,
       i.idempotency_key, coalesce(i.run_at, now() + make_interval(secs => i.delay_seconds)),
       i.unique_key, i.unique_scope, now() + make_interval(secs => i.unique_for), i.submitted_by,
       i.submitted_by_key_id,
       i.concurrency_key, i.traceparent, i.tracestate
  FROM ROWS FROM (json_to_recordset(%(jobs)s::json)
                  AS (id uuid, task text, payload jsonb, queue text, priority smallint,
                      max_retries int, timeout_seconds int, idempotency_key text,
                      run_at timestamptz, delay_seconds float8, submitted_by text,
                      submitted_by_key_id text, concurrency_key text, traceparent text,
                      tracestate text, unique_key text,
                      unique_scope text, unique_for float8))
       WITH ORDINALITY AS i(id, task, payload, queue, priority, max_retries, timeout_seconds,
                            idempotency_key, run_at, delay_seconds, submitted_by,
                            submitted_by_key_id, concurrency_key, traceparent, tracestate,
                            unique_key, unique_scope, unique_for, n),
       (SELECT count(*) FROM expired) AS e
 ORDER BY i.n
ON CONFLICT DO NOTHING
RETURNING id, ceil(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms, run_at <= now() AS due;

-- name: get_unique_holders
-- The jobs that hold these keys now, with where each belongs in Redis and who submitted it.
SELECT unique_key, id::text AS id, status, queue, priority, run_at, run_at <= now() AS due,
       submitted_by, submitted_by_key_id
  FROM jobs
 WHERE unique_key = ANY(%(keys)s::text[])
   AND unique_key IS NOT NULL AND attempt_base = 0 AND CASE unique_scope
         WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
         WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing', 'suspended')
         ELSE unique_until IS NOT NULL END;
