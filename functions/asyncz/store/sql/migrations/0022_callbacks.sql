-- Callbacks of durable tasks (docs/durable.md, "Callbacks"): ctx.callback(name) stores a
-- wait of kind 'callback' whose routing key (wait_key, migration 0019) is the SHA-256 of
-- its token, in hex. POST /callbacks/{token} finds it along this index, whether it still
-- waits (it resumes the job) or was used (409: a vendor's retry learns it was taken). The
-- index is unique: one token, one wait. Steps of other kinds never enter it.
CREATE UNIQUE INDEX job_steps_callback_idx ON job_steps (wait_key) WHERE kind = 'callback';

-- The deployment's secrets, made here and never sent anywhere: a callback's token is the
-- HMAC-SHA256, under 'callback_tokens', of its job, the job's replay generation and the
-- callback's name, so a replay of the task gets the same token (and URL) back without the
-- token being stored (only its hash is). 32 random bytes from two random UUIDs (244 bits).
CREATE TABLE asyncz_secrets (
    name       text PRIMARY KEY,
    secret     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO asyncz_secrets (name, secret)
VALUES ('callback_tokens', uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
-- the runtime role reads the secrets and changes none of them
REVOKE INSERT, UPDATE, DELETE ON asyncz_secrets FROM asyncz_app;
