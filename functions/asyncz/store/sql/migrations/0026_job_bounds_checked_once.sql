-- The bounds of a job's inputs (text lengths, priority, retries, timeout, trace context,
-- progress, the unique scope's names) are checked by the service before any write
-- (asyncz.jobs.bounds_error for every way a job is made, the worker's progress report, the
-- suspension's reason cut to its length), no longer by CHECK constraints of jobs. PostgreSQL
-- reads every CHECK constraint of a table from its stored text and compiles it again for
-- each statement that inserts or updates a row, and tests each on every row: these thirteen
-- were ~11 KB of that text: a fifth of a backend's CPU for a single submit, and 10-14 µs a
-- job of its CPU for each claim and completion of ten (perf; BENCHMARKS.md). The constraints
-- that guard the state the engine moves through stay: the status's names, a running job's
-- lease, and the counters that never go below zero.
ALTER TABLE jobs
    DROP CONSTRAINT IF EXISTS jobs_task_check,
    DROP CONSTRAINT IF EXISTS jobs_queue_check,
    DROP CONSTRAINT IF EXISTS jobs_concurrency_key_check,
    DROP CONSTRAINT IF EXISTS jobs_unique_key_check,
    DROP CONSTRAINT IF EXISTS jobs_unique_scope_check,
    DROP CONSTRAINT IF EXISTS jobs_priority_check,
    DROP CONSTRAINT IF EXISTS jobs_max_retries_check,
    DROP CONSTRAINT IF EXISTS jobs_timeout_seconds_check,
    DROP CONSTRAINT IF EXISTS jobs_traceparent_check,
    DROP CONSTRAINT IF EXISTS jobs_tracestate_check,
    DROP CONSTRAINT IF EXISTS jobs_progress_check,
    DROP CONSTRAINT IF EXISTS jobs_progress_message_check,
    DROP CONSTRAINT IF EXISTS jobs_suspended_for_check;
