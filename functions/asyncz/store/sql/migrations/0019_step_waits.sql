-- Waits of durable tasks (docs/durable.md, "Waits"): a task that waits on the world (an
-- event, a callback, the jobs it spawned) records the wait as a step of its own kind with
-- status 'waiting', its deadline (wait_until: every wait has one) and, when something finds
-- it by a key, its routing key (wait_key: an event's name and key, a callback token's hash).
-- The attempt then suspends until the deadline. A resolve completes the step with a value
-- (conditional on 'waiting': the first commit wins, the timeout included) and wakes the job.
-- While a wait is waiting, its result holds the wait's terms (what its resolver checks, such
-- as the keys an event may come from); once completed, its value.
ALTER TABLE job_steps DROP CONSTRAINT job_steps_status_check;
ALTER TABLE job_steps ADD CONSTRAINT job_steps_status_check
    CHECK (status IN ('completed', 'failed', 'waiting')) NOT VALID;
ALTER TABLE job_steps
    ADD COLUMN wait_until timestamptz,
    ADD COLUMN wait_key   text;

-- Resolvers find the waits by kind and key along this index; only waiting rows enter it,
-- so a step that runs (the common write) adds no index entry, and a resolved wait leaves.
CREATE INDEX job_steps_waiting_idx ON job_steps (kind, wait_key, job_id, seq)
    WHERE status = 'waiting';

-- woken: a resolve that finds the job's attempt still running (the wait stored, its
-- suspension not yet committed) sets it; suspend_job reads it (the job wakes at once instead
-- of at the deadline) and clears it. A constant default: no table rewrite, and no plain
-- statement reads or writes it.
ALTER TABLE jobs ADD COLUMN woken boolean NOT NULL DEFAULT false;
