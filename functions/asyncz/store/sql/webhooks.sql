-- Webhooks, their deliveries and attempts (asyncz.store.webhooks; migration 0024).

-- name: webhook_cipher_key
-- The local key that encrypts signing secrets where no KMS key is configured.
SELECT secret FROM asyncz_secrets WHERE name = 'webhook_secrets';

-- name: insert_webhook
INSERT INTO webhooks (url, types, queues, tasks, secret, created_by, created_by_key_id)
VALUES (%(url)s, %(types)s, %(queues)s, %(tasks)s, %(secret)s, %(created_by)s,
        %(created_by_key_id)s)
RETURNING id, url, types, queues, tasks, created_by, created_at, rotated_at, previous_until;

-- name: count_webhooks
SELECT count(*) AS live FROM webhooks WHERE deleted_at IS NULL;

-- name: list_webhooks
-- Bounded by the deployment's cap on live webhooks (ASYNCZ_WEBHOOK_MAX_COUNT).
SELECT id, url, types, queues, tasks, created_by, created_at, rotated_at, previous_until
  FROM webhooks
 WHERE deleted_at IS NULL
 ORDER BY id;

-- name: get_webhook
SELECT id, url, types, queues, tasks, created_by, created_at, rotated_at, previous_until
  FROM webhooks
 WHERE id = %(id)s AND deleted_at IS NULL;

-- name: delete_webhook
-- Its pending deliveries end as the sender reaches them (failed, 'webhook deleted'),
-- without a request; the rows stay for the listing.
UPDATE webhooks SET deleted_at = now()
 WHERE id = %(id)s AND deleted_at IS NULL
RETURNING id;

-- name: rotate_webhook_secret
-- The new secret signs from now on; the one it replaces signs beside it until the overlap
-- ends (a secret older than that is dropped).
UPDATE webhooks
   SET previous_secret = secret, secret = %(secret)s, rotated_at = now(),
       previous_until = now() + make_interval(secs => %(overlap)s)
 WHERE id = %(id)s AND deleted_at IS NULL
RETURNING id, url, types, queues, tasks, created_by, created_at, rotated_at, previous_until;

-- name: add_webhook_deliveries
-- One statement per page of events: a delivery for every event and live webhook whose
-- filter it matches (an empty list matches all). A page published again (the pump retries
-- it) adds none twice.
INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, event, give_up_at)
SELECT w.id, e.id, e.type, e.body, now() + make_interval(secs => %(retry_for)s)
  FROM jsonb_to_recordset(%(events)s::jsonb)
       AS e(id text, type text, queue text, task text, body jsonb)
  JOIN webhooks w
    ON w.deleted_at IS NULL
   AND (cardinality(w.types) = 0 OR e.type = ANY (w.types))
   AND (cardinality(w.queues) = 0 OR e.queue = ANY (w.queues))
   AND (cardinality(w.tasks) = 0 OR e.task = ANY (w.tasks))
ON CONFLICT (webhook_id, event_id) WHERE redelivery_of IS NULL DO NOTHING
RETURNING id;

-- name: add_webhook_delivery
-- One delivery to one webhook (a test event, or a redelivery of ``redelivery_of``).
INSERT INTO webhook_deliveries (webhook_id, event_id, event_type, event, give_up_at,
                                redelivery_of)
SELECT w.id, %(event_id)s, %(event_type)s, %(event)s::jsonb,
       now() + make_interval(secs => %(retry_for)s), %(redelivery_of)s
  FROM webhooks w
 WHERE w.id = %(webhook_id)s AND w.deleted_at IS NULL
RETURNING id, webhook_id, event_id, status, created_at;

-- name: get_webhook_delivery
SELECT id, webhook_id, event_id, event_type, event, redelivery_of, status, attempts, next_at,
       last_status_code, last_error, created_at, finished_at
  FROM webhook_deliveries
 WHERE webhook_id = %(webhook_id)s AND id = %(id)s;

