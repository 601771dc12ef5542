-- AsyncZ schema v1: jobs (the only truth) and their attempt log.

CREATE TABLE jobs (
    id               uuid        PRIMARY KEY,
    task             text        NOT NULL CHECK (length(task) BETWEEN 1 AND 200),
    payload          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    queue            text        NOT NULL DEFAULT 'default' CHECK (length(queue) BETWEEN 1 AND 100),
    priority         smallint    NOT NULL DEFAULT 0 CHECK (priority BETWEEN -100 AND 100),
    status           text        NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'processing', 'completed', 'dead', 'cancelled')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- attempts used before the last replay: a replayed job gets its full retry budget
    -- again while the attempt log keeps counting (attempt numbers never repeat).
    attempt_base     integer     NOT NULL DEFAULT 0 CHECK (attempt_base >= 0),
    max_retries      integer     NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 20),
    timeout_seconds  integer     NOT NULL DEFAULT 300 CHECK (timeout_seconds > 0),
    idempotency_key  text        UNIQUE,
    run_at           timestamptz NOT NULL DEFAULT now(),
    lease_token      uuid,
    worker_id        text,
    heartbeat_at     timestamptz,
    cancel_requested boolean     NOT NULL DEFAULT false,
    result           jsonb,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT processing_has_lease
        CHECK (status <> 'processing' OR (lease_token IS NOT NULL AND heartbeat_at IS NOT NULL))
);

-- Partial indexes stay small however large the table grows: each covers one live state.
CREATE INDEX jobs_queued_run_at_idx ON jobs (run_at, id) WHERE status = 'queued';
CREATE INDEX jobs_processing_heartbeat_idx ON jobs (heartbeat_at) WHERE status = 'processing';
CREATE INDEX jobs_dead_finished_idx ON jobs (finished_at DESC, id DESC) WHERE status = 'dead';
-- Keyset pagination of GET /jobs, newest first.
CREATE INDEX jobs_created_idx ON jobs (created_at DESC, id DESC);

CREATE TABLE job_attempts (
    job_id       uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt      integer     NOT NULL CHECK (attempt >= 1),
    worker_id    text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    outcome      text CHECK (outcome IN ('completed', 'failed', 'timed_out', 'lost', 'cancelled')),
    error        text,
    duration_ms  integer,
    PRIMARY KEY (job_id, attempt)
);
