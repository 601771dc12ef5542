-- GET /stats and GET /jobs stay as cheap at millions of rows as at a thousand.

-- Completed and cancelled jobs are the statuses that grow with history. Their counts per
-- queue are folded in by the recovery sweep (fold_finished_counts: the rows that finished
-- after job_counts_folded.folded_to, up to a few seconds ago), so the job paths write
-- nothing more; GET /stats adds the few rows finished since the last fold. Deleting jobs
-- (retention) takes its rows back out in a statement trigger, whatever code deletes them.
-- The live statuses (queued, processing, dead) are counted from their partial indexes.
CREATE TABLE job_counts (
    queue  text   NOT NULL,
    status text   NOT NULL CHECK (status IN ('completed', 'cancelled')),
    n      bigint NOT NULL,
    PRIMARY KEY (queue, status)
);

CREATE TABLE job_counts_folded (
    one       boolean     PRIMARY KEY DEFAULT true CHECK (one),
    folded_to timestamptz NOT NULL
);

-- A deleted row that a fold counted leaves the count. FOR SHARE waits for a fold under
-- way, so a row is counted and uncounted both or neither.
CREATE FUNCTION asyncz_uncount_deleted_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH mark AS (
        SELECT folded_to FROM job_counts_folded FOR SHARE
    ), counted AS (
        SELECT g.queue, g.status, count(*) AS n
          FROM gone g, mark
         WHERE g.status IN ('completed', 'cancelled') AND g.finished_at <= mark.folded_to
         GROUP BY g.queue, g.status
    )
    UPDATE job_counts c SET n = c.n - counted.n
      FROM counted WHERE c.queue = counted.queue AND c.status = counted.status;
    RETURN NULL;
END
$$;

CREATE FUNCTION asyncz_reset_job_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_counts;
    RETURN NULL;
END
$$;

-- One trigger call per DELETE statement (a retention batch, a purge), none per row.
CREATE TRIGGER jobs_uncount_deleted AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION asyncz_uncount_deleted_jobs();
CREATE TRIGGER jobs_reset_counts AFTER TRUNCATE ON jobs FOR EACH STATEMENT
    EXECUTE FUNCTION asyncz_reset_job_counts();

-- The first fold, in the migration (the triggers above hold the table's lock until it
-- commits, so no delete slips between the count and the trigger).
INSERT INTO job_counts_folded (folded_to) VALUES (now() - interval '10 seconds');
INSERT INTO job_counts (queue, status, n)
SELECT queue, status, count(*) FROM jobs
 WHERE status IN ('completed', 'cancelled')
   AND finished_at <= (SELECT folded_to FROM job_counts_folded)
 GROUP BY queue, status;

-- GET /jobs?queue=… and ?task=…, newest first: a filter that matches nothing reads nothing,
-- instead of walking jobs_created_idx to its end. Over the finished jobs only (the history):
-- a job gets one entry in each, when it ends, instead of one per state change (full indexes
-- cost ~30% more WAL per job); the live jobs are found through their own partial indexes.
CREATE INDEX jobs_queue_ended_idx ON jobs (queue, created_at DESC, id DESC)
    WHERE status IN ('completed', 'cancelled', 'dead');
CREATE INDEX jobs_task_ended_idx ON jobs (task, created_at DESC, id DESC)
    WHERE status IN ('completed', 'cancelled', 'dead');

GRANT SELECT, INSERT, UPDATE, DELETE ON job_counts, job_counts_folded TO asyncz_app;
