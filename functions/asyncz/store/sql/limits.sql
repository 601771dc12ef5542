-- Flow control: paused queues (the rows are the truth; workers read them at most a
-- second old).

-- name: pause_queue
-- Pausing a paused queue changes nothing (the first pause's time and key stay).
INSERT INTO queue_pauses (queue, paused_by) VALUES (%(queue)s, %(by)s)
ON CONFLICT (queue) DO NOTHING
RETURNING queue;

-- name: resume_queue
DELETE FROM queue_pauses WHERE queue = %(queue)s RETURNING queue;

-- name: paused_queues
SELECT queue, paused_at, paused_by FROM queue_pauses ORDER BY queue;

-- name: running_limited
-- The running attempts of limited tasks and how long each lease has left: the concurrency
-- slots Redis held, to put back after it lost them. Bounded by the fleet's size (and by
-- %(limit)s), read through the processing jobs' heartbeat index.
SELECT id::text AS id, task, concurrency_key,
       (extract(epoch FROM heartbeat_at + make_interval(secs => %(lease)s) - now()) * 1000
       )::bigint AS left_ms
  FROM jobs
 WHERE status = 'processing' AND task = ANY(%(tasks)s::text[])
   AND heartbeat_at > now() - make_interval(secs => %(lease)s)
 LIMIT %(limit)s;

-- name: recent_starts
-- Per rated task, its newest attempts started inside its window (%(seconds)s, the longest of
-- its rates' periods), at most %(limit)s of them, and how long ago each started: the rate
-- windows Redis held, to put back after it lost them. An attempt that still runs has no row
-- yet (it is written when it ends): the running ones are read from their jobs, through the
-- processing jobs' heartbeat index (as many as run); a completed one is its job's row
-- (0025), found along jobs_finished_idx (it finished after it started, inside the window).
SELECT t.task, j.concurrency_key, a.job_id::text AS job_id, a.attempt,
       (extract(epoch FROM now() - a.started_at) * 1000)::bigint AS age_ms
  FROM unnest(%(tasks)s::text[], %(seconds)s::float8[]) AS t(task, seconds)
 CROSS JOIN LATERAL (
        SELECT job_id, attempt, started_at FROM (
            (SELECT job_id, attempt, started_at FROM job_attempts
              WHERE task = t.task AND started_at > now() - make_interval(secs => t.seconds)
              ORDER BY started_at DESC LIMIT %(limit)s)
            UNION
            (SELECT id, attempts, started_at FROM jobs
              WHERE status = 'completed' AND task = t.task
                AND finished_at > now() - make_interval(secs => t.seconds)
                AND started_at > now() - make_interval(secs => t.seconds)
              ORDER BY started_at DESC LIMIT %(limit)s)
            UNION
            (SELECT id, attempts, started_at FROM jobs
              WHERE status = 'processing' AND heartbeat_at IS NOT NULL AND task = t.task
                AND started_at > now() - make_interval(secs => t.seconds)
              LIMIT %(limit)s)) s
         ORDER BY started_at DESC LIMIT %(limit)s) a
  JOIN jobs j ON j.id = a.job_id;
