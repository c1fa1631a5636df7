-- Token lifecycle: every token has an ID (which names it in the API; the
-- secret is shown once), a name, an optional expiry, a revocation time and
-- when it was last used. Operator (admin) tokens live here too, with no
-- project (project_id NULL), so they can be rotated without a restart.

-- +goose Up
ALTER TABLE tokens DROP CONSTRAINT tokens_pkey;
ALTER TABLE tokens ADD COLUMN id TEXT;
UPDATE tokens SET id = 'tok-' || substr(hash, 1, 16);
ALTER TABLE tokens ALTER COLUMN id SET NOT NULL;
ALTER TABLE tokens ADD PRIMARY KEY (id);
ALTER TABLE tokens ADD CONSTRAINT tokens_hash_key UNIQUE (hash);
ALTER TABLE tokens ALTER COLUMN project_id DROP NOT NULL;
ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
UPDATE tokens SET name = 'token';
ALTER TABLE tokens ADD COLUMN expires_at TIMESTAMPTZ;
ALTER TABLE tokens ADD COLUMN revoked_at TIMESTAMPTZ;
ALTER TABLE tokens ADD COLUMN last_used_at TIMESTAMPTZ;

-- +goose Down
DELETE FROM tokens WHERE project_id IS NULL OR revoked_at IS NOT NULL;
ALTER TABLE tokens DROP COLUMN last_used_at;
ALTER TABLE tokens DROP COLUMN revoked_at;
ALTER TABLE tokens DROP COLUMN expires_at;
ALTER TABLE tokens DROP COLUMN name;
ALTER TABLE tokens ALTER COLUMN project_id SET NOT NULL;
ALTER TABLE tokens DROP CONSTRAINT tokens_hash_key;
ALTER TABLE tokens DROP CONSTRAINT tokens_pkey;
ALTER TABLE tokens DROP COLUMN id;
ALTER TABLE tokens ADD PRIMARY KEY (hash);
