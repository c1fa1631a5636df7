-- The units of work (epochs, steps) a span's job reported completed, for
-- the cost of a unit of work.

-- +goose Up
ALTER TABLE work_spans ADD COLUMN progress BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE work_spans DROP COLUMN progress;
