-- The outbox of lifecycle events (docs/events.md): one row for each end of a job
-- (completed, dead, cancelled) and each replay (dead to queued or waiting), written by a
-- statement trigger on jobs in the same transaction as the change, whatever statement made
-- it (a completion, a failure, recovery's lost lease, a cancel, a cascade, a replay, a heal).
-- A change that rolls back takes its row with it; a change that commits cannot lose it. The
-- events function (asyncz.outbox.handler) hands the rows to the configured sinks and deletes
-- them once every sink took them: a row here is an event not yet published (its state of
-- publication is its presence). Retention (ASYNCZ_RETAIN_OUTBOX_SECONDS) drops one that
-- nothing published for that long. Not named `events`: that table holds durable tasks'
-- events (0020).
--
-- What a plain job pays for its event (bench_pg_cost, BENCHMARKS.md): one heap row and one
-- entry of an index that only grows at its right edge. No primary key: the id is a random
-- UUID (unique by construction), and a random key's index cost more WAL than the row; a
-- published row is deleted, not updated (an update that leaves the pending set is a new
-- row version and index entries; a delete is a few bytes).
--
-- The row copies what a consumer needs of the job at that moment (a replay or retention
-- may change or delete the job before the row is published). The result is not copied:
-- the publisher adds it when a deployment asks for it (ASYNCZ_OUTBOX_RESULT_BYTES), read
-- from the job only while the job still has the end this row records.
CREATE TABLE job_outbox (
    id           uuid        NOT NULL DEFAULT gen_random_uuid(),
    type         text        NOT NULL CHECK (type IN ('asyncz.job.completed', 'asyncz.job.dead',
                                                      'asyncz.job.cancelled',
                                                      'asyncz.job.replayed')),
    job_id       uuid        NOT NULL,
    task         text        NOT NULL,
    queue        text        NOT NULL,
    status       text        NOT NULL,
    attempts     integer     NOT NULL,
    submitted_at timestamptz NOT NULL,
    started_at   timestamptz,
    finished_at  timestamptz,
    submitted_by text,
    traceparent  text,
    tracestate   text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
-- what the publisher reads (oldest first), the backlog's age and retention's pages
CREATE INDEX job_outbox_created_idx ON job_outbox (created_at);

-- `new_rows` are the statement's new rows; `old_rows` its old rows (UPDATE only). A row enters
-- for a job whose status became an end, or left 'dead' (a replay or a heal); an update
-- that leaves the status as it was (a heartbeat, a cascade's flag on a dead job) adds none.
CREATE FUNCTION asyncz_outbox_job_ends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- a job submitted already ended (a parent failed before it was stored)
        INSERT INTO job_outbox (type, job_id, task, queue, status, attempts, submitted_at,
                                started_at, finished_at, submitted_by, traceparent, tracestate)
        SELECT 'asyncz.job.' || n.status, n.id, n.task, n.queue, n.status, n.attempts,
               n.created_at, n.started_at, n.finished_at, n.submitted_by, n.traceparent,
               n.tracestate
          FROM new_rows n
         WHERE n.status IN ('completed', 'dead', 'cancelled');
    ELSE
        INSERT INTO job_outbox (type, job_id, task, queue, status, attempts, submitted_at,
                                started_at, finished_at, submitted_by, traceparent, tracestate)
        SELECT CASE WHEN o.status = 'dead' THEN 'asyncz.job.replayed'
                    ELSE 'asyncz.job.' || n.status END,
               n.id, n.task, n.queue, n.status, n.attempts, n.created_at, n.started_at,
               n.finished_at, n.submitted_by, n.traceparent, n.tracestate
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE n.status IS DISTINCT FROM o.status
           AND (n.status IN ('completed', 'dead', 'cancelled') OR o.status = 'dead');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_outbox_inserted AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION asyncz_outbox_job_ends();
CREATE TRIGGER jobs_outbox_updated AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION asyncz_outbox_job_ends();

GRANT SELECT, INSERT, UPDATE, DELETE ON job_outbox TO asyncz_app;
