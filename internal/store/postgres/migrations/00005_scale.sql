-- Several servers on one database, and a schema that cannot double-assign:
-- nodes_machine_active: at most one node provisioning, ready, draining or
--   removing per machine, whatever a bug or a split brain tries;
--   nodes_machine_pending: at most one node waiting for each machine.
-- leader: the one row of the leader lease. holder is the replica that holds
--   it until expires_at (microseconds since the Unix epoch, by the
--   database's clock, so replicas' clocks need not agree); epoch grows by
--   one with every new term and fences commits (see store.WithEpoch);
--   address is where the leader serves the API, for followers to forward
--   writes to.
-- leader_epoch: the current term's epoch alone, the row fenced commits
--   read and hold (FOR SHARE): renewing the lease every second must not
--   conflict with them, so it lives apart from the lease.

-- +goose Up
CREATE UNIQUE INDEX nodes_machine_active ON nodes (machine_id)
    WHERE state IN ('provisioning', 'ready', 'draining', 'removing');
CREATE UNIQUE INDEX nodes_machine_pending ON nodes (machine_id) WHERE state = 'pending';
CREATE TABLE leader (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    holder     TEXT NOT NULL DEFAULT '',
    address    TEXT NOT NULL DEFAULT '',
    epoch      BIGINT NOT NULL DEFAULT 0,
    expires_at BIGINT NOT NULL DEFAULT 0
);
INSERT INTO leader (id) VALUES (1);
CREATE TABLE leader_epoch (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch BIGINT NOT NULL DEFAULT 0
);
INSERT INTO leader_epoch (id) VALUES (1);

-- +goose Down
DROP TABLE leader_epoch;
DROP TABLE leader;
DROP INDEX nodes_machine_pending;
DROP INDEX nodes_machine_active;
