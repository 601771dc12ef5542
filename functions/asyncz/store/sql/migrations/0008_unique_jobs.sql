-- Unique jobs: a job may hold a key (unique_key) for a scope; while it holds it, a second
-- submit with the same key creates nothing and is answered with this job's id.
--
-- unique_scope: 'queued' (until its first attempt starts), 'queued_or_running' (until it
--   finishes, retries included), 'period' (for unique_for seconds from the submit, whatever
--   its status: until unique_until).
-- unique_until: a 'period' job's end of hold; set NULL by the next submit of the same key
--   once it has passed (a partial index cannot read the clock, so expiry is applied by the
--   statement that needs the key).
-- A replayed job (attempt_base > 0) holds no key: it may run beside a newer job of its key.
-- The checks are added NOT VALID: every existing row has NULLs and satisfies them, so no
-- scan of the table under its lock is needed.
ALTER TABLE jobs
    ADD COLUMN unique_key   text,
    ADD COLUMN unique_scope text,
    ADD COLUMN unique_until timestamptz;
ALTER TABLE jobs ADD CONSTRAINT jobs_unique_key_check
    CHECK (length(unique_key) BETWEEN 1 AND 200) NOT VALID;
ALTER TABLE jobs ADD CONSTRAINT jobs_unique_scope_check
    CHECK ((unique_key IS NULL AND unique_scope IS NULL)
           OR unique_scope IN ('queued', 'queued_or_running', 'period')) NOT VALID;

-- The one rule, enforced by PostgreSQL for concurrent submits (no read-then-insert race):
-- at most one job holds a key at a time. Its predicate is the "holds" test every unique
-- query repeats word for word (so the planner uses this index, and ON CONFLICT infers it).
CREATE UNIQUE INDEX jobs_unique_hold_idx ON jobs (unique_key)
 WHERE unique_key IS NOT NULL AND attempt_base = 0
   AND CASE unique_scope
         WHEN 'queued' THEN status IN ('waiting', 'queued') AND attempts = 0
         WHEN 'queued_or_running' THEN status IN ('waiting', 'queued', 'processing')
         ELSE unique_until IS NOT NULL
       END;
