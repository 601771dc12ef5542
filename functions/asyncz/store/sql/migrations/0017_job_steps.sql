-- The steps of durable tasks (docs/durable.md): one row per named step of a job, written
-- by the attempt that holds the job's lease (sql/steps.sql, save_step) and read back by
-- every later attempt, which replays the stored results instead of running them again.
-- A step that raised keeps a 'failed' row without a result (it runs again next try; its
-- row then becomes 'completed'). Rows go with their job (retention deletes them first, in
-- bounded batches, so the cascade finds none). One index: the primary key, in the order
-- the steps were first stored, which is how the history is paged and listed.
CREATE TABLE job_steps (
    job_id       uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq          int         NOT NULL,
    name         text        NOT NULL,
    kind         text        NOT NULL,
    after_name   text,
    status       text        NOT NULL CHECK (status IN ('completed', 'failed')),
    result       jsonb,
    result_bytes int         NOT NULL DEFAULT 0,
    error        text,
    attempts     int         NOT NULL,
    job_attempt  int         NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, seq)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON job_steps TO asyncz_app;
