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
