-- Capacity booked ahead: a standard cluster may start at a later time
-- (starts_at; active_at is when its nodes are planned, a drain window and
-- a provisioning lead before), an operator may book a machine out for
-- maintenance (maintenance_at), and a booking claims the machines it will
-- take back (claimed_by: the booked cluster, empty for maintenance;
-- preempt_at: when their notice comes).

-- +goose Up
ALTER TABLE clusters ADD COLUMN starts_at INTEGER;
ALTER TABLE clusters ADD COLUMN active_at INTEGER;
ALTER TABLE machines ADD COLUMN maintenance_at INTEGER;
ALTER TABLE machines ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE machines ADD COLUMN preempt_at INTEGER;

-- +goose Down
ALTER TABLE machines DROP COLUMN preempt_at;
ALTER TABLE machines DROP COLUMN claimed_by;
ALTER TABLE machines DROP COLUMN maintenance_at;
ALTER TABLE clusters DROP COLUMN active_at;
ALTER TABLE clusters DROP COLUMN starts_at;
