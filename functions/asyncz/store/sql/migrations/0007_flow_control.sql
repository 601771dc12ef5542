-- Flow control: a job's concurrency key (its per-key limits count by it), and paused queues.

-- concurrency_key: given at submit (e.g. 'tenant:42'); the task's key_concurrency and key_rate
--   count the jobs that share it. NULL: the job counts only against the task's own limits.
--   A nullable column without a default: adding it rewrites nothing.
ALTER TABLE jobs
    ADD COLUMN concurrency_key text CHECK (length(concurrency_key) BETWEEN 1 AND 200);

-- A paused queue accepts jobs and starts none until it is resumed. The row is the pause
-- (Postgres is the truth: the claim statement checks it).
CREATE TABLE queue_pauses (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now(),
    paused_by text
);

GRANT SELECT, INSERT, UPDATE, DELETE ON queue_pauses TO asyncz_app;
