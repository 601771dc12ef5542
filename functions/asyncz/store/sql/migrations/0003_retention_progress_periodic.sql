-- Issue 18: retention, progress reports and periodic jobs.

-- Progress a running task reports (ctx.progress): kept after the job ends.
ALTER TABLE jobs
    ADD COLUMN progress         real CHECK (progress BETWEEN 0 AND 1),
    ADD COLUMN progress_message text CHECK (length(progress_message) <= 1000);

-- Retention deletes finished jobs oldest first in bounded batches: this partial index
-- covers exactly the rows it may delete (dead ones use jobs_dead_finished_idx).
CREATE INDEX jobs_finished_idx ON jobs (finished_at, id) WHERE status IN ('completed', 'cancelled');

-- One row per (task, slot) a scheduler enqueued: the primary key is what makes two
-- schedulers racing for one slot enqueue one job. job_id is NULL for the slot a schedule
-- was first seen in (it runs from the next slot on); no foreign key, since retention may
-- delete the job long before the slot row.
CREATE TABLE periodic_runs (
    task       text        NOT NULL CHECK (length(task) BETWEEN 1 AND 200),
    slot       timestamptz NOT NULL,
    job_id     uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task, slot)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON periodic_runs TO asyncz_app;
