-- History stays cheap: the live-state reads never scan removed nodes.
-- metered: the node's final usage record is written (PutUsage sets it, a
--   node created after its final record starts with it set). The meter's
--   work list is the ready nodes without it: a partial index, instead of a
--   probe into usage for every node ever run.
-- nodes_live: the Snapshot's nodes (not removed), oldest first.
-- nodes_removed: the archiver's candidates, oldest removal first (state
--   leads so that SQLite prefers it to nodes_state and reads it in order).
-- usage_open: the records not final yet (the meter loads them at start).
-- node_history: removed, fully metered nodes without pending cleanup,
--   moved out of nodes by ArchiveNodes. Same columns as nodes (a column
--   added to nodes must be added here too); no foreign keys: it is a
--   record, like usage, and outlives what it refers to.

-- +goose Up
ALTER TABLE nodes ADD COLUMN metered INTEGER NOT NULL DEFAULT 0;
UPDATE nodes SET metered = 1 WHERE EXISTS (SELECT 1 FROM usage u WHERE u.node_id = nodes.id AND u.final);
CREATE INDEX nodes_live ON nodes (created_at, id) WHERE state <> 'removed';
CREATE INDEX nodes_unmetered ON nodes (created_at, id) WHERE ready_at IS NOT NULL AND metered = FALSE;
CREATE INDEX nodes_removed ON nodes (state, removed_at, id) WHERE state = 'removed';
CREATE INDEX usage_open ON usage (start_at, node_id) WHERE NOT final;

CREATE TABLE node_history (
    id               TEXT PRIMARY KEY,
    cluster_id       TEXT NOT NULL DEFAULT '',
    machine_id       TEXT NOT NULL DEFAULT '',
    name             TEXT NOT NULL DEFAULT '',
    class            TEXT NOT NULL DEFAULT '',
    gpus             INTEGER NOT NULL DEFAULT 0,
    state            TEXT NOT NULL DEFAULT '',
    created_at       INTEGER,
    ready_at         INTEGER,
    drain_started_at INTEGER,
    deadline         INTEGER,
    drain_cause      TEXT NOT NULL DEFAULT '',
    notified         INTEGER NOT NULL DEFAULT 0,
    drained_at       INTEGER,
    outcome          TEXT NOT NULL DEFAULT '',
    removed_at       INTEGER,
    last_error       TEXT NOT NULL DEFAULT '',
    cleanup_pending  INTEGER NOT NULL DEFAULT 0,
    provisioning_at  INTEGER
);
CREATE INDEX node_history_cluster ON node_history (cluster_id);
CREATE INDEX node_history_machine ON node_history (machine_id);

-- +goose Down
INSERT INTO nodes (id, cluster_id, machine_id, name, class, gpus, state, created_at, ready_at,
    drain_started_at, deadline, drain_cause, notified, drained_at, outcome, removed_at, last_error,
    cleanup_pending, provisioning_at, metered)
SELECT id, cluster_id, machine_id, name, class, gpus, state, created_at, ready_at,
    drain_started_at, deadline, drain_cause, notified, drained_at, outcome, removed_at, last_error,
    cleanup_pending, provisioning_at, 1 FROM node_history;
DROP TABLE node_history;
DROP INDEX usage_open;
DROP INDEX nodes_removed;
DROP INDEX nodes_unmetered;
DROP INDEX nodes_live;
ALTER TABLE nodes DROP COLUMN metered;
