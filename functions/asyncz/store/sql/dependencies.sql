-- Named queries of job dependencies (see queries.sql for the conventions). A parent is
-- "live" while waiting, queued or processing, "finished" once completed, dead or cancelled;
-- a parent whose row is gone counts as dead.

-- name: lock_parents
-- The first statement of a submit with parents (one transaction): the parents, locked in
-- id order (two submits never deadlock) until the children are inserted, so a parent
-- cannot finish unseen in between: its ending statement waits, then reads has_dependents.
SELECT id::text AS id, status, depth, has_dependents
  FROM jobs WHERE id = ANY(%(ids)s::uuid[])
 ORDER BY id
   FOR NO KEY UPDATE;

-- name: flag_parents
UPDATE jobs SET has_dependents = true WHERE id = ANY(%(ids)s::uuid[]) AND NOT has_dependents;

-- name: insert_planned_jobs
-- The jobs of a submit with dependencies, each with the status its parents gave it
-- (waiting, queued, or ended at once by a parent that failed). No ON CONFLICT: a repeated
-- idempotency key fails the whole transaction (a graph is stored whole or not at all).
INSERT INTO jobs (id, task, payload, queue, priority, max_retries, timeout_seconds,
                  idempotency_key, run_at, status, open_parents, depth, has_dependents,
                  last_error, finished_at, submitted_by, submitted_by_key_id, concurrency_key,
                  traceparent,
                  tracestate)
SELECT i.id, i.task, i.payload, i.queue, i.priority, i.max_retries, i.timeout_seconds,
       i.idempotency_key, coalesce(i.run_at, now() + make_interval(secs => i.delay_seconds)),
       i.status, i.open_parents, i.depth, i.has_dependents, i.last_error,
       CASE WHEN i.status IN ('dead', 'cancelled') THEN now() END, i.submitted_by,
       i.submitted_by_key_id,
       i.concurrency_key, i.traceparent, i.tracestate
  FROM ROWS FROM (json_to_recordset(%(jobs)s::json)
                  AS (id uuid, task text, payload jsonb, queue text, priority smallint,
                      max_retries int, timeout_seconds int, idempotency_key text,
                      run_at timestamptz, delay_seconds float8, submitted_by text,
                      submitted_by_key_id text, concurrency_key text, traceparent text,
                      tracestate text, status text,
                      open_parents int, depth smallint, has_dependents bool, last_error text))
       WITH ORDINALITY AS i(id, task, payload, queue, priority, max_retries, timeout_seconds,
                            idempotency_key, run_at, delay_seconds, submitted_by,
                            submitted_by_key_id, concurrency_key, traceparent, tracestate,
                            status, open_parents, depth, has_dependents, last_error, n)
 ORDER BY i.n
RETURNING id::text AS id, status, ceil(extract(epoch FROM run_at) * 1000)::bigint AS run_at_ms,
          run_at <= now() AS due;

-- name: insert_dependencies
INSERT INTO job_dependencies (child_id, parent_id, on_parent_failure, parent_ref, settled,
                              parent_ended)
SELECT * FROM unnest(%(children)s::uuid[], %(parents)s::uuid[], %(rules)s::text[],
                     %(refs)s::text[], %(settled)s::bool[], %(ended)s::text[]);

