-- Named queries. Each block starts with "-- name: <name>". Values are bound parameters
-- (%(name)s); nothing is ever formatted into this text.

-- name: insert_job
-- No idempotency key: a plain INSERT (no speculative insertion to pay for). It returns
-- only what the caller does not know already: when the job is due (server clock), and
-- whether it is due now; a uuid and a timestamptz cost more to load than the rest of the row.
INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds, run_at,
                  submitted_by, submitted_by_key_id, concurrency_key, traceparent, tracestate)
VALUES (%(id)s, %(task)s, %(payload)s, %(queue)s, %(priority)s, %(max_retries)s,
        %(timeout_seconds)s,
        coalesce(%(run_at)s, now() + make_interval(secs => %(delay_seconds)s)),
        %(submitted_by)s, %(submitted_by_key_id)s, %(concurrency_key)s, %(traceparent)s,
        %(tracestate)s)
RETURNING ceil(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms, run_at <= now() AS due;

-- name: insert_job_idempotent
-- A duplicate idempotency key inserts nothing and returns no row; the caller then reads
-- the existing job. The unique constraint, not a pre-check, decides. ON CONFLICT names the
-- predicate of a partial index of the keys given as well: this statement infers either, so
-- a later release may replace the constraint (its NULL entry a job is written again by
-- every claim and completion: 155 B of WAL a job, BENCHMARKS.md) once no function of a
-- release before this one runs.
INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds,
                  idempotency_key, run_at, submitted_by, submitted_by_key_id, concurrency_key,
                  traceparent,
                  tracestate)
VALUES (%(id)s, %(task)s, %(payload)s, %(queue)s, %(priority)s, %(max_retries)s,
        %(timeout_seconds)s, %(idempotency_key)s,
        coalesce(%(run_at)s, now() + make_interval(secs => %(delay_seconds)s)),
        %(submitted_by)s, %(submitted_by_key_id)s, %(concurrency_key)s, %(traceparent)s,
        %(tracestate)s)
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING ceil(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms, run_at <= now() AS due;

-- name: insert_jobs
-- A batch in one multi-row INSERT (one statement, one commit). Rows whose idempotency key
-- exists already (or repeats an earlier row's) are skipped: the ids returned are the ones
-- inserted, each with when it is due (server clock). The batch comes as ONE JSON array of
-- the jobs' columns (asyncz.store.rows.new_jobs_document), as complete_jobs' does.
INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds,
                  idempotency_key, run_at, submitted_by, submitted_by_key_id, concurrency_key,
                  traceparent,
                  tracestate)
SELECT i.id, i.task, i.payload, i.queue, i.priority, i.max_retries, i.timeout_seconds,
       i.idempotency_key, coalesce(i.run_at, now() + make_interval(secs => i.delay_seconds)),
       i.submitted_by, i.submitted_by_key_id, i.concurrency_key, i.traceparent, i.tracestate
  FROM ROWS FROM (json_to_recordset(%(jobs)s::json)
                  AS (id uuid, task text, payload jsonb, queue text, priority smallint,
                      max_retries int, timeout_seconds int, idempotency_key text,
                      run_at timestamptz, delay_seconds float8, submitted_by text,
                      submitted_by_key_id text, concurrency_key text, traceparent text,
                      tracestate text))
       WITH ORDINALITY AS i(id, task, payload, queue, priority, max_retries, timeout_seconds,
                            idempotency_key, run_at, delay_seconds, submitted_by,
                            submitted_by_key_id, concurrency_key, traceparent, tracestate, n)
 ORDER BY i.n
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, ceil(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms, run_at <= now() AS due;

-- name: get_jobs_by_idempotency_keys
-- The jobs that hold these keys, with where each belongs in Redis (a duplicate submit of a
-- queued job enqueues it again, idempotently).
SELECT id, status, idempotency_key, queue, priority, run_at, run_at <= now() AS due
  FROM jobs WHERE idempotency_key = ANY(%(keys)s::text[]);

-- name: get_job_by_idempotency_key
SELECT id, status, queue, priority, run_at, run_at <= now() AS due
  FROM jobs WHERE idempotency_key = %(idempotency_key)s;

-- name: find_jobs
-- Which of these ids exist (after a submit whose answer was lost), with where each belongs
-- in Redis.
SELECT id::text AS id, status, queue, priority, run_at, run_at <= now() AS due
  FROM jobs WHERE id = ANY(%(ids)s::uuid[]);

-- name: get_job
SELECT * FROM jobs WHERE id = %(id)s;

-- name: list_attempts
-- The latest 1,000 attempts (each error is at most 4,000 characters), oldest first: the
-- answer stays well under a Lambda response's 6 MB however often a job was replayed. The
-- attempts that ended are job_attempt_history's (a completed one is the job's row, 0025);
-- the attempt running now has no row yet (it is written when it ends): the job's row
-- says who runs it since when. (A row opened at claim by the previous release is read as is.)
SELECT * FROM (
    SELECT job_id, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms
      FROM job_attempt_history WHERE job_id = %(id)s
    UNION ALL
    SELECT id, attempts, worker_id, started_at, NULL, NULL, NULL, NULL
      FROM jobs j
     WHERE id = %(id)s AND status = 'processing'
       AND NOT EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id
                          AND a.attempt = j.attempts)
     ORDER BY attempt DESC LIMIT 1000) a
 ORDER BY attempt;

