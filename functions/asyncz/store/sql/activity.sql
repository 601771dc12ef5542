-- What the system is doing and has done lately (asyncz.store.activity): per-task figures
-- and the jobs each worker runs now.

-- name: task_figures
-- Per task and queue, the attempts that finished in the last %(minutes)s minutes: along
-- job_attempt_history's indexes (job_attempts_finished_idx, 0004; jobs_finished_idx for the
-- completed ones, 0025), each joined to its job by primary key. The queue wait
-- (ready to start) is known for a job's latest attempt only (its run_at is the time it was
-- due; an earlier attempt's was overwritten by the retry it scheduled).
SELECT j.task, j.queue,
       count(*) AS runs,
       count(*) FILTER (WHERE a.outcome = 'completed') AS completed,
       count(*) FILTER (WHERE a.outcome IN ('failed', 'timed_out', 'lost')) AS failures,
       count(*) FILTER (WHERE a.attempt > 1) AS retries,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) AS run_p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) AS run_p95_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY w.wait_ms) AS wait_p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY w.wait_ms) AS wait_p95_ms
  FROM job_attempt_history a
  JOIN jobs j ON j.id = a.job_id
  LEFT JOIN LATERAL (
      SELECT extract(epoch FROM a.started_at - j.run_at) * 1000 AS wait_ms
       WHERE a.attempt = j.attempts AND j.run_at <= a.started_at) w ON true
 WHERE a.finished_at >= now() - make_interval(mins => %(minutes)s)
 GROUP BY j.task, j.queue
 ORDER BY j.task, j.queue;

-- name: running_jobs
-- The attempts running now, along jobs_processing_heartbeat_idx (as many rows as run).
SELECT id::text AS job_id, task, queue, worker_id, attempts AS attempt, started_at,
       extract(epoch FROM now() - started_at) AS elapsed_seconds, progress, progress_message,
       heartbeat_at
  FROM jobs
 WHERE status = 'processing' AND heartbeat_at IS NOT NULL
 ORDER BY started_at
 LIMIT %(limit)s;
