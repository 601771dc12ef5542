-- A job, an audit entry and a request-rate bucket belong to the key's id, not its name: a
-- revoked key's name can be given to its replacement, which must not own what the old key
-- did. A stored key's id is 'key-' and its row id; a configured key's is 'configured-' and
-- the start of its digest (asyncz.access.configured_key_id). The name stays beside the id,
-- as users see it.
ALTER TABLE jobs ADD COLUMN submitted_by_key_id text;
ALTER TABLE audit_log ADD COLUMN key_id text;

-- Rows from before: the key that held the name when the row was written (names are unique
-- among live keys, so that is the newest key of the name made by then). Rows of the
-- configured keys, or of a name no stored key held, keep no id.
UPDATE jobs j SET submitted_by_key_id = (
    SELECT 'key-' || k.id FROM api_keys k
     WHERE k.name = j.submitted_by AND k.created_at <= j.created_at
     ORDER BY k.created_at DESC, k.id DESC LIMIT 1)
 WHERE j.submitted_by IS NOT NULL;
UPDATE audit_log a SET key_id = (
    SELECT 'key-' || k.id FROM api_keys k
     WHERE k.name = a.key_name AND k.created_at <= a.at
     ORDER BY k.created_at DESC, k.id DESC LIMIT 1);

-- What a submit-only key lists (its own jobs) and ?submitted_by_key_id=, newest first.
CREATE INDEX jobs_submitted_by_key_idx ON jobs (submitted_by_key_id, created_at DESC, id DESC)
    WHERE submitted_by_key_id IS NOT NULL;