-- name: claim_jobs
-- One statement claims every id that is still queued and due (and not in a paused queue:
-- a worker's view of the pauses may be a second old, this one is not), each with a fresh
-- lease token (progress starts again: it is the attempt's). Ids that fail the guard are simply
-- not returned. The job's row (worker_id, started_at, attempts) is the running attempt; an
-- attempt that does not complete gets its job_attempts row when it ends (a failure, a
-- suspension, recovery's `lost`), and a completed one stays the job's row (migration 0025). The token is derived from the claim's random nonce
-- and the id (a 128-bit secret of this claim): a worker whose answer was lost reads back the
-- leases it took (adopt_claim) instead of leaving them to recovery's lease expiry.
-- The rows are found by primary key, whatever the statistics say: the status guard is
-- spelt IS NOT DISTINCT FROM (the same test: status is never NULL) so that no partial index
-- of jobs matches it. With `status = 'queued'`, statistics that had not seen the backlog
-- yet made the planner walk every queued row along jobs_queued_run_at_idx for each claim.
-- A due suspended job is claimed the same way (its wake): it keeps its progress, and its
-- suspensions say how many of its attempts were not tries (Lease.tries_used).
WITH claimed AS (
    UPDATE jobs
       SET status = 'processing', lease_token = md5(%(nonce)s || id::text)::uuid,
           worker_id = %(worker_id)s,
           attempts = attempts + 1, heartbeat_at = now(), started_at = now(), updated_at = now(),
           progress = CASE WHEN status IS NOT DISTINCT FROM 'suspended' THEN progress END,
           progress_message = CASE WHEN status IS NOT DISTINCT FROM 'suspended'
                                   THEN progress_message END
     WHERE id = ANY(%(ids)s::uuid[])
       AND (status IS NOT DISTINCT FROM 'queued' OR status IS NOT DISTINCT FROM 'suspended')
       AND run_at <= now()
       AND NOT cancel_requested AND timeout_seconds <= %(max_timeout)s
       AND NOT EXISTS (SELECT 1 FROM queue_pauses p WHERE p.queue = jobs.queue)
    RETURNING id, lease_token, task, payload, queue, priority, attempts, attempt_base,
              suspensions, max_retries, timeout_seconds, depth, concurrency_key, traceparent,
              tracestate
)
SELECT id::text AS id, lease_token::text AS lease_token, task, payload, queue, priority,
       attempts, attempt_base, suspensions, max_retries, timeout_seconds,
       depth > 0 AS has_parents, concurrency_key, traceparent, tracestate
  FROM claimed;

-- name: adopt_claim
-- After a claim whose answer was lost: the leases it took, if it committed (by its tokens).
-- By primary key (as claim_jobs).
SELECT id::text AS id, lease_token::text AS lease_token, task, payload, queue, priority,
       attempts, attempt_base, suspensions, max_retries, timeout_seconds,
       depth > 0 AS has_parents, concurrency_key, traceparent, tracestate
  FROM jobs
 WHERE id = ANY(%(ids)s::uuid[]) AND status IS NOT DISTINCT FROM 'processing'
   AND lease_token = md5(%(nonce)s || id::text)::uuid;

-- name: get_unclaimed
-- After a claim, the ids that were not claimed but are still queued: the caller puts
-- each back where it belongs (ready if due, delayed if not). By primary key (as claim_jobs).
-- A suspended one is a wake (its rate does not count it: it is not a new start).
SELECT id, queue, priority, run_at, run_at <= now() AS due, task, concurrency_key,
       status IS NOT DISTINCT FROM 'suspended' AS wake
  FROM jobs
 WHERE id = ANY(%(ids)s::uuid[])
   AND (status IS NOT DISTINCT FROM 'queued' OR status IS NOT DISTINCT FROM 'suspended')
   AND NOT cancel_requested;

-- name: heartbeat_jobs
-- Renews every lease the worker holds in one statement. A missing id = a lost lease. By
-- primary key (as complete_jobs).
UPDATE jobs j
   SET heartbeat_at = now(), updated_at = now()
  FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS l(id, token)
 WHERE j.id = ANY(%(ids)s::uuid[]) AND j.id = l.id AND j.lease_token = l.token
   AND j.status IS NOT DISTINCT FROM 'processing'
RETURNING j.id, j.cancel_requested;

-- name: complete_job
-- The job's row is its completed attempt (job_attempt_history, migration 0025): no
-- job_attempts row is written for it.
UPDATE jobs
   SET status = 'completed', result = %(result)s, finished_at = now(), updated_at = now(),
       lease_token = NULL, heartbeat_at = NULL, last_error = NULL
 WHERE id = %(id)s AND lease_token = %(token)s AND status = 'processing'
RETURNING id, has_dependents;

-- name: complete_jobs
-- The same fenced completion for a batch of attempts in one statement (one commit): each
-- row still needs its own lease token; the ids returned are the ones completed. The batch
-- comes as ONE JSON array of {id, token, result}: one json.dumps for the batch instead of
-- three arrays adapted element by element in Python (most of a worker's CPU per batch).
-- By primary key, as claim_jobs: the ids as an array (a join let the planner hash every
-- running job, read along jobs_processing_heartbeat_idx or the whole table). As complete_job,
-- the job's row is its completed attempt.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(done)s::jsonb) AS i(id uuid, token uuid, result jsonb)
), done AS (
    UPDATE jobs j
       SET status = 'completed', result = i.result, finished_at = now(), updated_at = now(),
           lease_token = NULL, heartbeat_at = NULL, last_error = NULL
      FROM input i
     WHERE j.id = ANY(ARRAY(SELECT id FROM input)) AND j.id = i.id AND j.lease_token = i.token
       AND j.status IS NOT DISTINCT FROM 'processing'
    RETURNING j.id, j.has_dependents
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
    RETURNING id, attempts, status, queue, priority, run_at, updated_at, has_dependents,
              worker_id, started_at, task
), closed AS (
    INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, finished_at, outcome,
                              error, duration_ms, task)
    SELECT id, attempts, worker_id, started_at, updated_at, %(outcome)s, %(error)s,
           floor(extract(epoch FROM updated_at - started_at) * 1000)::int, task
      FROM done
)
SELECT id, status, queue, priority, run_at, has_dependents FROM done;

-- name: suspend_job
-- A durable task's attempt ends suspended (a sleep not due yet, a step's retry after a long
-- backoff): the job waits in PostgreSQL until run_at, holding no lease, and the attempt's
-- row says 'suspended'. Not a try: suspensions counts it. Fenced by the lease token, as
-- finish_failed_job; a cancel requested while the attempt ran wins (it ends 'cancelled').
-- A wait resolved while the attempt ran (woken, set by the resolve: sql/steps.sql) wakes
-- the job at once: the resolve and this statement update the same row, so whichever
-- commits second sees the other's change.
WITH done AS (
    UPDATE jobs
       SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'suspended' END,
           run_at = CASE WHEN cancel_requested THEN run_at
                         WHEN woken THEN now()
                         ELSE now() + make_interval(secs => %(delay_seconds)s) END,
           finished_at = CASE WHEN cancel_requested THEN now() END,
           woken = false,
           suspensions = suspensions + 1, suspended_for = %(reason)s,
           first_started_at = coalesce(first_started_at, started_at),
           updated_at = now(), lease_token = NULL, heartbeat_at = NULL
     WHERE id = %(id)s AND lease_token = %(token)s AND status = 'processing'
    RETURNING id, attempts, status, queue, priority, run_at, updated_at, has_dependents,
              worker_id, started_at, task
), closed AS (
    INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, finished_at, outcome,
                              duration_ms, task)
    SELECT id, attempts, worker_id, started_at, updated_at,
           CASE WHEN status = 'cancelled' THEN 'cancelled' ELSE 'suspended' END,
           floor(extract(epoch FROM updated_at - started_at) * 1000)::int, task
      FROM done
)
SELECT id, status, queue, priority, run_at, run_at <= now() AS due, has_dependents FROM done;

