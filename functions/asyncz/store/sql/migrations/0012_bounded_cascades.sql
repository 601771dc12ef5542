-- Cascades in bounded pages: settling a parent's children, cancel's cascade and replay's heal
-- each run a page at a time (across transactions), so no statement grows with a parent's
-- children.
--
-- cascade_pending: this job has a cascade that may not be done yet (its children not all
--   settled after its end, or, after a replay, children that ended because of it not all
--   brought back). Set by the statement that starts a cascade an operator asked for, and by
--   a cascade that needs more than one page; cleared once a check finds nothing left. The
--   recovery sweep resumes every flagged job, so a crash between pages loses nothing.
--   A constant default: adding it rewrites nothing.
ALTER TABLE jobs ADD COLUMN cascade_pending boolean NOT NULL DEFAULT false;
CREATE INDEX jobs_cascade_pending_idx ON jobs (id) WHERE cascade_pending;

-- The edges of a parent, by whether they are settled: a settle's page seeks straight to the
-- unsettled ones, so the 200th page of a parent with 200,000 children reads no more than the
-- first (the plain parent index it replaces made each page step over the settled ones; its
-- other readers, a parent's children, use the leading column as before).
DROP INDEX job_dependencies_parent_idx;
CREATE INDEX job_dependencies_parent_idx ON job_dependencies (parent_id, settled);

-- The jobs a heal brings back, by the parent they blame: a page reads only the dead
-- children that are still to heal.
CREATE INDEX jobs_parent_failed_idx ON jobs (last_error)
    WHERE status = 'dead' AND last_error LIKE 'parent_failed: %';

-- parent_ended: how the parent ended, kept on the edge when it is settled, so a parent that
-- retention has since deleted still counts as what it was (completed, dead, cancelled), not
-- as dead. Edges settled before this migration have none: a gone parent of theirs still
-- counts as dead, as before.
ALTER TABLE job_dependencies ADD COLUMN parent_ended text
    CHECK (parent_ended IN ('completed', 'dead', 'cancelled'));
