-- A drained node's work that reported a checkpoint after its notice saved
-- the work the ledger put at risk: when it did.

-- +goose Up
ALTER TABLE lost_work ADD COLUMN saved_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE lost_work DROP COLUMN saved_at;
