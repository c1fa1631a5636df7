-- A node converted in place (preemptible to standard or back) is billed
-- in each class for its own period: usage is keyed by node and period
-- start, and nodes.class_since is when the current period started
-- (NULL: never converted, since ready_at). A final record of an earlier
-- period does not end the node's billing: only the current period's sets
-- metered (see PutUsage).

-- +goose Up
ALTER TABLE nodes ADD COLUMN class_since TIMESTAMPTZ;
ALTER TABLE node_history ADD COLUMN class_since TIMESTAMPTZ;
ALTER TABLE usage DROP CONSTRAINT usage_pkey;
ALTER TABLE usage ALTER COLUMN start_at SET NOT NULL;
ALTER TABLE usage ADD PRIMARY KEY (node_id, start_at);

-- +goose Down
-- Only a node's latest period fits the old key: earlier ones are dropped.
DELETE FROM usage u WHERE start_at < (SELECT MAX(start_at) FROM usage v WHERE v.node_id = u.node_id);
ALTER TABLE usage DROP CONSTRAINT usage_pkey;
ALTER TABLE usage ALTER COLUMN start_at DROP NOT NULL;
ALTER TABLE usage ADD PRIMARY KEY (node_id);
ALTER TABLE node_history DROP COLUMN class_since;
ALTER TABLE nodes DROP COLUMN class_since;
