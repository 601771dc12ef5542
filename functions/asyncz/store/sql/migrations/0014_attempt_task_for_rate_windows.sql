-- The task of each attempt, so the rate windows Redis holds can be rebuilt from the
-- attempts' start times after a flush or a failover without reading every attempt of the
-- window: one index range per rated task. Attempts made before this migration have no task;
-- only a window open at the upgrade is rebuilt without them.
ALTER TABLE job_attempts ADD COLUMN task text;

CREATE INDEX job_attempts_task_started_idx ON job_attempts (task, started_at DESC)
    WHERE task IS NOT NULL;
