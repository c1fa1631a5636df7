-- A node converted in place (preemptible to standard or back) is billed
-- in each class for its own period: usage is keyed by node and period
-- start, and nodes.class_since is when the current period started
-- (NULL: never converted, since ready_at). A final record of an earlier
-- period does not end the node's billing: only the current period's sets
-- metered (see PutUsage).

-- +goose Up
ALTER TABLE nodes ADD COLUMN class_since INTEGER;
ALTER TABLE node_history ADD COLUMN class_since INTEGER;
CREATE TABLE usage_periods (
    node_id        TEXT NOT NULL,
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
    start_at       INTEGER NOT NULL,
    end_at         INTEGER,
    final          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (node_id, start_at)
);
INSERT INTO usage_periods SELECT node_id, node_name, cluster_id, cluster_name, project_id, region, gpu_type,
    class, billing_type, reservation_id, gpus, start_at, end_at, final FROM usage;
DROP TABLE usage;
ALTER TABLE usage_periods RENAME TO usage;
CREATE INDEX usage_project_start ON usage (project_id, start_at);
CREATE INDEX usage_cluster_start ON usage (cluster_id, start_at);
CREATE INDEX usage_open ON usage (start_at, node_id) WHERE NOT final;

-- +goose Down
CREATE TABLE usage_nodes (
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
    start_at       INTEGER,
    end_at         INTEGER,
    final          INTEGER NOT NULL DEFAULT 0
);
-- Only a node's latest period fits the old key: earlier ones are dropped.
INSERT INTO usage_nodes SELECT node_id, node_name, cluster_id, cluster_name, project_id, region, gpu_type,
    class, billing_type, reservation_id, gpus, start_at, end_at, final FROM usage u
    WHERE start_at = (SELECT MAX(start_at) FROM usage v WHERE v.node_id = u.node_id);
DROP TABLE usage;
ALTER TABLE usage_nodes RENAME TO usage;
CREATE INDEX usage_project_start ON usage (project_id, start_at);
CREATE INDEX usage_cluster_start ON usage (cluster_id, start_at);
CREATE INDEX usage_open ON usage (start_at, node_id) WHERE NOT final;
ALTER TABLE node_history DROP COLUMN class_since;
ALTER TABLE nodes DROP COLUMN class_since;