-- name: claim_webhook_deliveries
-- The due deliveries, at most ``per_endpoint`` of each webhook (one index probe each, so a
-- dead webhook's backlog is never scanned for another's) and none of the webhooks this
-- sender already has requests in flight for (``busy``): one slow endpoint never takes the
-- page from the others. The webhooks are the live ones (at most ASYNCZ_WEBHOOK_MAX_COUNT)
-- and those deleted within the retry window, whose pending deliveries the sender ends
-- unsent. A claim lasts ``hold`` seconds (the request's timeout and a margin), after which
-- another sender may take it.
WITH due AS (
    SELECT d.id
      FROM webhooks w
     CROSS JOIN LATERAL (
           SELECT p.id FROM webhook_deliveries p
            WHERE p.webhook_id = w.id AND p.status = 'pending' AND p.next_at <= now()
              AND (p.claimed_until IS NULL OR p.claimed_until < now())
            ORDER BY p.next_at
            LIMIT %(per_endpoint)s
              FOR UPDATE SKIP LOCKED) d
     WHERE (w.deleted_at IS NULL
            OR w.deleted_at > now() - make_interval(secs => %(retry_for)s))
       AND NOT w.id = ANY (%(busy)s::bigint[])
     LIMIT %(limit)s),
taken AS (
    UPDATE webhook_deliveries d
       SET claim_token = gen_random_uuid(),
           claimed_until = now() + make_interval(secs => %(hold)s)
      FROM due
     WHERE d.id = due.id
    RETURNING d.id, d.webhook_id, d.event, d.attempts, d.claim_token)
SELECT t.id, t.webhook_id, t.event, t.attempts, t.claim_token, w.url, w.secret,
       CASE WHEN w.previous_until > now() THEN w.previous_secret END AS previous_secret,
       w.deleted_at IS NOT NULL AS deleted
  FROM taken t JOIN webhooks w ON w.id = t.webhook_id
 ORDER BY t.id;

-- name: finish_webhook_attempt
-- An attempt's outcome, fenced by the claim: delivered on a 2xx, else again after
-- ``delay`` seconds, or failed when that would pass its bound. Its attempt row in the same
-- statement.
WITH d AS (
    UPDATE webhook_deliveries
       SET attempts = attempts + 1,
           status = CASE WHEN %(ok)s THEN 'delivered'
                         WHEN %(final)s OR now() + make_interval(secs => %(delay)s) > give_up_at
                         THEN 'failed' ELSE 'pending' END,
           next_at = now() + make_interval(secs => %(delay)s),
           finished_at = CASE WHEN %(ok)s OR %(final)s
                                   OR now() + make_interval(secs => %(delay)s) > give_up_at
                              THEN now() END,
           claim_token = NULL, claimed_until = NULL,
           last_status_code = %(status_code)s, last_error = %(error)s
     WHERE id = %(id)s AND claim_token = %(claim_token)s AND status = 'pending'
    RETURNING id, attempts, status)
INSERT INTO webhook_attempts (delivery_id, attempt, status_code, error, duration_ms)
SELECT id, attempts, %(status_code)s, %(error)s, %(duration_ms)s FROM d
RETURNING (SELECT status FROM d) AS status, attempt;

-- name: list_webhook_deliveries
-- Newest first, keyset by id.
SELECT id, webhook_id, event_id, event_type, redelivery_of, status, attempts, next_at,
       last_status_code, last_error, created_at, finished_at
  FROM webhook_deliveries
 WHERE webhook_id = %(webhook_id)s
   AND (%(before)s::bigint IS NULL OR id < %(before)s)
 ORDER BY id DESC
 LIMIT %(limit)s;

-- name: list_webhook_attempts
-- The attempts of a page of deliveries (each bounded by its retry window).
SELECT delivery_id, attempt, at, status_code, error, duration_ms
  FROM webhook_attempts
 WHERE delivery_id = ANY (%(ids)s::bigint[])
 ORDER BY delivery_id, attempt;

-- name: prune_webhook_deliveries
-- A page of deliveries that ended longer ago than the retention (their attempts go with
-- them: at most one per retry of one delivery).
WITH gone AS (
    DELETE FROM webhook_deliveries WHERE id = ANY(ARRAY(
        SELECT id FROM webhook_deliveries
         WHERE status <> 'pending'
           AND finished_at < now() - make_interval(secs => %(older_than)s)
         ORDER BY finished_at
         LIMIT %(limit)s))
    RETURNING 1)
SELECT count(*) AS pruned FROM gone;
