-- Named API keys with scopes, the audit trail of operator actions, and who submitted a job.
-- A key is stored as its SHA-256 (never the key); a name is unique among live keys, so a
-- revoked name can be given to its replacement. The api reads the live keys every few
-- seconds (asyncz.access), never per request.
CREATE TABLE api_keys (
    id bigserial PRIMARY KEY,
    name text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    key_hash text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
    scopes text[] NOT NULL,
    rate_limit integer CHECK (rate_limit > 0),
    rate_period_seconds integer CHECK (rate_period_seconds > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    last_used_at timestamptz,
    revoked_at timestamptz,
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (name) WHERE revoked_at IS NULL;

CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    key_name text NOT NULL,
    action text NOT NULL,
    target text,
    detail jsonb NOT NULL DEFAULT '{}'::jsonb,
    outcome text NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at DESC, id DESC);

-- NULL for jobs from before this migration and for jobs the system made (periodic jobs).
ALTER TABLE jobs ADD COLUMN submitted_by text;
CREATE INDEX jobs_submitted_by_idx ON jobs (submitted_by, created_at DESC, id DESC)
    WHERE submitted_by IS NOT NULL;