-- name: cancel_job
-- A queued, waiting or suspended job is cancelled at once (nothing runs it); a running one
-- is flagged and stops at its next heartbeat. Terminal jobs are untouched (the caller reads
-- the status to say why).
UPDATE jobs
   SET status = CASE WHEN status IN ('queued', 'waiting', 'suspended') THEN 'cancelled'
                     ELSE status END,
       finished_at = CASE WHEN status IN ('queued', 'waiting', 'suspended') THEN now()
                          ELSE finished_at END,
       cascade_pending = CASE WHEN status IN ('queued', 'waiting', 'suspended') THEN has_dependents
                              ELSE cascade_pending END,
       cancel_requested = true, updated_at = now()
 WHERE id = %(id)s AND status IN ('waiting', 'queued', 'processing', 'suspended')
RETURNING id, status, queue, has_dependents, cascade_pending;

-- name: replay_job
UPDATE jobs
   SET status = 'queued', attempt_base = attempts, suspensions = 0, first_started_at = NULL, run_at = now(), finished_at = NULL, started_at = NULL,
       worker_id = NULL, cancel_requested = false, cascade_pending = has_dependents,
       updated_at = now()
 WHERE id = %(id)s AND status = 'dead'
RETURNING id, status, queue, priority, run_at, has_dependents, depth;

