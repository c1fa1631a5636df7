-- Every node says its GPU type (its machine's): a cluster's preemptible
-- nodes may be of several types, each billed at its own price. Nodes of
-- before are their machines' type.

-- +goose Up
ALTER TABLE nodes ADD COLUMN gpu_type TEXT NOT NULL DEFAULT '';
ALTER TABLE node_history ADD COLUMN gpu_type TEXT NOT NULL DEFAULT '';
UPDATE nodes SET gpu_type = COALESCE((SELECT m.gpu_type FROM machines m WHERE m.id = nodes.machine_id), '');
UPDATE node_history SET gpu_type = COALESCE((SELECT m.gpu_type FROM machines m WHERE m.id = node_history.machine_id), '');

-- +goose Down
ALTER TABLE node_history DROP COLUMN gpu_type;
ALTER TABLE nodes DROP COLUMN gpu_type;
