-- GET /stats and GET /jobs?task=/?queue= read as little with a million jobs queued as with a
-- thousand.

-- The live statuses (waiting, queued, processing, dead) are counted as they change, not read
-- from their partial indexes (a queued count read every delayed job). Each statement that
-- inserts, updates or deletes jobs appends its net change per queue and status to
-- job_count_changes (a statement trigger, whatever code runs the statement; an append, so
-- concurrent submits and claims never wait on one counter row); the count folding of the
-- recovery sweep moves those rows into job_live_counts. GET /stats adds both: one snapshot
-- sees a fold either whole or not at all, so the counts stay exact.
CREATE TABLE job_live_counts (
    queue  text   NOT NULL,
    status text   NOT NULL CHECK (status IN ('waiting', 'queued', 'processing', 'dead')),
    n      bigint NOT NULL,
    PRIMARY KEY (queue, status)
);

-- No index: only ever appended to, and read or emptied whole.
CREATE TABLE job_count_changes (
    queue  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL
);

-- The rows an INSERT added or a DELETE took (the transition table `changed` of either).
CREATE FUNCTION asyncz_count_added_or_gone_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_changes (queue, status, n)
    SELECT queue, status, CASE TG_OP WHEN 'DELETE' THEN -count(*) ELSE count(*) END
      FROM changed
     WHERE status IN ('waiting', 'queued', 'processing', 'dead')
     GROUP BY queue, status;
    RETURN NULL;
END
$$;

-- A statement that changes no status (a heartbeat, progress) nets to nothing and appends no row.
CREATE FUNCTION asyncz_count_updated_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_changes (queue, status, n)
    SELECT queue, status, sum(n) FROM (
        SELECT queue, status, -1 AS n FROM old_rows
         WHERE status IN ('waiting', 'queued', 'processing', 'dead')
        UNION ALL
        SELECT queue, status, 1 FROM new_rows
         WHERE status IN ('waiting', 'queued', 'processing', 'dead')
    ) d
     GROUP BY queue, status
    HAVING sum(n) <> 0;
    RETURN NULL;
END
$$;

CREATE FUNCTION asyncz_reset_live_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_live_counts;
    DELETE FROM job_count_changes;
    RETURN NULL;
END
$$;

-- Writes to jobs wait until this migration commits: the first count below and the triggers
-- start from the same rows.
LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER jobs_count_inserted AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT
    EXECUTE FUNCTION asyncz_count_added_or_gone_jobs();
CREATE TRIGGER jobs_count_updated AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION asyncz_count_updated_jobs();
CREATE TRIGGER jobs_count_deleted AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT
    EXECUTE FUNCTION asyncz_count_added_or_gone_jobs();
CREATE TRIGGER jobs_reset_live_counts AFTER TRUNCATE ON jobs FOR EACH STATEMENT
    EXECUTE FUNCTION asyncz_reset_live_counts();

INSERT INTO job_live_counts (queue, status, n)
SELECT queue, status, count(*) FROM jobs
 WHERE status IN ('waiting', 'queued', 'processing', 'dead')
 GROUP BY queue, status;

-- GET /jobs?task=… and ?queue=… without a status, newest first: the backlog (waiting and
-- queued jobs) along these, as the ended jobs go along jobs_task_ended_idx and
-- jobs_queue_ended_idx. A job gets an entry in each when it is submitted (or retried,
-- replayed); a claim adds none (processing jobs, as many as run, are read through their own
-- partial index).
CREATE INDEX jobs_task_backlog_idx ON jobs (task, created_at DESC, id DESC)
    WHERE status IN ('waiting', 'queued');
CREATE INDEX jobs_queue_backlog_idx ON jobs (queue, created_at DESC, id DESC)
    WHERE status IN ('waiting', 'queued');

GRANT SELECT, INSERT, UPDATE, DELETE ON job_live_counts, job_count_changes TO asyncz_app;
