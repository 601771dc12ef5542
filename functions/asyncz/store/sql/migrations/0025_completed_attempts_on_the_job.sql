-- A completed attempt is no longer written as a row of job_attempts: the job's own row
-- already holds all of it (attempts, worker_id, started_at, finished_at, task) and keeps it,
-- since a completed job never runs again (only a dead job is replayed). The row, its three
-- index entries and its foreign key's lock on the job were ~455 B of WAL at every
-- completion and ~55 B more at retention's delete: a fifth of a plain job's whole life
-- (bench_pg_cost, BENCHMARKS.md). job_attempts keeps the attempts that did not complete
-- (failed, timed out, lost, cancelled, suspended) and the open rows of an earlier release.
--
-- job_attempt_history is every attempt that ended, whichever release wrote it: a job's
-- completed attempt is read from the job (a completed row an earlier release wrote to
-- job_attempts is left out: the job says the same). Each reader's condition goes into both
-- branches: a job's history by primary key, a time range along job_attempts_finished_idx
-- and jobs_finished_idx.
CREATE VIEW job_attempt_history AS
SELECT job_id, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms, task
  FROM job_attempts
 WHERE outcome IS DISTINCT FROM 'completed'
UNION ALL
SELECT id, attempts, worker_id, started_at, finished_at, 'completed', NULL,
       floor(extract(epoch FROM finished_at - started_at) * 1000)::int, task
  FROM jobs
 WHERE status = 'completed' AND started_at IS NOT NULL;

GRANT SELECT ON job_attempt_history TO asyncz_app;
