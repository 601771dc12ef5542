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
-- its end (a cancel) goes through the cascade that follows spawned_by; the child is born
-- with it, so its end goes through the cascade that counts it for a gather. A unique key whose
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
                      tracestate, spawned_by, spawn_depth, has_dependents)
    SELECT %(id)s, %(task)s, %(payload)s, %(queue)s, %(priority)s, %(max_retries)s,
           %(timeout_seconds)s, %(idempotency_key)s,
           coalesce(%(run_at)s, now() + make_interval(secs => %(delay_seconds)s)),
           %(unique_key)s, %(unique_scope)s,
           now() + make_interval(secs => %(unique_for)s::float8),
           a.submitted_by, a.submitted_by_key_id, %(concurrency_key)s, %(traceparent)s,
           %(tracestate)s, a.id, a.spawn_depth + 1, true
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

-- name: cascade_spawned
-- A cascade's page over these ended jobs (sql/dependencies.sql settles their children), for
-- what spawning adds: the live jobs a cancelled one spawned (along jobs_spawned_live_idx) are
-- cancelled as cancel_job does: a queued, waiting or suspended one at once (its own spawns
-- and children follow: cascade_pending), a running one flagged (it stops at its next
-- heartbeat, and its end cascades in turn), at most %(limit)s (fewer: nothing was left),
-- kind 'cancelled'; and the gatherers whose edges to these jobs are not settled yet (kind
-- 'gatherer': settle_gather_wait counts them). A spawner that is not cancelled cancels nothing.
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
), cancelled AS (
    UPDATE jobs c
       SET status = CASE WHEN c.status IN ('queued', 'waiting', 'suspended') THEN 'cancelled'
                         ELSE c.status END,
           finished_at = CASE WHEN c.status IN ('queued', 'waiting', 'suspended') THEN now()
                              ELSE c.finished_at END,
           cascade_pending = CASE WHEN c.status IN ('queued', 'waiting', 'suspended')
                                  THEN c.has_dependents ELSE c.cascade_pending END,
           last_error = coalesce(c.last_error, 'spawner_cancelled: ' || c.spawned_by::text),
           cancel_requested = true, updated_at = now()
      FROM page WHERE c.id = page.id
    RETURNING c.id, c.status, c.queue, c.priority, c.run_at, c.has_dependents
)
SELECT 'cancelled' AS kind, id::text AS id, status, queue, priority, run_at, has_dependents
  FROM cancelled
UNION ALL
SELECT DISTINCT 'gatherer', job_id::text, NULL::text, NULL::text, NULL::smallint,
       NULL::timestamptz, NULL::boolean
  FROM job_gathers WHERE child_id = ANY(%(ids)s::uuid[]) AND NOT settled;

-- name: lock_waiting_job
-- The first statement of a settle (one transaction): the gatherer's row, so one settle of its
-- waits runs at a time, in the lock order of waits.sql (the job's row, then its steps').
SELECT id FROM jobs WHERE id = %(job_id)s FOR NO KEY UPDATE;

-- name: settle_gather_wait
-- Then: the edges of this gatherer's waits to jobs that have ended (those of %(ids)s; NULL:
-- all of them, after a gather begins and in recovery's sweep) are settled, each once (the
-- flag), and each wait counts them down; a wait whose count reaches 0 is completed with its
-- jobs' ends (asyncz_gather_value), once ('waiting'), and its job woken as resolve_wait does
-- (unless %(wake)s is false: the gatherer itself settles, before it suspends). A job whose
-- row is gone (retention) has ended too. Returns the job woken, if any.
WITH flipped AS (
    UPDATE job_gathers e SET settled = true
     WHERE e.job_id = %(job_id)s AND NOT e.settled
       AND (%(ids)s::uuid[] IS NULL OR e.child_id = ANY(%(ids)s::uuid[]))
       AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.id = e.child_id
                          AND c.status IN ('waiting', 'queued', 'processing', 'suspended'))
    RETURNING e.seq
), counted AS (
    SELECT seq, count(*)::int AS n FROM flipped GROUP BY seq
), valued AS (
    SELECT c.seq, s.pending - c.n AS left_,
           CASE WHEN s.pending - c.n <= 0
                THEN asyncz_gather_value(s.job_id, s.seq, (s.result ->> 'max_bytes')::int) END AS value
      FROM counted c JOIN job_steps s ON s.job_id = %(job_id)s AND s.seq = c.seq
     WHERE s.status = 'waiting'
), stepped AS (
    UPDATE job_steps s
       SET pending = v.left_,
           status = CASE WHEN v.value IS NULL THEN s.status ELSE 'completed' END,
           result = coalesce(v.value, s.result),
           result_bytes = CASE WHEN v.value IS NULL THEN s.result_bytes
                               ELSE octet_length(v.value::text) END,
           finished_at = CASE WHEN v.value IS NULL THEN s.finished_at ELSE now() END
      FROM valued v
     WHERE s.job_id = %(job_id)s AND s.seq = v.seq AND s.status = 'waiting'
    RETURNING s.status
), woken AS (
    UPDATE jobs j
       SET woken = j.woken OR j.status = 'processing',
           run_at = CASE WHEN j.status = 'suspended' THEN least(j.run_at, now()) ELSE j.run_at END,
           updated_at = now()
     WHERE j.id = %(job_id)s AND %(wake)s AND j.status IN ('queued', 'processing', 'suspended')
       AND EXISTS (SELECT 1 FROM stepped WHERE status = 'completed')
    RETURNING j.id, j.status, j.queue, j.priority, j.run_at
)
SELECT id::text AS id, status, queue, priority, run_at, true AS due FROM woken;