-- name: replay_dead_jobs
-- Bulk replay, filtered and bounded; SKIP LOCKED lets two replays run side by side.
WITH picked AS (
    SELECT id FROM jobs
     WHERE status = 'dead'
       AND (%(queue)s::text IS NULL OR queue = %(queue)s)
       AND (%(task)s::text IS NULL OR task = %(task)s)
     ORDER BY finished_at, id
     LIMIT %(limit)s
     FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
   SET status = 'queued', attempt_base = attempts, suspensions = 0, first_started_at = NULL, run_at = now(), finished_at = NULL, started_at = NULL,
       worker_id = NULL, cancel_requested = false, cascade_pending = has_dependents,
       updated_at = now()
  FROM picked WHERE j.id = picked.id
RETURNING j.id, j.status, j.queue, j.priority, j.run_at, j.has_dependents, j.depth;

-- name: purge_dead_job
-- Not while an unfinished job depends on it (it would lose its parent's status).
DELETE FROM jobs WHERE id = %(id)s AND status = 'dead'
   AND NOT (has_dependents AND EXISTS (
       SELECT 1 FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
        WHERE d.parent_id = %(id)s AND c.status IN ('waiting', 'queued', 'processing', 'suspended')))
RETURNING id;

-- name: list_jobs
-- Keyset pagination, newest first: (created_at, id) strictly below the cursor. Run
-- unprepared (planned for the filters given): with a status, ?task= and ?queue= use the
-- ended jobs' indexes or the status's own partial index. A task or queue filter without a
-- status is list_jobs_by_task_or_queue.
SELECT * FROM jobs
 WHERE (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(task)s::text IS NULL OR task = %(task)s)
   AND (%(after_created)s::timestamptz IS NULL
        OR (created_at, id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY created_at DESC, id DESC
 LIMIT %(limit)s;

-- name: list_jobs_by_submitter
-- ?submitted_by= (a key's name: every key that held it) or ?submitted_by_key_id= (one
-- key: what a submit-only key lists as its own jobs), newest first along
-- jobs_submitted_by_idx or jobs_submitted_by_key_idx; the other filters apply to those
-- rows. Run unprepared (a filter not given folds away).
SELECT * FROM jobs
 WHERE (%(submitted_by)s::text IS NULL OR submitted_by = %(submitted_by)s)
   AND (%(submitted_by_key_id)s::text IS NULL OR submitted_by_key_id = %(submitted_by_key_id)s)
   AND (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(task)s::text IS NULL OR task = %(task)s)
   AND (%(after_created)s::timestamptz IS NULL
        OR (created_at, id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY created_at DESC, id DESC
 LIMIT %(limit)s;

-- name: list_jobs_by_task_or_queue
-- ?task= and/or ?queue= without a status: the newest of the ended jobs (along
-- jobs_task_ended_idx or jobs_queue_ended_idx), of the backlog (waiting and queued, along
-- jobs_task_backlog_idx or jobs_queue_backlog_idx), of the suspended ones (along
-- jobs_task_suspended_idx or jobs_queue_suspended_idx) and of the running ones (their partial
-- index: as many rows as jobs run), merged. A new status needs its place in one arm here.
-- Run unprepared.
SELECT * FROM (
    (SELECT * FROM jobs
      WHERE status IN ('completed', 'cancelled', 'dead')
        AND (%(queue)s::text IS NULL OR queue = %(queue)s)
        AND (%(task)s::text IS NULL OR task = %(task)s)
        AND (%(after_created)s::timestamptz IS NULL
             OR (created_at, id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
      ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM jobs
      WHERE status IN ('waiting', 'queued')
        AND (%(queue)s::text IS NULL OR queue = %(queue)s)
        AND (%(task)s::text IS NULL OR task = %(task)s)
        AND (%(after_created)s::timestamptz IS NULL
             OR (created_at, id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
      ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM jobs
      WHERE status = 'suspended'
        AND (%(queue)s::text IS NULL OR queue = %(queue)s)
        AND (%(task)s::text IS NULL OR task = %(task)s)
        AND (%(after_created)s::timestamptz IS NULL
             OR (created_at, id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
      ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM jobs
      WHERE status = 'processing'
        AND (%(queue)s::text IS NULL OR queue = %(queue)s)
        AND (%(task)s::text IS NULL OR task = %(task)s)
        AND (%(after_created)s::timestamptz IS NULL
             OR (created_at, id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
      ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
) j
 ORDER BY created_at DESC, id DESC
 LIMIT %(limit)s;

-- name: list_dead_jobs
SELECT * FROM jobs
 WHERE status = 'dead'
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(task)s::text IS NULL OR task = %(task)s)
   AND (%(after_finished)s::timestamptz IS NULL
        OR (finished_at, id) < (%(after_finished)s::timestamptz, %(after_id)s::uuid))
 ORDER BY finished_at DESC, id DESC
 LIMIT %(limit)s;

-- name: get_fold_mark
SELECT folded_to FROM job_counts_folded;

-- name: count_by_status
-- Per queue and status, without reading history or the backlog: completed and cancelled from
-- job_counts plus the rows finished since its last fold (along jobs_finished_idx); the live
-- statuses from job_live_counts plus the changes appended since their last fold (migration
-- 0013). Run unprepared with %(folded_to)s, the mark read just before, so the plan knows how
-- recent the range is; the filter also reads the mark itself, so a fold committed in between
-- is not counted twice.
SELECT queue, status, sum(n)::bigint AS n FROM (
    SELECT queue, status, n FROM job_counts
    UNION ALL
    SELECT queue, status, count(*) FROM jobs
     WHERE status IN ('completed', 'cancelled') AND finished_at > %(folded_to)s
       AND finished_at > (SELECT folded_to FROM job_counts_folded)
     GROUP BY queue, status
    UNION ALL
    SELECT queue, status, n FROM job_live_counts
    UNION ALL
    SELECT queue, status, n FROM job_count_changes
) c
 GROUP BY queue, status
HAVING sum(n) <> 0;

-- name: queue_gauges
-- What the alarms watch: dead jobs, due queued jobs and the oldest one's age; and the jobs
-- submitted in the last whole minute (jobs_created_idx), the dashboard's JobsSubmitted.
SELECT (SELECT count(*) FROM jobs WHERE status = 'dead')::bigint AS dead,
       (SELECT count(*) FROM jobs WHERE status = 'queued' AND run_at <= now())::bigint AS queued,
       coalesce(extract(epoch FROM now() - (SELECT min(run_at) FROM jobs
                  WHERE status = 'queued' AND run_at <= now())), 0)::float8 AS oldest_age,
       (SELECT count(*) FROM jobs
         WHERE created_at >= date_trunc('minute', now()) - interval '1 minute'
           AND created_at < date_trunc('minute', now()))::bigint AS submitted;

-- name: oldest_queued_in_queue
-- One queue's oldest due job. Run unprepared, so it is planned for this queue's name: a queue
-- with much of the backlog walks jobs_queued_run_at_idx from its oldest row and stops at its
-- first (a few rows), a small one reads its own backlog along jobs_queue_backlog_idx. Reading
-- every due row of every queue once took 160 ms a GET /stats at 100,000 due jobs.
SELECT extract(epoch FROM now() - min(run_at))::float8 AS age
  FROM jobs WHERE status = 'queued' AND queue = %(queue)s AND run_at <= now();

-- name: count_dead
SELECT count(*)::bigint AS n FROM jobs WHERE status = 'dead';

-- name: recover_stale_leases
-- Processing rows whose worker stopped heartbeating: back to queued (dead when out of
-- retries, cancelled when a cancel was requested), the attempt written as 'lost' (or, when
-- the previous release's claim opened its row, that row closed so).
-- Bounded, and SKIP LOCKED so two recovery runs never fight over a row.
WITH stale AS (
    SELECT id FROM jobs
     WHERE status = 'processing' AND heartbeat_at < now() - make_interval(secs => %(lease_timeout)s)
     ORDER BY heartbeat_at
     LIMIT %(limit)s
     FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE jobs j
       SET status = CASE WHEN j.cancel_requested THEN 'cancelled'
                         WHEN j.attempts - j.attempt_base - j.suspensions > j.max_retries
                         THEN 'dead'
                         ELSE 'queued' END,
           finished_at = CASE WHEN j.cancel_requested
                                   OR j.attempts - j.attempt_base - j.suspensions > j.max_retries
                              THEN now() ELSE NULL END,
           run_at = now(), lease_token = NULL, heartbeat_at = NULL, updated_at = now(),
           last_error = 'lease expired: worker ' || coalesce(j.worker_id, '?')
                        || ' stopped heartbeating'
      FROM stale WHERE j.id = stale.id
    RETURNING j.id, j.status, j.queue, j.priority, j.run_at, j.attempts, j.last_error,
              j.has_dependents, j.worker_id, j.started_at, j.task
), closed AS (
    INSERT INTO job_attempts AS a (job_id, attempt, worker_id, started_at, finished_at,
                                   outcome, error, duration_ms, task)
    SELECT id, attempts, worker_id, coalesce(started_at, now()), now(), 'lost', last_error,
           floor(extract(epoch FROM now() - coalesce(started_at, now())) * 1000)::int, task
      FROM moved
    ON CONFLICT (job_id, attempt) DO UPDATE
       SET finished_at = EXCLUDED.finished_at, outcome = 'lost', error = EXCLUDED.error,
           duration_ms = floor(extract(epoch FROM EXCLUDED.finished_at - a.started_at)
                               * 1000)::int
     WHERE a.outcome IS NULL
)
SELECT id, status, queue, priority, run_at, has_dependents FROM moved;

-- name: scan_queued
-- Queued rows in (run_at, id) order after a keyset position: recovery re-enqueues them
-- (idempotently) so a lost Redis write or a FLUSHALL loses nothing.
SELECT id, queue, priority, run_at, run_at <= now() AS due
  FROM jobs
 WHERE status = 'queued' AND NOT cancel_requested
   AND (%(after_run_at)s::timestamptz IS NULL
        OR (run_at, id) > (%(after_run_at)s::timestamptz, %(after_id)s::uuid))
 ORDER BY run_at, id
 LIMIT %(limit)s;

-- name: scan_due_suspended
-- Due suspended rows in (run_at, id) order after a keyset position (along
-- jobs_suspended_run_at_idx): recovery enqueues them (idempotently), so a wake Redis lost
-- still comes. Not-due ones wait in PostgreSQL until they are due.
SELECT id, queue, priority, run_at, true AS due
  FROM jobs
 WHERE status = 'suspended' AND run_at <= now()
   AND (%(after_run_at)s::timestamptz IS NULL
        OR (run_at, id) > (%(after_run_at)s::timestamptz, %(after_id)s::uuid))
 ORDER BY run_at, id
 LIMIT %(limit)s;

-- name: lock_fold_mark
-- The first statement of a fold (one transaction): the mark, locked, so folds run one at a
-- time and a delete's trigger waits for the fold under way; the next statement's snapshot
-- then sees every delete that committed first.
SELECT folded_to, now() - make_interval(secs => %(lag)s) AS upto
  FROM job_counts_folded FOR UPDATE;

-- name: fold_finished_counts
-- Completed and cancelled jobs that finished after the mark and at least %(lag)s ago (every
-- statement that set their finished_at has committed) are added to job_counts, and the mark
-- moves on. A range scan of jobs_finished_idx: the rows of about one sweep's interval.
WITH fresh AS (
    SELECT queue, status, count(*) AS n FROM jobs
     WHERE status IN ('completed', 'cancelled')
       AND finished_at > %(folded_to)s AND finished_at <= %(upto)s
     GROUP BY queue, status
), bumped AS (
    INSERT INTO job_counts AS c (queue, status, n) SELECT queue, status, n FROM fresh
    ON CONFLICT (queue, status) DO UPDATE SET n = c.n + EXCLUDED.n
)
UPDATE job_counts_folded SET folded_to = %(upto)s
RETURNING (SELECT coalesce(sum(n), 0) FROM fresh)::bigint AS folded;

-- name: fold_live_counts
-- Up to %(limit)s of the changes the job statements appended (migration 0013) move into
-- job_live_counts, in one statement: a reader sees them in one table or the other, never both.
-- Two folds at once: the second skips the rows the first deleted.
WITH moved AS (
    DELETE FROM job_count_changes
     WHERE ctid = ANY(ARRAY(SELECT ctid FROM job_count_changes LIMIT %(limit)s))
    RETURNING queue, status, n
), bumped AS (
    INSERT INTO job_live_counts AS c (queue, status, n)
    SELECT queue, status, sum(n) FROM moved GROUP BY queue, status
    ON CONFLICT (queue, status) DO UPDATE SET n = c.n + EXCLUDED.n
)
SELECT count(*)::int AS moved FROM moved;

-- name: prune_finished
-- Retention: completed and cancelled jobs finished before the cutoff, oldest first, in one
-- bounded batch along jobs_finished_idx; their attempts go with them (ON DELETE CASCADE,
-- along job_attempts' primary key), and so do their dependency rows. A parent that an
-- unfinished job still depends on stays (its status and result are that job's input).
-- SKIP LOCKED: two sweeps never wait on each other.
-- (= ANY of an array, not a join: the delete then probes the primary key for any plan.)
WITH gone AS (
    DELETE FROM jobs WHERE id = ANY(ARRAY(
        SELECT id FROM jobs
         WHERE status IN ('completed', 'cancelled')
           AND finished_at < now() - make_interval(secs => %(older_than)s)
           AND NOT (has_dependents AND EXISTS (
               SELECT 1 FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
                WHERE d.parent_id = jobs.id AND c.status IN ('waiting', 'queued', 'processing', 'suspended')))
         ORDER BY finished_at, id
         LIMIT %(limit)s
         FOR UPDATE SKIP LOCKED))
    RETURNING id
)
SELECT count(*)::int AS n FROM gone;

-- name: prune_dead
-- Retention of the DLQ, the same way along jobs_dead_finished_idx.
WITH gone AS (
    DELETE FROM jobs WHERE id = ANY(ARRAY(
        SELECT id FROM jobs
         WHERE status = 'dead' AND finished_at < now() - make_interval(secs => %(older_than)s)
           AND NOT (has_dependents AND EXISTS (
               SELECT 1 FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
                WHERE d.parent_id = jobs.id AND c.status IN ('waiting', 'queued', 'processing', 'suspended')))
         ORDER BY finished_at, id
         LIMIT %(limit)s
         FOR UPDATE SKIP LOCKED))
    RETURNING id
)
SELECT count(*)::int AS n FROM gone;

-- name: prune_periodic_runs
-- Slot rows older than the cutoff, except each task's latest (the next slot is counted
-- from it).
DELETE FROM periodic_runs r
 WHERE r.slot < now() - make_interval(secs => %(older_than)s)
   AND r.slot < (SELECT max(l.slot) FROM periodic_runs l WHERE l.task = r.task);

-- name: save_progress
-- What running tasks reported, for every attempt the worker still holds, in one statement.
-- By primary key (as complete_jobs).
UPDATE jobs j
   SET progress = p.fraction, progress_message = p.message, updated_at = now()
  FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(fractions)s::real[], %(messages)s::text[])
       AS p(id, token, fraction, message)
 WHERE j.id = ANY(%(ids)s::uuid[]) AND j.id = p.id AND j.lease_token = p.token
   AND j.status IS NOT DISTINCT FROM 'processing'
RETURNING j.id;

-- name: last_periodic_runs
-- Each task's latest slot (along the primary key, one index probe per task).
SELECT t.task, r.slot, r.job_id
  FROM unnest(%(tasks)s::text[]) AS t(task)
  JOIN LATERAL (SELECT slot, job_id FROM periodic_runs p WHERE p.task = t.task
                 ORDER BY slot DESC LIMIT 1) r ON true;

-- name: mark_periodic_seen
-- A schedule seen for the first time: its current slot is recorded without a job.
INSERT INTO periodic_runs (task, slot) VALUES (%(task)s, %(slot)s) ON CONFLICT DO NOTHING;

-- name: insert_periodic_job
-- One job for one (task, slot): the slot row and the job commit together or not at all,
-- and a second scheduler racing for the same slot inserts neither (the primary key).
WITH slot AS (
    INSERT INTO periodic_runs (task, slot, job_id) VALUES (%(task)s, %(slot)s, %(id)s)
    ON CONFLICT DO NOTHING
    RETURNING job_id
)
INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds)
SELECT job_id, %(task)s, %(payload)s, %(queue)s, %(priority)s, %(max_retries)s,
       %(timeout_seconds)s
  FROM slot
RETURNING ceil(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms, true AS due;

-- name: ping
SELECT 1 AS ok;

-- name: finished_per_minute
-- The overview's chart: per minute of the last %(minutes)s (this one included), attempts
-- that completed, attempts that failed (failed, timed out or lost) and jobs that went dead.
-- Index range scans only: job_attempt_history's (job_attempts_finished_idx, 0004, and
-- jobs_finished_idx for the completed ones) and jobs_dead_finished_idx.
-- date_bin from the (UTC, minute-aligned) start: half the CPU of date_trunc on timestamptz.
WITH since AS (
    SELECT date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1) AS t
)
SELECT minute, sum(completed)::bigint AS completed, sum(failed)::bigint AS failed,
       sum(dead)::bigint AS dead
  FROM (SELECT date_bin('1 minute', a.finished_at, since.t) AS minute,
               count(*) FILTER (WHERE a.outcome = 'completed') AS completed,
               count(*) FILTER (WHERE a.outcome IN ('failed', 'timed_out', 'lost')) AS failed,
               0 AS dead
          FROM job_attempt_history a, since
         -- the bound spelt out, not since.t: a join's column is not pushed into the view
         WHERE a.finished_at >= date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1)
         GROUP BY 1
        UNION ALL
        SELECT date_bin('1 minute', j.finished_at, since.t), 0, 0, count(*)
          FROM jobs j, since
         WHERE j.status = 'dead' AND j.finished_at >= since.t
         GROUP BY 1) per
 GROUP BY minute
 ORDER BY minute;

-- name: cost_counts
-- The cost estimate's counts for the last hour and day: jobs, submit requests (a batch's
-- jobs share its transaction's created_at), finished attempts and their run time. Range
-- scans of jobs_created_idx and job_attempt_history's (job_attempts_finished_idx and
-- jobs_finished_idx).
SELECT w.label,
       (SELECT count(*) FROM jobs WHERE created_at >= now() - w.span)::bigint AS jobs,
       (SELECT count(DISTINCT created_at) FROM jobs
         WHERE created_at >= now() - w.span)::bigint AS requests,
       (SELECT count(*) FROM job_attempt_history WHERE finished_at >= now() - w.span)::bigint
         AS attempts,
       (SELECT coalesce(sum(extract(epoch FROM finished_at - started_at)), 0)
          FROM job_attempt_history WHERE finished_at >= now() - w.span)::float8
         AS attempt_seconds
  FROM (VALUES ('hour', interval '1 hour'), ('day', interval '1 day')) AS w(label, span)
 ORDER BY w.span;
