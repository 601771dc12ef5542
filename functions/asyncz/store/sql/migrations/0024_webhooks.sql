-- Webhooks (docs/events.md, "Webhooks"): an endpoint registered with a filter, one delivery
-- row per event and matching webhook (written by the webhook sink's publish, one statement
-- per page of events), and one attempt row per HTTP request it took.

CREATE TABLE webhooks (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url               text NOT NULL,
    types             text[] NOT NULL DEFAULT '{}',  -- empty: every type
    queues            text[] NOT NULL DEFAULT '{}',  -- empty: every queue
    tasks             text[] NOT NULL DEFAULT '{}',  -- empty: every task
    -- the signing secret, encrypted (KMS in AWS, else AES-GCM under 'webhook_secrets'
    -- below); never stored in the clear, shown once when made
    secret            bytea NOT NULL,
    -- the secret before the last rotation: it signs beside the new one until then
    previous_secret   bytea,
    previous_until    timestamptz,
    created_by        text,
    created_by_key_id text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    rotated_at        timestamptz,
    deleted_at        timestamptz
);
CREATE INDEX webhooks_live_idx ON webhooks (id) WHERE deleted_at IS NULL;

CREATE TABLE webhook_deliveries (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id       bigint NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id         text NOT NULL,
    event_type       text NOT NULL,
    event            jsonb NOT NULL,  -- the CloudEvents body, the same on every attempt
    redelivery_of    bigint,          -- an operator's redelivery: the delivery it repeats
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         int NOT NULL DEFAULT 0,
    next_at          timestamptz NOT NULL DEFAULT now(),
    give_up_at       timestamptz NOT NULL,
    -- a sender's claim: another sender takes the delivery only after claimed_until (a
    -- sender that died mid-request is retried then: at least once)
    claim_token      uuid,
    claimed_until    timestamptz,
    last_status_code int,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
-- a page of events published twice (the pump retries a page) makes one delivery each
CREATE UNIQUE INDEX webhook_deliveries_event_idx
    ON webhook_deliveries (webhook_id, event_id) WHERE redelivery_of IS NULL;
-- each webhook's due deliveries, probed one webhook at a time (claim_webhook_deliveries)
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (webhook_id, next_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_listing_idx ON webhook_deliveries (webhook_id, id DESC);
CREATE INDEX webhook_deliveries_finished_idx ON webhook_deliveries (finished_at)
    WHERE status <> 'pending';

CREATE TABLE webhook_attempts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt     int NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    status_code int,
    error       text,
    duration_ms int NOT NULL
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, attempt);

-- The local key that encrypts signing secrets where there is no KMS (asyncz dev, tests):
-- 32 random bytes, read by the runtime role, changed by none (migration 0022).
INSERT INTO asyncz_secrets (name, secret)
VALUES ('webhook_secrets', uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