-- name: open_gather_wait
-- A gather begins (store.steps.open_wait), through the lease fence (save_step's rule; no row
-- back: the lease is lost): its edges stored in order, those to jobs that have ended settled
-- at once, and the wait stored with pending = the others; none left: completed at once with
-- their ends. A job not spawned (a unique key's) is flagged has_dependents, so its end counts.
-- The jobs are not locked: one that ends while this is stored is settled by the gatherer
-- right after it commits (settle_gather_wait), or counts itself after its own commit.
WITH holder AS (
    SELECT id FROM jobs
     WHERE id = %(job_id)s AND lease_token = %(token)s AND status = 'processing'
       FOR SHARE
), found AS (
    SELECT m.id::uuid AS child_id, m.n::int AS position, c.status, c.result, c.last_error,
           coalesce(c.status IN ('waiting', 'queued', 'processing', 'suspended'), false) AS live
      FROM holder, jsonb_array_elements_text(%(result)s::jsonb -> 'jobs') WITH ORDINALITY AS m(id, n)
      LEFT JOIN jobs c ON c.id = m.id::uuid
), flagged AS (
    UPDATE jobs c SET has_dependents = true
      FROM found f WHERE c.id = f.child_id AND f.live AND NOT c.has_dependents
    RETURNING 1
), listed AS (
    INSERT INTO job_gathers (child_id, job_id, seq, position, settled)
    SELECT child_id, %(job_id)s, %(seq)s, position, NOT live FROM found
    ON CONFLICT DO NOTHING
    RETURNING 1
), live AS (
    SELECT count(*) FILTER (WHERE live)::int AS n,
           coalesce(jsonb_agg(jsonb_build_object(
               'job_id', child_id, 'status', coalesce(status, 'purged'), 'result', result,
               'error', last_error) ORDER BY position), '[]'::jsonb) AS ends
      FROM found
), valued AS (
    SELECT n, CASE WHEN n > 0 THEN %(result)s::jsonb
                   WHEN octet_length(ends::text) > (%(result)s::jsonb ->> 'max_bytes')::int
                   THEN jsonb_build_object('too_large', octet_length(ends::text),
                                           'max_bytes', (%(result)s::jsonb ->> 'max_bytes')::int)
                   ELSE ends END AS value
      FROM live
)
INSERT INTO job_steps (job_id, seq, name, kind, after_name, status, result, result_bytes,
                       error, attempts, job_attempt, started_at, finished_at, wait_until,
                       wait_key, pending)
SELECT h.id, %(seq)s, %(name)s, %(kind)s, %(after_name)s,
       CASE WHEN v.n > 0 THEN 'waiting' ELSE 'completed' END, v.value,
       CASE WHEN v.n > 0 THEN 0 ELSE octet_length(v.value::text) END, NULL, 1, %(job_attempt)s,
       now(), now(), %(wait_until)s, %(wait_key)s, v.n
  FROM holder h, valued v, (SELECT count(*) FROM flagged) f, (SELECT count(*) FROM listed) l
ON CONFLICT (job_id, seq) DO NOTHING
RETURNING status, result;

-- name: scan_waiting_gathers
-- Recovery's sweep: the next page of live jobs with a waiting gather, after %(after)s (along
-- job_steps_waiting_idx), whose edges it settles in full. A job that has ended (cancelled
-- while it gathered) keeps its wait, and is passed over.
SELECT DISTINCT s.job_id::text AS job_id FROM job_steps s
 WHERE s.status = 'waiting' AND s.kind = 'gather' AND s.wait_key IS NULL
   AND s.job_id > %(after)s::uuid
   AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = s.job_id
                  AND j.status IN ('queued', 'processing', 'suspended'))
 ORDER BY 1
 LIMIT %(limit)s;

-- name: gather_progress
-- GET /jobs/{id} of a gathering job: its waiting gather's name, jobs not ended and total.
SELECT name, pending, (result ->> 'total')::int AS total FROM job_steps
 WHERE job_id = %(id)s AND kind = 'gather' AND status = 'waiting'
 ORDER BY seq
 LIMIT 1;

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
