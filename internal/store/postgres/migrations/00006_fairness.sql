-- Fair sharing of spare capacity over time: unmet_since is when a
-- cluster's preemptible target last became unmet (NULL while it is met).
-- Among clusters equally entitled to a freed node, the one unmet longest
-- gets it, so a late cluster does not wait behind earlier ones forever.

-- +goose Up
ALTER TABLE clusters ADD COLUMN unmet_since TIMESTAMPTZ;

-- +goose Down
ALTER TABLE clusters DROP COLUMN unmet_since;
