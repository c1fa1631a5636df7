-- Closed months rolled up: each cluster's month as the usage API groups
-- it (usage lines by compute class, the work's share by namespace,
-- account and label set, the idle rest), with exact sums, so a whole
-- past month is read from a few rows and its raw records may go. Label
-- sets are stored once (by their hash) and referenced.

-- +goose Up
CREATE TABLE label_sets (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    hash   TEXT NOT NULL UNIQUE,
    labels TEXT NOT NULL
);
CREATE TABLE rollups (
    month        INTEGER NOT NULL,
    cluster_id   TEXT NOT NULL,
    row_no       INTEGER NOT NULL,
    project_id   TEXT NOT NULL,
    kind         TEXT NOT NULL,
    namespace    TEXT NOT NULL DEFAULT '',
    account      TEXT NOT NULL DEFAULT '',
    label_set_id INTEGER NOT NULL DEFAULT 0,
    cluster_name TEXT NOT NULL DEFAULT '',
    node_id      TEXT NOT NULL DEFAULT '',
    node_name    TEXT NOT NULL DEFAULT '',
    class        TEXT NOT NULL DEFAULT '',
    region       TEXT NOT NULL DEFAULT '',
    gpu_type     TEXT NOT NULL DEFAULT '',
    gpus         INTEGER NOT NULL DEFAULT 0,
    rate         TEXT NOT NULL DEFAULT '',
    od_rate      TEXT NOT NULL DEFAULT '',
    priced       BOOLEAN NOT NULL DEFAULT 0,
    start_at     INTEGER NOT NULL,
    end_at       INTEGER NOT NULL,
    billed_seconds   INTEGER NOT NULL DEFAULT 0,
    gpu_seconds      INTEGER NOT NULL DEFAULT 0,
    unpriced_seconds INTEGER NOT NULL DEFAULT 0,
    amount       TEXT NOT NULL DEFAULT '0',
    on_demand    TEXT NOT NULL DEFAULT '0',
    units        INTEGER NOT NULL DEFAULT 0,
    has_line     BOOLEAN NOT NULL DEFAULT 1,
    PRIMARY KEY (month, project_id, cluster_id, row_no)
);
CREATE INDEX rollups_project ON rollups (project_id, month);
-- A label set no row names any more goes.
CREATE INDEX rollups_label_set ON rollups (label_set_id);
-- A cluster month is rolled from its own spans.
CREATE INDEX work_spans_cluster_start ON work_spans (cluster_id, start_at);
-- A cluster's month to roll (again): its month closed, or a late row
-- touched it after it was rolled. A project's merged rows (cluster_id '')
-- are rolled with the last of its clusters.
CREATE TABLE rollup_dirty (
    month      INTEGER NOT NULL,
    project_id TEXT NOT NULL,
    cluster_id TEXT NOT NULL,
    PRIMARY KEY (month, project_id, cluster_id)
);
-- Every month before rolled_until is rolled for the whole fleet.
CREATE TABLE rollup_mark (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    rolled_until INTEGER NOT NULL
);

-- +goose Down
DROP TABLE rollup_mark;
DROP TABLE rollup_dirty;
DROP TABLE rollups;
DROP INDEX work_spans_cluster_start;
DROP TABLE label_sets;
