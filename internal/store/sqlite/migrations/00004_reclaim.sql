-- The reclaim contract (the machine goes back at the deadline whatever the
-- tenant's API answers):
-- cleanup_pending: the node's machine was taken back but its objects in the
--   tenant's cluster (the Node, leftover pods) are not deleted yet; cleanup
--   retries in the background. A partial index keeps that work list cheap.
-- provisioning_at: when the node started provisioning (a pending node starts
--   later than it was created), for the registration timeout.
-- A machine counts its nodes' consecutive registration failures; past a
-- limit it is taken out of service with a reason the admin listing shows.

-- +goose Up
ALTER TABLE nodes ADD COLUMN cleanup_pending INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN provisioning_at INTEGER;
CREATE INDEX nodes_cleanup ON nodes (id) WHERE cleanup_pending = TRUE;
ALTER TABLE machines ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE machines ADD COLUMN out_of_service_reason TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE machines DROP COLUMN out_of_service_reason;
ALTER TABLE machines DROP COLUMN failures;
DROP INDEX nodes_cleanup;
ALTER TABLE nodes DROP COLUMN provisioning_at;
ALTER TABLE nodes DROP COLUMN cleanup_pending;
