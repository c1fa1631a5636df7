-- The leader's meter reads ready nodes from its in-memory copy and asks
-- the database only for the unmetered nodes that stopped being ready
-- (draining, removing, removed): this index makes that read cost what it
-- returns, not the fleet.

-- +goose Up
CREATE INDEX nodes_unmetered_stopped ON nodes (created_at, id) WHERE ready_at IS NOT NULL AND metered = FALSE AND state <> 'ready';

-- +goose Down
DROP INDEX nodes_unmetered_stopped;
