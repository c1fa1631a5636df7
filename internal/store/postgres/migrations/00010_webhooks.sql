-- Signed notice webhooks: the endpoints projects register, the messages
-- made of lifecycle events (a body is made once, so every retry sends the
-- same bytes), one delivery per message and endpoint (the outbox the
-- workers send from), and the cursor: the seq of the last event the
-- dispatcher turned into deliveries, advanced in the same transaction.
-- event_types and cluster_ids are JSON arrays ('' for none: every one).
-- secret and previous_secret are sealed by package secret.

-- +goose Up
CREATE TABLE webhook_endpoints (
    id              TEXT PRIMARY KEY,
    project_id      TEXT NOT NULL REFERENCES projects (id),
    name            TEXT NOT NULL DEFAULT '',
    url             TEXT NOT NULL DEFAULT '',
    event_types     TEXT NOT NULL DEFAULT '',
    cluster_ids     TEXT NOT NULL DEFAULT '',
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    secret          BYTEA,
    previous_secret BYTEA,
    previous_until  TIMESTAMPTZ,
    created_at      TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ,
    UNIQUE (project_id, name)
);

CREATE TABLE webhook_messages (
    id         TEXT PRIMARY KEY,
    type       TEXT NOT NULL DEFAULT '',
    event_id   TEXT NOT NULL DEFAULT '',
    body       BYTEA NOT NULL,
    created_at TIMESTAMPTZ
);

CREATE TABLE webhook_deliveries (
    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id),
    message_id  TEXT NOT NULL REFERENCES webhook_messages (id),
    type        TEXT NOT NULL DEFAULT '',
    event_id    TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL DEFAULT '',
    attempts    BIGINT NOT NULL DEFAULT 0,
    next_at     TIMESTAMPTZ,
    last_at     TIMESTAMPTZ,
    last_status BIGINT NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    latency_us  BIGINT NOT NULL DEFAULT 0,
    created_at  TIMESTAMPTZ,
    PRIMARY KEY (endpoint_id, message_id)
);
-- The workers' poll: pending deliveries by when they are due.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
-- An endpoint's deliveries, newest first.
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at);
-- Pruning finds the messages no delivery refers to.
CREATE INDEX webhook_deliveries_message ON webhook_deliveries (message_id);

CREATE TABLE webhook_cursor (
    name TEXT PRIMARY KEY,
    seq  BIGINT NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE webhook_cursor;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_messages;
DROP TABLE webhook_endpoints;
