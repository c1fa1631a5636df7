-- What sparecap learned of the permissions an attached cluster's API
-- grants it (domain.Access as JSON; '' when never checked). Only
-- SetAccess writes it; attaching or detaching a kubeconfig clears it.

-- +goose Up
ALTER TABLE clusters ADD COLUMN access TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE clusters DROP COLUMN access;
