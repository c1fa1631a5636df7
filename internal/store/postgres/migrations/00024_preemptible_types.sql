-- A cluster's preemptible target may be of several GPU types of its
-- region: their list in order of preference (comma-separated; empty: the
-- cluster's own), the strategy that spreads the target over them, and a
-- cap on the preemptible price per GPU-hour of a type it takes.

-- +goose Up
ALTER TABLE clusters ADD COLUMN preemptible_gpu_types TEXT NOT NULL DEFAULT '';
ALTER TABLE clusters ADD COLUMN preemptible_strategy TEXT NOT NULL DEFAULT '';
ALTER TABLE clusters ADD COLUMN max_preemptible_price TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE clusters DROP COLUMN max_preemptible_price;
ALTER TABLE clusters DROP COLUMN preemptible_strategy;
ALTER TABLE clusters DROP COLUMN preemptible_gpu_types;
