-- Times are written in UTC, truncated to the microsecond; NULL is the zero
-- time. Text columns are never NULL: '' is a value.

-- +goose Up
CREATE TABLE projects (
    id         TEXT PRIMARY KEY,
    created_at TIMESTAMPTZ
);

CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (id),
    created_at TIMESTAMPTZ
);
CREATE INDEX tokens_project ON tokens (project_id);

CREATE TABLE reservations (
    id         TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (id),
    region     TEXT NOT NULL DEFAULT '',
    gpu_type   TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ
);
CREATE INDEX reservations_project ON reservations (project_id);

-- reservation_id is '' for the on-demand pool, so it carries no foreign key.
CREATE TABLE machines (
    id             TEXT PRIMARY KEY,
    region         TEXT NOT NULL DEFAULT '',
    gpu_type       TEXT NOT NULL DEFAULT '',
    gpus           BIGINT NOT NULL DEFAULT 0,
    reservation_id TEXT NOT NULL DEFAULT '',
    out_of_service BOOLEAN NOT NULL DEFAULT FALSE,
    cooldown_until TIMESTAMPTZ,
    created_at     TIMESTAMPTZ
);

CREATE TABLE clusters (
    id                       TEXT PRIMARY KEY,
    name                     TEXT NOT NULL DEFAULT '',
    project_id               TEXT NOT NULL REFERENCES projects (id),
    region                   TEXT NOT NULL DEFAULT '',
    gpu_type                 TEXT NOT NULL DEFAULT '',
    type                     TEXT NOT NULL DEFAULT '',
    billing_type             TEXT NOT NULL DEFAULT '',
    num_gpus                 BIGINT NOT NULL DEFAULT 0,
    desired_preemptible_gpus BIGINT NOT NULL DEFAULT 0,
    weight                   BIGINT NOT NULL DEFAULT 0,
    status                   TEXT NOT NULL DEFAULT '',
    unfulfilled              TEXT NOT NULL DEFAULT '',
    unfulfilled_message      TEXT NOT NULL DEFAULT '',
    deleting                 BOOLEAN NOT NULL DEFAULT FALSE,
    node_seq                 BIGINT NOT NULL DEFAULT 0,
    created_at               TIMESTAMPTZ,
    deleted_at               TIMESTAMPTZ
);
CREATE INDEX clusters_project ON clusters (project_id);

CREATE TABLE nodes (
    id               TEXT PRIMARY KEY,
    cluster_id       TEXT NOT NULL REFERENCES clusters (id),
    machine_id       TEXT NOT NULL REFERENCES machines (id),
    name             TEXT NOT NULL DEFAULT '',
    class            TEXT NOT NULL DEFAULT '',
    gpus             BIGINT NOT NULL DEFAULT 0,
    state            TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ,
    ready_at         TIMESTAMPTZ,
    drain_started_at TIMESTAMPTZ,
    deadline         TIMESTAMPTZ,
    drain_cause      TEXT NOT NULL DEFAULT '',
    notified         BOOLEAN NOT NULL DEFAULT FALSE,
    drained_at       TIMESTAMPTZ,
    outcome          TEXT NOT NULL DEFAULT '',
    removed_at       TIMESTAMPTZ
);
CREATE INDEX nodes_cluster ON nodes (cluster_id);
CREATE INDEX nodes_machine ON nodes (machine_id);
CREATE INDEX nodes_state ON nodes (state);

-- seq is the paging cursor; AddEvent takes a transaction-scoped advisory
-- lock before drawing one so that seqs become visible in order.
-- Events are a log pruned on their own schedule: no foreign keys.
CREATE TABLE events (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT NOT NULL DEFAULT '',
    cluster_id TEXT NOT NULL DEFAULT '',
    node_id    TEXT NOT NULL DEFAULT '',
    node_name  TEXT NOT NULL DEFAULT '',
    reason     TEXT NOT NULL DEFAULT '',
    message    TEXT NOT NULL DEFAULT '',
    ts         TIMESTAMPTZ,
    deadline   TIMESTAMPTZ,
    UNIQUE (cluster_id, node_id, reason)
);
CREATE INDEX events_cluster_seq ON events (cluster_id, seq);
CREATE INDEX events_ts ON events (ts);

-- +goose Down
DROP TABLE events;
DROP TABLE nodes;
DROP TABLE clusters;
DROP TABLE machines;
DROP TABLE reservations;
DROP TABLE tokens;
DROP TABLE projects;
