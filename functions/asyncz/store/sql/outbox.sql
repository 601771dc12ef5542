-- The outbox of lifecycle events (migration 0023, docs/events.md): the publisher's page (taken
-- in the transaction its sinks publish in), the backlog's gauges and retention. Every read
-- is a bounded page along job_outbox_created_idx.

-- name: take_outbox_page
-- The oldest unpublished events, deleted and returned in the publisher's transaction: the
-- sinks take them before it commits, and a sink that fails rolls the deletion back (the
-- events stay for the next run). Their row locks make another publisher skip them; the
-- rows are found again by address (a TID scan, never the table). A completed event
-- carries the job's result when asked for (%(result_bytes)s > 0), within the bound, and
-- only while the job still has this end.
WITH taken AS (
    DELETE FROM job_outbox
     WHERE ctid = ANY(ARRAY(SELECT ctid FROM job_outbox ORDER BY created_at
                             LIMIT %(limit)s FOR UPDATE SKIP LOCKED))
    RETURNING id, type, job_id, task, queue, status, attempts, submitted_at, started_at,
              finished_at, submitted_by, traceparent, tracestate, created_at
)
SELECT o.id::text AS id, o.type, o.job_id::text AS job_id, o.task, o.queue, o.status,
       o.attempts, o.submitted_at, o.started_at, o.finished_at, o.submitted_by,
       o.traceparent, o.tracestate, o.created_at,
       CASE WHEN %(result_bytes)s::int > 0 AND o.type = 'asyncz.job.completed' THEN (
           SELECT j.result FROM jobs j
            WHERE j.id = o.job_id AND j.status = 'completed' AND j.finished_at = o.finished_at
              AND octet_length(j.result::text) <= %(result_bytes)s::int) END AS result
  FROM taken o
 ORDER BY o.created_at;

-- name: any_unpublished
SELECT EXISTS (SELECT 1 FROM job_outbox) AS pending;

-- name: outbox_gauges
-- The backlog counted up to a cap (a count of a dead sink's millions would read them all
-- every minute); its oldest event's age along the index.
SELECT (SELECT count(*) FROM (SELECT 1 FROM job_outbox LIMIT %(cap)s) b)::bigint AS backlog,
       coalesce(extract(epoch FROM now() - (SELECT min(created_at) FROM job_outbox)),
                0)::float8 AS oldest_age;

-- name: prune_outbox
-- Retention: events nothing published for this long, oldest first, in a bounded page.
WITH old AS (
    SELECT ctid FROM job_outbox
     WHERE created_at < now() - make_interval(secs => %(older_than)s)
     ORDER BY created_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
DELETE FROM job_outbox o USING old WHERE o.ctid = old.ctid
RETURNING o.type;
