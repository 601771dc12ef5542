-- Job dependencies: a job may wait for other jobs (its parents) to finish.

-- A new live status, 'waiting': stored, not in Redis, until its last parent finishes. The
-- check is replaced NOT VALID: every row satisfies the narrower one it replaces, so no scan
-- of the table under its lock is needed; new and updated rows are checked as before.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('waiting', 'queued', 'processing', 'completed', 'dead', 'cancelled')) NOT VALID;

-- open_parents: the parents a waiting job still waits for (decremented once per parent as it
--   finishes, under the child's row lock, so the last two finishing at once release it once).
--   It can only be too high, never too low: the recovery sweep releases a waiting job none
--   of whose parents is live.
-- depth: 0 for a job without parents, else 1 + its deepest parent's (bounded at submit).
-- has_dependents: set (under the parent's row lock) when a child names it, so the statement
--   that ends a job says whether its children must be settled, and jobs without any pay
--   nothing more. Constant defaults: adding them rewrites nothing.
ALTER TABLE jobs
    ADD COLUMN open_parents   integer  NOT NULL DEFAULT 0 CHECK (open_parents >= 0),
    ADD COLUMN depth          smallint NOT NULL DEFAULT 0 CHECK (depth >= 0),
    ADD COLUMN has_dependents boolean  NOT NULL DEFAULT false;

-- One row per (child, parent). parent_ref: the parent's ref in the batch that submitted both
-- (the task sees its parents' results by job id and by ref). settled: the parent's end was
-- applied to this child (once: the flag is the guard). No foreign key on parent_id: a
-- finished parent may go before its finished children (retention keeps it while any child
-- still needs it); the child's rows go with the child.
CREATE TABLE job_dependencies (
    child_id          uuid    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    parent_id         uuid    NOT NULL,
    on_parent_failure text    NOT NULL DEFAULT 'fail' CHECK (on_parent_failure IN ('fail', 'run')),
    parent_ref        text    CHECK (length(parent_ref) BETWEEN 1 AND 100),
    settled           boolean NOT NULL DEFAULT false,
    PRIMARY KEY (child_id, parent_id)
);
CREATE INDEX job_dependencies_parent_idx ON job_dependencies (parent_id);

-- The live status's partial index (counts, GET /jobs?status=waiting, the listing's live arm,
-- the recovery sweep over waiting jobs).
CREATE INDEX jobs_waiting_idx ON jobs (created_at DESC, id DESC) WHERE status = 'waiting';

GRANT SELECT, INSERT, UPDATE, DELETE ON job_dependencies TO asyncz_app;
