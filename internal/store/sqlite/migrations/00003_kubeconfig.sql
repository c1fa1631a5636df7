-- A cluster's attached Kubernetes API: kubeconfig holds the kubeconfig
-- sealed by package secret (NULL when none is attached), kube_attached_at
-- when it was attached (NULL likewise). Both change only together.
-- A node keeps the last error of a step that failed on it ('' when none).

-- +goose Up
ALTER TABLE clusters ADD COLUMN kube_attached_at INTEGER;
ALTER TABLE clusters ADD COLUMN kubeconfig BLOB;
ALTER TABLE nodes ADD COLUMN last_error TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE nodes DROP COLUMN last_error;
ALTER TABLE clusters DROP COLUMN kubeconfig;
ALTER TABLE clusters DROP COLUMN kube_attached_at;
