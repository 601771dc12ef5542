-- Events (docs/durable.md, "Events"): POST /events stores each event and, in the same
-- transaction, resolves the durable tasks' waits on its name and key (sql/events.sql). A
-- wait that begins later looks back at the stored events since its job's submit, so an
-- event sent before the wait began is not lost; retention (ASYNCZ_RETAIN_EVENTS_SECONDS)
-- bounds how far back. wait_key is the routing key its waits are stored with (name and key
-- as one JSON text: asyncz.durable.events.wait_key). sent_by / sent_by_key_id: the key that
-- sent it (a wait may accept only some keys' events).
CREATE TABLE events (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           text        NOT NULL,
    key            text        NOT NULL,
    wait_key       text        NOT NULL,
    payload        jsonb,
    sent_by        text,
    sent_by_key_id text,
    woke           int         NOT NULL DEFAULT 0,
    pending        boolean     NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now()
);
-- a wait's look-back: the events of its routing key since its job's submit (created_at is
-- the insert's clock_timestamp(), taken under the routing key's lock: in id order per key)
CREATE INDEX events_wait_key_idx ON events (wait_key, created_at, id);
-- retention, oldest first
CREATE INDEX events_created_idx ON events (created_at, id);
-- pending: a delivery of more than one page is under way (or its caller died between two
-- pages); recovery finishes the deliveries left pending (only such events enter the index)
CREATE INDEX events_pending_idx ON events (id) WHERE pending;

GRANT SELECT, INSERT, UPDATE, DELETE ON events TO asyncz_app;
