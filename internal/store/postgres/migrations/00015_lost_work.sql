-- The lost-work ledger: per drained node, the work at risk at its notice
-- (GPU-seconds since its work's last checkpoints). Written with the drain,
-- never changed; it outlives nodes and clusters, like usage.

-- +goose Up
CREATE TABLE lost_work (
    node_id      TEXT PRIMARY KEY,
    node_name    TEXT NOT NULL DEFAULT '',
    cluster_id   TEXT NOT NULL DEFAULT '',
    cluster_name TEXT NOT NULL DEFAULT '',
    project_id   TEXT NOT NULL DEFAULT '',
    region       TEXT NOT NULL DEFAULT '',
    gpu_type     TEXT NOT NULL DEFAULT '',
    class        TEXT NOT NULL DEFAULT '',
    cause        TEXT NOT NULL DEFAULT '',
    noticed_at   TIMESTAMPTZ NOT NULL,
    gpu_seconds  BIGINT NOT NULL DEFAULT 0,
    job          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX lost_work_project_at ON lost_work (project_id, noticed_at);

-- +goose Down
DROP TABLE lost_work;
