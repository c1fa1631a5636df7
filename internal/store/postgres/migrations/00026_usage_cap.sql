-- A preemptible node of a cluster under a price cap is never billed above
-- the cap: its usage records carry the cap in micro-dollars per GPU-hour
-- (0: none), as they carry what else pricing needs.

-- +goose Up
ALTER TABLE usage ADD COLUMN max_rate_micros BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE usage DROP COLUMN max_rate_micros;
