-- Work spans: each unit of a tenant's work (a pod, a Slurm job's run) on a
-- node over [start_at, end_at), as the cluster's driver saw it; end_at is
-- NULL while it runs. Cost allocation splits the node's priced usage among
-- them. Like usage, spans outlive nodes and clusters.

-- +goose Up
CREATE TABLE work_spans (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT NOT NULL DEFAULT '',
    cluster_id TEXT NOT NULL DEFAULT '',
    node_id    TEXT NOT NULL,
    work_key   TEXT NOT NULL,
    namespace  TEXT NOT NULL DEFAULT '',
    name       TEXT NOT NULL DEFAULT '',
    job        TEXT NOT NULL DEFAULT '',
    account    TEXT NOT NULL DEFAULT '',
    labels     TEXT NOT NULL DEFAULT '',
    gpus       INTEGER NOT NULL DEFAULT 0,
    start_at   INTEGER NOT NULL,
    end_at     INTEGER,
    UNIQUE (node_id, work_key, start_at)
);
CREATE INDEX work_spans_project_start ON work_spans (project_id, start_at);
CREATE INDEX work_spans_open ON work_spans (node_id) WHERE end_at IS NULL;

-- +goose Down
DROP TABLE work_spans;
