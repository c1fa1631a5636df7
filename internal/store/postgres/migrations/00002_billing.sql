-- Usage records (one per node, rewritten by the meter) and the price book
-- (append-only: a price change is a new entry with its effective time).

-- +goose Up
CREATE TABLE usage (
    node_id        TEXT PRIMARY KEY,
    node_name      TEXT NOT NULL DEFAULT '',
    cluster_id     TEXT NOT NULL DEFAULT '',
    cluster_name   TEXT NOT NULL DEFAULT '',
    project_id     TEXT NOT NULL DEFAULT '',
    region         TEXT NOT NULL DEFAULT '',
    gpu_type       TEXT NOT NULL DEFAULT '',
    class          TEXT NOT NULL DEFAULT '',
    billing_type   TEXT NOT NULL DEFAULT '',
    reservation_id TEXT NOT NULL DEFAULT '',
    gpus           INTEGER NOT NULL DEFAULT 0,
    start_at       TIMESTAMPTZ,
    end_at         TIMESTAMPTZ,
    final          BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX usage_project_start ON usage (project_id, start_at);
CREATE INDEX usage_cluster_start ON usage (cluster_id, start_at);

CREATE TABLE prices (
    id             TEXT PRIMARY KEY,
    kind           TEXT NOT NULL DEFAULT '',
    region         TEXT NOT NULL DEFAULT '',
    gpu_type       TEXT NOT NULL DEFAULT '',
    reservation_id TEXT NOT NULL DEFAULT '',
    value          TEXT NOT NULL DEFAULT '',
    effective_from TIMESTAMPTZ,
    created_at     TIMESTAMPTZ
);

-- +goose Down
DROP TABLE prices;
DROP TABLE usage;
