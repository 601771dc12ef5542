-- Idempotency keys: only the jobs that have one are in their unique index. The UNIQUE
-- constraint held a NULL entry for every job, and as no update of a job's status is HOT
-- (the partial indexes read it), the claim and the completion each wrote one more: three
-- index entries a job for nothing (bench_pg_cost: BENCHMARKS.md).
--
-- The statements name the index's predicate (ON CONFLICT (idempotency_key) WHERE
-- idempotency_key IS NOT NULL), which infers this index and the constraint it replaces
-- alike: a deploy updates the functions before it runs this migration. A lookup by key
-- (`idempotency_key = …`) implies the predicate, so it reads this index too.
--
-- Writes to jobs wait while the index is built (a few seconds for a million jobs).
CREATE UNIQUE INDEX jobs_idempotency_key_idx ON jobs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
ALTER TABLE jobs DROP CONSTRAINT jobs_idempotency_key_key;
