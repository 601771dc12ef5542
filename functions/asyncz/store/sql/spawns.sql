-- Named queries of spawned jobs (see queries.sql for the conventions; migration 0021 for
-- the columns). A spawned job is any job: these statements only create and read them.

-- name: insert_spawned_job
-- A durable task's ctx.spawn: the child is stored only while the spawner's attempt holds
-- its lease (the holder CTE locks the spawner's row until this commits, as a step's fence
-- does), with the spawner's key as its submitter and one more level of spawn_depth; a
-- spawner already at %(max_depth)s stores nothing (too_deep). The child's id is
-- deterministic (the spawner, its replay generation and the step's name), so a second try
-- after a crash finds it (ON CONFLICT, no row): the caller then reads which job holds the
-- id, the idempotency key or the unique key. The spawner is flagged has_dependents once, so
-- its end (a cancel) goes through the cascade that follows spawned_by. A unique key whose
-- 'period' has passed is released first, as insert_unique_job does.
WITH holder AS (
    SELECT id, spawn_depth, submitted_by, submitted_by_key_id FROM jobs
     WHERE id = %(parent_id)s AND lease_token = %(token)s AND status = 'processing'
       FOR NO KEY UPDATE
), allowed AS (
    SELECT * FROM holder WHERE spawn_depth < %(max_depth)s
), flagged AS (
    UPDATE jobs j SET has_dependents = true FROM allowed a
     WHERE j.id = a.id AND NOT j.has_dependents
    RETURNING 1
), expired AS (
    UPDATE jobs SET unique_until = NULL
     WHERE %(unique_key)s::text IS NOT NULL AND EXISTS (SELECT 1 FROM allowed)
       AND unique_key = %(unique_key)s AND unique_scope = 'period' AND unique_until <= now()
       AND unique_key IS NOT NULL AND attempt_base = 0 AND CASE unique_scope
             WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
             WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing', 'suspended')
             ELSE unique_until IS NOT NULL END
    RETURNING 1
), inserted AS (
    INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds,
                      idempotency_key, run_at, unique_key, unique_scope, unique_until,
                      submitted_by, submitted_by_key_id, concurrency_key, traceparent,
                      tracestate, spawned_by, spawn_depth)
    SELECT %(id)s, %(task)s, %(payload)s, %(queue)s, %(priority)s, %(max_retries)s,
           %(timeout_seconds)s, %(idempotency_key)s,
           coalesce(%(run_at)s, now() + make_interval(secs => %(delay_seconds)s)),
           %(unique_key)s, %(unique_scope)s,
           now() + make_interval(secs => %(unique_for)s::float8),
           a.submitted_by, a.submitted_by_key_id, %(concurrency_key)s, %(traceparent)s,
           %(tracestate)s, a.id, a.spawn_depth + 1
      FROM allowed a, (SELECT count(*) FROM expired) AS e, (SELECT count(*) FROM flagged) AS f
    ON CONFLICT DO NOTHING
    RETURNING ceil(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms, run_at <= now() AS due
)
SELECT h.spawn_depth, h.spawn_depth >= %(max_depth)s AS too_deep,
       i.run_at_ms IS NOT NULL AS inserted, i.run_at_ms, i.due
  FROM holder h LEFT JOIN inserted i ON true;

-- name: find_spawned
-- After a spawn that inserted nothing: the job that holds its id (its own child, stored by
-- an earlier try), else its idempotency key, else its unique key (the hold predicate of
-- jobs_unique_live_hold_idx, word for word); no row: that holder is gone meanwhile.
SELECT id::text AS id, spawned_by::text AS spawned_by, status, queue, priority, run_at,
       run_at <= now() AS due
  FROM (
    SELECT j.*, 1 AS rank FROM jobs j WHERE j.id = %(id)s
    UNION ALL
    SELECT j.*, 2 FROM jobs j
     WHERE %(idempotency_key)s::text IS NOT NULL AND j.idempotency_key = %(idempotency_key)s
    UNION ALL
    SELECT j.*, 3 FROM jobs j
     WHERE j.unique_key = %(unique_key)s
       AND j.unique_key IS NOT NULL AND j.attempt_base = 0 AND CASE j.unique_scope
             WHEN 'queued' THEN j.status IN ('waiting', 'queued') AND j.attempts = 0
             WHEN 'queued_or_running' THEN j.status IN ('waiting', 'queued', 'processing', 'suspended')
             ELSE j.unique_until IS NOT NULL END
  ) found
 ORDER BY rank
 LIMIT 1;

-- name: cancel_spawned
-- A cancel's cascade, one page: the live jobs these cancelled spawners created (along
-- jobs_spawned_live_idx) are cancelled as cancel_job does: a queued, waiting or suspended one
-- at once (its own spawned jobs, its children, follow: cascade_pending), a running one
-- flagged (it stops at its next heartbeat, and its end cascades in turn). A spawner that is
-- not cancelled cancels nothing. Returns the jobs changed (at most %(limit)s: fewer means
-- nothing was left).
WITH page AS (
    SELECT c.id FROM jobs c
     WHERE c.spawned_by = ANY(ARRAY(
               SELECT p.id FROM jobs p WHERE p.id = ANY(%(ids)s::uuid[]) AND p.status = 'cancelled'))
       AND c.spawned_by IS NOT NULL
       AND c.status IN ('waiting', 'queued', 'processing', 'suspended')
       AND NOT c.cancel_requested
     ORDER BY c.id
     LIMIT %(limit)s
       FOR UPDATE OF c
)
UPDATE jobs c
   SET status = CASE WHEN c.status IN ('queued', 'waiting', 'suspended') THEN 'cancelled'
                     ELSE c.status END,
       finished_at = CASE WHEN c.status IN ('queued', 'waiting', 'suspended') THEN now()
                          ELSE c.finished_at END,
       cascade_pending = CASE WHEN c.status IN ('queued', 'waiting', 'suspended') THEN c.has_dependents
                              ELSE c.cascade_pending END,
       last_error = coalesce(c.last_error, 'spawner_cancelled: ' || c.spawned_by::text),
       cancel_requested = true, updated_at = now()
  FROM page WHERE c.id = page.id
RETURNING c.id::text AS id, c.status, c.queue, c.priority, c.run_at, c.has_dependents;

-- name: count_spawned
-- GET /jobs/{id} of a spawner: how many jobs it created, by status, counted along
-- jobs_spawned_by_idx up to %(limit)s (a bounded read: more shows as the limit, capped).
SELECT status, count(*)::int AS n FROM (
    SELECT status FROM jobs WHERE spawned_by = %(id)s AND spawned_by IS NOT NULL
     LIMIT %(limit)s
) s GROUP BY status;

-- name: list_spawned
-- GET /jobs?spawned_by=: a spawner's jobs, newest first, a page after the cursor.
SELECT * FROM jobs
 WHERE spawned_by = %(spawned_by)s AND spawned_by IS NOT NULL
   AND (%(after_at)s::timestamptz IS NULL
        OR (created_at, id) < (%(after_at)s::timestamptz, %(after_id)s::uuid))
 ORDER BY created_at DESC, id DESC
 LIMIT %(limit)s;