-- name: settle_parents
-- These parents finished: one page of at most %(limit)s of their unsettled edges is settled
-- (the flag is the guard, so a second call, or the sweep, changes nothing; the page seeks
-- to them along job_dependencies_parent_idx (parent_id, settled, child_id), so each page costs
-- the same), and each waiting child
-- counts down under its row lock (the last two parents finishing at once release it once).
-- The parent's end is kept on the edge (parent_ended), for when retention has deleted it.
-- A child whose parent failed (dead, cancelled, gone) under the `fail` rule ends at once:
-- dead, or cancelled when that parent was, with last_error 'parent_failed: <parent id>'.
-- Returns the waiting children it changed, then one row with no id whose `page` says how
-- many edges the page held (fewer than the limit: nothing was left).
WITH ended AS (
    SELECT x.id, coalesce(j.status, 'dead') AS status
      FROM unnest(%(ids)s::uuid[]) AS x(id) LEFT JOIN jobs j ON j.id = x.id
     WHERE j.id IS NULL OR j.status IN ('completed', 'dead', 'cancelled')
), page AS (
    SELECT d.child_id, d.parent_id FROM job_dependencies d
     WHERE d.parent_id = ANY(ARRAY(SELECT id FROM ended)) AND NOT d.settled
     LIMIT %(limit)s
), flipped AS (
    UPDATE job_dependencies d SET settled = true, parent_ended = e.status
      FROM page p JOIN ended e ON e.id = p.parent_id
     WHERE d.child_id = p.child_id AND d.parent_id = p.parent_id AND NOT d.settled
    RETURNING d.child_id, d.parent_id, d.on_parent_failure, e.status AS parent_status
), per_child AS (
    SELECT child_id, count(*)::int AS n,
           (array_agg(parent_id::text ORDER BY parent_id)
              FILTER (WHERE on_parent_failure = 'fail' AND parent_status <> 'completed'))[1]
               AS failed_by,
           (array_agg(parent_status ORDER BY parent_id)
              FILTER (WHERE on_parent_failure = 'fail' AND parent_status <> 'completed'))[1]
               AS failed_status
      FROM flipped GROUP BY child_id
), changed AS (
    UPDATE jobs c
       SET open_parents = greatest(c.open_parents - pc.n, 0),
           status = CASE WHEN pc.failed_by IS NOT NULL
                         THEN CASE WHEN pc.failed_status = 'cancelled' THEN 'cancelled' ELSE 'dead' END
                         WHEN c.open_parents - pc.n <= 0 THEN 'queued' ELSE 'waiting' END,
           last_error = CASE WHEN pc.failed_by IS NOT NULL THEN 'parent_failed: ' || pc.failed_by
                             ELSE c.last_error END,
           finished_at = CASE WHEN pc.failed_by IS NOT NULL THEN now() END,
           updated_at = now()
      FROM per_child pc
     WHERE c.id = pc.child_id AND c.status = 'waiting'
    RETURNING c.id::text AS id, c.status, c.queue, c.priority, c.run_at, c.run_at <= now() AS due,
              c.has_dependents
)
SELECT id, status, queue, priority, run_at, due, has_dependents, NULL::int AS page FROM changed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, count(*)::int FROM page;

-- name: scan_waiting
-- The recovery sweep's walk over waiting jobs, a page at a time from where the last page
-- stopped (newest first, along jobs_waiting_idx): each run reads a bounded page, and every
-- waiting job is looked at in turn however many there are.
SELECT id::text AS id, created_at FROM jobs
 WHERE status = 'waiting'
   AND (%(after_at)s::timestamptz IS NULL
        OR (created_at, id) < (%(after_at)s::timestamptz, %(after_id)s::uuid))
 ORDER BY created_at DESC, id DESC
 LIMIT %(limit)s;

