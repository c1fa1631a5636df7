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
    enabled         INTEGER NOT NULL DEFAULT 1,
    secret          BLOB,
    previous_secret BLOB,
    previous_until  INTEGER,
    created_at      INTEGER,
    updated_at      INTEGER,
    UNIQUE (project_id, name)
);

CREATE TABLE webhook_messages (
    id         TEXT PRIMARY KEY,
    type       TEXT NOT NULL DEFAULT '',
    event_id   TEXT NOT NULL DEFAULT '',
    body       BLOB NOT NULL,
    created_at INTEGER
);

CREATE TABLE webhook_deliveries (
    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id),
    message_id  TEXT NOT NULL REFERENCES webhook_messages (id),
    type        TEXT NOT NULL DEFAULT '',
    event_id    TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL DEFAULT '',
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER,
    last_at     INTEGER,
    last_status INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    latency_us  INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER,
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
    seq  INTEGER NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE webhook_cursor;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_messages;
DROP TABLE webhook_endpoints;
