-- Spawned jobs (docs/durable.md, "Spawned jobs"): a durable task submits jobs of its own
-- with ctx.spawn. They are named apart from job dependencies (depends_on): a spawned job
-- does not wait on its spawner, and its spawner waits on it only when it gathers it.
--
-- spawned_by: the job whose task spawned this one (NULL: submitted from outside). A job a
--   unique key pointed a spawn to keeps its own (it was not created by that spawn), so a
--   cancel's cascade, which follows spawned_by, never reaches it.
-- spawn_depth: how many spawners stand above this job (0: submitted from outside); a spawn
--   from a job at ASYNCZ_MAX_SPAWN_DEPTH is refused.
-- Constant defaults and NULLs: adding them rewrites nothing, and plain rows never enter the
-- partial indexes below.
ALTER TABLE jobs
    ADD COLUMN spawned_by  uuid,
    ADD COLUMN spawn_depth smallint NOT NULL DEFAULT 0;

-- A spawner's jobs, newest first (GET /jobs?spawned_by=, and their count in GET /jobs/{id}).
CREATE INDEX jobs_spawned_by_idx ON jobs (spawned_by, created_at DESC, id DESC)
    WHERE spawned_by IS NOT NULL;
-- The live ones only: a cancel's cascade reads a bounded page of them, however many of a
-- spawner's jobs have ended already.
CREATE INDEX jobs_spawned_live_idx ON jobs (spawned_by, id)
    WHERE spawned_by IS NOT NULL AND status IN ('waiting', 'queued', 'processing', 'suspended');

-- ctx.gather: a wait (migration 0019) of kind 'gather' on some of the task's spawned jobs,
-- resolved exactly once, when the last of them has ended.
--
-- job_gathers: the edges of a gather, one per job it waits on (its place in the list it
--   returns; settled once that job's end is counted). Written when the gather begins.
-- job_steps.pending: a waiting gather's edges not settled yet.
-- A job's end is counted as a parent's end is for its children (sql/dependencies.sql): after
-- the end commits, its cascade (a spawned or gathered job has has_dependents) settles its
-- edges, under the gatherer's row lock, then the wait's: the flag is the guard (an edge is
-- counted once) and the count that reaches 0 completes the wait (once: it must be 'waiting').
-- A gather counts the jobs that ended before it began, and settles, after its own commit,
-- those that ended while it was being stored; recovery's sweep settles what a crash left.
CREATE TABLE job_gathers (
    child_id uuid    NOT NULL,
    job_id   uuid    NOT NULL,
    seq      integer NOT NULL,
    position integer NOT NULL,
    settled  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (child_id, job_id, seq),
    FOREIGN KEY (job_id, seq) REFERENCES job_steps (job_id, seq) ON DELETE CASCADE
);
-- A gather's edges in order (its value, a full settle), and the foreign key's deletes.
CREATE INDEX job_gathers_wait_idx ON job_gathers (job_id, seq, position);
GRANT SELECT, INSERT, UPDATE, DELETE ON job_gathers TO asyncz_app;
ALTER TABLE job_steps ADD COLUMN pending integer;

-- A gather's value: each job's end, in the gather's order, or, past the bound the gather
-- was given (its terms' max_bytes, ASYNCZ_MAX_GATHER_BYTES), only the size it would have had.
CREATE FUNCTION asyncz_gather_value(p_job uuid, p_seq integer, p_max integer)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    value jsonb;
BEGIN
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'job_id', g.child_id, 'status', coalesce(c.status, 'purged'),
               'result', c.result, 'error', c.last_error) ORDER BY g.position), '[]'::jsonb)
      INTO value
      FROM job_gathers g LEFT JOIN jobs c ON c.id = g.child_id
     WHERE g.job_id = p_job AND g.seq = p_seq;
    IF octet_length(value::text) > p_max THEN
        RETURN jsonb_build_object('too_large', octet_length(value::text), 'max_bytes', p_max);
    END IF;
    RETURN value;
END
$$;
