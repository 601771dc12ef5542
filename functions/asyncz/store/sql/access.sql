-- Named API keys and the audit trail (asyncz.store.access).

-- name: live_api_keys
-- What every api sandbox holds in memory and reloads every few seconds: the live keys.
-- A key's id ('key-' and its row id) is what its jobs, audit entries and rate bucket belong
-- to: a later key given the name after a revoke has another.
SELECT 'key-' || id AS key_id, name, key_hash, scopes, rate_limit, rate_period_seconds,
       expires_at
  FROM api_keys
 WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: find_api_key
-- One live key by its digest (the unique index): a key a sandbox has not loaded yet.
SELECT 'key-' || id AS key_id, name, key_hash, scopes, rate_limit, rate_period_seconds,
       expires_at
  FROM api_keys
 WHERE key_hash = %(key_hash)s AND revoked_at IS NULL
   AND (expires_at IS NULL OR expires_at > now());

-- name: list_api_keys
SELECT 'key-' || id AS key_id, name, scopes, rate_limit, rate_period_seconds, created_at,
       expires_at, last_used_at, revoked_at
  FROM api_keys
 WHERE %(revoked)s OR revoked_at IS NULL
 ORDER BY name, created_at DESC;

-- name: create_api_key
-- A live key of the same name makes the unique index refuse it (the caller answers 409).
INSERT INTO api_keys (name, key_hash, scopes, rate_limit, rate_period_seconds, expires_at)
VALUES (%(name)s, %(key_hash)s, %(scopes)s, %(rate_limit)s, %(rate_period_seconds)s,
        %(expires_at)s)
RETURNING 'key-' || id AS key_id, name, scopes, rate_limit, rate_period_seconds, created_at,
          expires_at, last_used_at, revoked_at;

-- name: revoke_api_key
UPDATE api_keys SET revoked_at = now(), changed_at = now()
 WHERE name = %(name)s AND revoked_at IS NULL
RETURNING 'key-' || id AS key_id, name, revoked_at;

-- name: touch_api_keys
-- Last use, written by each sandbox at most once per reload for the keys it saw since.
UPDATE api_keys SET last_used_at = now()
 WHERE key_hash = ANY(%(hashes)s::text[]);

-- name: insert_audit
INSERT INTO audit_log (key_id, key_name, action, target, detail, outcome)
VALUES (%(key_id)s, %(key_name)s, %(action)s, %(target)s, %(detail)s, %(outcome)s)
RETURNING id, at;

-- name: list_audit
-- Newest first, keyset by (at, id).
SELECT id, at, key_id, key_name, action, target, detail, outcome
  FROM audit_log
 WHERE (%(key_name)s::text IS NULL OR key_name = %(key_name)s)
   AND (%(key_id)s::text IS NULL OR key_id = %(key_id)s)
   AND (%(action)s::text IS NULL OR action = %(action)s)
   AND (%(after_at)s::timestamptz IS NULL
        OR (at, id) < (%(after_at)s::timestamptz, %(after_id)s::bigint))
 ORDER BY at DESC, id DESC
 LIMIT %(limit)s;

-- name: prune_audit
WITH gone AS (
    DELETE FROM audit_log WHERE id = ANY(ARRAY(
        SELECT id FROM audit_log
         WHERE at < now() - make_interval(secs => %(older_than)s)
         ORDER BY at, id
         LIMIT %(limit)s))
    RETURNING 1)
SELECT count(*) AS pruned FROM gone;

-- name: finish_audit
-- The outcome of an action whose audit row was written before it ran.
UPDATE audit_log SET outcome = %(outcome)s, detail = detail || %(detail)s
 WHERE id = %(id)s;
