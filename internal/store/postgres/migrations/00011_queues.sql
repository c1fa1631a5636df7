-- The preemptible target can follow the tenant's queue: ProvisioningRequests
-- of sparecap's class in the attached cluster raise it, up to
-- max_preemptible_gpus (0: the tenant has not opted in, requests are not
-- taken). requested_preemptible_gpus is what the requests ask for now; the
-- target the allocator fills is the larger of desired_preemptible_gpus and
-- that, capped at the maximum.

-- +goose Up
ALTER TABLE clusters ADD COLUMN max_preemptible_gpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE clusters ADD COLUMN requested_preemptible_gpus BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE clusters DROP COLUMN requested_preemptible_gpus;
ALTER TABLE clusters DROP COLUMN max_preemptible_gpus;
