-- A project's storage quota in bytes, set by the operator (0: the
-- server's default).

-- +goose Up
ALTER TABLE projects ADD COLUMN storage_quota INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE projects DROP COLUMN storage_quota;
