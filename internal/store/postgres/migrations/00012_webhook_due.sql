-- The sender's read of due deliveries takes at most a few per endpoint;
-- this index lets it find each endpoint's oldest due ones with one search,
-- so the read costs what it returns rather than the whole backlog.

-- +goose Up
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, next_at, created_at, message_id) WHERE state = 'pending';

-- +goose Down
DROP INDEX webhook_deliveries_pending;
