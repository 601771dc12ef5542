-- Named queries of events (migration 0020; docs/durable.md, "Events"). A delivery and a
-- wait's look-back on the same name and key take the same transaction-scoped advisory lock
-- (lock_event_wait) before anything else, so one of them commits first and the other sees
-- it: a wait stored before the event is resolved by the delivery, and an event stored
-- before the wait is found by the wait's look-back. Never both, never neither.

-- name: lock_event_wait
-- The first statement of a delivery (send_event) and of a wait's opening (open_event_wait):
-- held to the transaction's end. The class number keeps these locks apart from any other
-- advisory lock (the migrations take a one-argument lock).
SELECT pg_advisory_xact_lock(48, hashtext(%(wait_key)s));

-- name: open_event_wait
-- A new event wait (the parameters of open_wait, sql/waits.sql), fenced by the lease as
-- save_step is. Its look-back: the first stored event on its name and key sent since its
-- job's submit, after the last one this job's earlier waits on them took, from a sender the
-- wait accepts (its terms: {"from": [key names]}); found, the wait is stored completed with
-- it, else stored waiting. A wait's value: {"event": id, "payload": ...}.
WITH holder AS (
    SELECT id, created_at FROM jobs
     WHERE id = %(job_id)s AND lease_token = %(token)s AND status = 'processing'
       FOR SHARE
), taken AS (
    SELECT coalesce(max((s.result ->> 'event')::bigint), 0) AS upto
      FROM job_steps s
     WHERE s.job_id = %(job_id)s AND s.kind = 'event' AND s.wait_key = %(wait_key)s
       AND s.status = 'completed' AND s.result ? 'event'
), found AS (
    SELECT e.id, e.payload
      FROM events e  -- (scalar subqueries: their values bound the index scan)
     WHERE e.wait_key = %(wait_key)s AND e.created_at >= (SELECT created_at FROM holder)
       AND e.id > (SELECT upto FROM taken)
       AND (%(result)s::jsonb IS NULL OR NOT (%(result)s::jsonb ? 'from')
            OR coalesce(%(result)s::jsonb -> 'from' ? e.sent_by, false))
     ORDER BY e.created_at, e.id
     LIMIT 1
)
INSERT INTO job_steps (job_id, seq, name, kind, after_name, status, result, result_bytes,
                       error, attempts, job_attempt, started_at, wait_until, wait_key)
SELECT holder.id, %(seq)s, %(name)s, %(kind)s, %(after_name)s,
       CASE WHEN found.id IS NULL THEN 'waiting' ELSE 'completed' END,
       CASE WHEN found.id IS NULL THEN %(result)s::jsonb
            ELSE jsonb_build_object('event', found.id, 'payload', found.payload) END,
       CASE WHEN found.id IS NULL THEN 0
            ELSE octet_length(jsonb_build_object('event', found.id, 'payload', found.payload)::text)
       END,
       NULL, 1, %(job_attempt)s, now(), %(wait_until)s, %(wait_key)s
  FROM holder LEFT JOIN found ON true
ON CONFLICT (job_id, seq) DO NOTHING
RETURNING status, result;

-- name: insert_event
-- A delivery's event, stored (after lock_event_wait, in the same transaction). Its time is
-- the clock's at the insert, under the lock: per routing key, times follow the ids, so a
-- look-back starts at its job's submit along events_wait_key_idx (no scan of older events).
INSERT INTO events (name, key, wait_key, payload, sent_by, sent_by_key_id, created_at)
VALUES (%(name)s, %(key)s, %(wait_key)s, %(payload)s::jsonb, %(sent_by)s, %(sent_by_key_id)s,
        clock_timestamp())
RETURNING id;

-- name: mark_event_pending
-- The first page of a delivery was full: more waits may follow, a page per statement; the
-- flag stays until the last page (recovery finishes a delivery whose caller died).
UPDATE events SET pending = true WHERE id = %(id)s;

-- name: finish_event_delivery
-- A delivery is done: how many waits it woke, kept on the event's row.
UPDATE events SET woke = woke + %(woke)s, pending = false WHERE id = %(id)s;

-- name: pending_events
-- Deliveries left pending for longer than %(older_than)s seconds (their caller died between
-- two pages, or is slow: finishing one twice changes nothing), along events_pending_idx.
SELECT id, wait_key, payload::text AS payload, sent_by
  FROM events
 WHERE pending AND created_at < now() - make_interval(secs => %(older_than)s)
 ORDER BY id
 LIMIT %(limit)s;

-- name: prune_events
-- Retention: up to %(limit)s events older than %(older_than)s seconds, oldest first (along
-- events_created_idx). A wait looks back no further than the events kept.
DELETE FROM events WHERE id = ANY(ARRAY(
    SELECT id FROM events
     WHERE created_at < now() - make_interval(secs => %(older_than)s)
     ORDER BY created_at, id
     LIMIT %(limit)s))
RETURNING id;