-- name: stuck_parents
-- Recovery: finished parents with an edge not settled to one of these waiting children (a
-- worker died between a parent's end and settling its children).
SELECT DISTINCT d.parent_id::text AS id
  FROM jobs c
  JOIN job_dependencies d ON d.child_id = c.id AND NOT d.settled
  LEFT JOIN jobs p ON p.id = d.parent_id
 WHERE c.id = ANY(%(ids)s::uuid[]) AND c.status = 'waiting'
   AND (p.id IS NULL OR p.status IN ('completed', 'dead', 'cancelled'));

-- name: release_orphaned_waiting
-- Recovery's last net, over these waiting jobs: one none of whose parents is live ends its
-- wait now, by its rules (queued, or ended by a failed parent under `fail`; a parent gone
-- ended as its edge says, or counts as dead). Its count was too high (an operator's replay
-- raced a parent's end); it never runs before a live parent ends.
WITH orphaned AS (
    SELECT c.id FROM jobs c
     WHERE c.id = ANY(%(ids)s::uuid[]) AND c.status = 'waiting'
       AND NOT EXISTS (SELECT 1 FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id
                        WHERE d.child_id = c.id
                          AND p.status IN ('waiting', 'queued', 'processing', 'suspended'))
       FOR UPDATE OF c SKIP LOCKED
), failed AS (
    SELECT o.id, (array_agg(d.parent_id::text ORDER BY d.parent_id))[1] AS parent_id,
           (array_agg(coalesce(p.status, d.parent_ended, 'dead') ORDER BY d.parent_id))[1]
               AS status
      FROM orphaned o
      JOIN job_dependencies d ON d.child_id = o.id
      LEFT JOIN jobs p ON p.id = d.parent_id
     WHERE d.on_parent_failure = 'fail'
       AND coalesce(p.status, d.parent_ended, 'dead') IN ('dead', 'cancelled')
     GROUP BY o.id
), settled AS (
    UPDATE job_dependencies d SET settled = true
      FROM orphaned o WHERE d.child_id = o.id AND NOT d.settled
)
UPDATE jobs c
   SET status = CASE WHEN f.id IS NULL THEN 'queued'
                     WHEN f.status = 'cancelled' THEN 'cancelled' ELSE 'dead' END,
       last_error = CASE WHEN f.id IS NULL THEN c.last_error
                         ELSE 'parent_failed: ' || f.parent_id END,
       finished_at = CASE WHEN f.id IS NULL THEN NULL ELSE now() END,
       open_parents = 0, updated_at = now()
  FROM orphaned o LEFT JOIN failed f ON f.id = o.id
 WHERE c.id = o.id
RETURNING c.id::text AS id, c.status, c.queue, c.priority, c.run_at, c.run_at <= now() AS due,
          c.has_dependents;

-- name: lock_heal_parents
-- The first statement of a heal page (one transaction): the replayed jobs, locked in id order,
-- so one that ends meanwhile waits for the page, and its settling then sees the edges the page
-- reopened (else it could end unseen between the page's reads and its commit).
SELECT id::text AS id FROM jobs WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR UPDATE;

-- name: lock_heal_page
-- Then, after these jobs were replayed: at most %(limit)s of the dead jobs that ended because
-- of one of them (last_error 'parent_failed: <it>'), read along jobs_parent_failed_idx and
-- locked, skipping those a concurrent heal holds. A parent that is dead or cancelled again heals nothing.
SELECT c.id::text AS id FROM jobs c
 WHERE c.status = 'dead' AND c.last_error LIKE 'parent_failed: %%'
   AND c.last_error = ANY(ARRAY(
       SELECT 'parent_failed: ' || j.id::text FROM jobs j
        WHERE j.id = ANY(%(ids)s::uuid[]) AND j.status NOT IN ('dead', 'cancelled')))
   AND EXISTS (SELECT 1 FROM job_dependencies d
                WHERE d.child_id = c.id AND c.last_error = 'parent_failed: ' || d.parent_id::text)
 LIMIT %(limit)s
   FOR UPDATE OF c SKIP LOCKED;

-- name: revive_healed
-- They wait again (their retry budget starts afresh, as a replay's does); one with children
-- of its own carries the heal on down (cascade_pending, so a crash resumes it).
UPDATE jobs
   SET status = 'waiting', attempt_base = attempts, suspensions = 0, first_started_at = NULL, run_at = now(), finished_at = NULL,
       started_at = NULL, worker_id = NULL, last_error = NULL, cancel_requested = false,
       cascade_pending = has_dependents, updated_at = now()
 WHERE id = ANY(%(ids)s::uuid[]) AND status = 'dead';

-- name: reopen_edges
-- Each edge of these jobs says again whether its parent has finished (a statement after
-- the revival: it sees the revived parents as live).
UPDATE job_dependencies d
   SET settled = (p.id IS NULL OR p.status IN ('completed', 'dead', 'cancelled'))
  FROM job_dependencies e LEFT JOIN jobs p ON p.id = e.parent_id
 WHERE e.child_id = ANY(%(ids)s::uuid[])
   AND d.child_id = e.child_id AND d.parent_id = e.parent_id
   AND d.settled IS DISTINCT FROM (p.id IS NULL OR p.status IN ('completed', 'dead', 'cancelled'));

-- name: reevaluate_waiting
-- These jobs' statuses from their parents: waiting on the live ones, queued when none is
-- left, or (a healed job) ended again by another parent that is still dead or cancelled (a
-- parent retention deleted counts as it ended: its edge kept that).
-- A job replayed by hand keeps running past a failed parent (the operator asked for it).
-- The ids lead (their primary key): a status filter here let the planner walk the whole
-- backlog index instead (each heal page of a 200,000-child family read all of it), so the
-- statuses are checked once counted (MATERIALIZED: not pushed back in).
WITH counted AS MATERIALIZED (
    SELECT c.id, c.status,
           count(*) FILTER (WHERE p.status IN ('waiting', 'queued', 'processing', 'suspended'))::int AS open,
           (array_agg(d.parent_id::text ORDER BY d.parent_id)
              FILTER (WHERE d.on_parent_failure = 'fail'
                        AND coalesce(p.status, d.parent_ended, 'dead') IN ('dead', 'cancelled')))[1]
               AS failed_by,
           (array_agg(coalesce(p.status, d.parent_ended, 'dead') ORDER BY d.parent_id)
              FILTER (WHERE d.on_parent_failure = 'fail'
                        AND coalesce(p.status, d.parent_ended, 'dead') IN ('dead', 'cancelled')))[1]
               AS failed_status
      FROM jobs c
      JOIN job_dependencies d ON d.child_id = c.id
      LEFT JOIN jobs p ON p.id = d.parent_id
     WHERE c.id = ANY(%(ids)s::uuid[])
     GROUP BY c.id, c.status
)
UPDATE jobs c
   SET open_parents = k.open,
       status = CASE WHEN k.status = 'waiting' AND k.failed_by IS NOT NULL
                     THEN CASE WHEN k.failed_status = 'cancelled' THEN 'cancelled' ELSE 'dead' END
                     WHEN k.open > 0 THEN 'waiting' ELSE 'queued' END,
       last_error = CASE WHEN k.status = 'waiting' AND k.failed_by IS NOT NULL
                         THEN 'parent_failed: ' || k.failed_by ELSE c.last_error END,
       finished_at = CASE WHEN k.status = 'waiting' AND k.failed_by IS NOT NULL THEN now() END,
       updated_at = now()
  FROM counted k
 WHERE c.id = k.id AND c.status = k.status AND k.status IN ('waiting', 'queued')
RETURNING c.id::text AS id, c.status, c.queue, c.priority, c.run_at, c.run_at <= now() AS due,
          c.has_dependents;

-- name: list_parents
-- A job's parents with their statuses (and, for the task, their results).
SELECT d.child_id::text AS child_id, d.parent_id::text AS job_id, d.parent_ref AS ref,
       d.on_parent_failure, coalesce(p.status, 'purged') AS status,
       CASE WHEN %(results)s THEN p.result END AS result,
       CASE WHEN %(results)s THEN p.last_error END AS last_error
  FROM job_dependencies d LEFT JOIN jobs p ON p.id = d.parent_id
 WHERE d.child_id = ANY(%(ids)s::uuid[])
 ORDER BY d.child_id, d.parent_id;

-- name: list_dependents
-- A job's children, at most %(limit)s, along job_dependencies_parent_idx: those its end has
-- not reached yet first, then by id; and how many it has (counted along the index alone).
SELECT d.child_id::text AS job_id, c.status, d.on_parent_failure,
       (SELECT count(*)::int FROM job_dependencies a WHERE a.parent_id = %(id)s) AS total
  FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
 WHERE d.parent_id = %(id)s
 ORDER BY d.settled, d.child_id
 LIMIT %(limit)s;

-- name: mark_cascades
-- These jobs' cascades take more than one page: the sweep resumes them after a crash.
UPDATE jobs SET cascade_pending = true WHERE id = ANY(%(ids)s::uuid[]) AND NOT cascade_pending;

-- name: finish_cascades
-- The flag goes once nothing is left: a finished job has no unsettled edge, and a job that
-- is not dead or cancelled again has no dead child blaming it (both along partial indexes).
UPDATE jobs j SET cascade_pending = false
 WHERE j.id = ANY(%(ids)s::uuid[]) AND j.cascade_pending
   AND NOT (j.status IN ('completed', 'dead', 'cancelled')
            AND EXISTS (SELECT 1 FROM job_dependencies d WHERE d.parent_id = j.id AND NOT d.settled))
   AND NOT (j.status NOT IN ('dead', 'cancelled')
            AND EXISTS (SELECT 1 FROM jobs c
                         WHERE c.status = 'dead' AND c.last_error LIKE 'parent_failed: %%'
                           AND c.last_error = 'parent_failed: ' || j.id::text))
RETURNING j.id::text AS id;

-- name: pending_cascades
-- The recovery sweep's cascades to resume (along jobs_cascade_pending_idx).
SELECT id::text AS id, status FROM jobs WHERE cascade_pending ORDER BY id LIMIT %(limit)s;

-- name: any_waiting
SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'waiting') AS any;
