-- Token lifecycle: every token has an ID (which names it in the API; the
-- secret is shown once), a name, an optional expiry, a revocation time and
-- when it was last used. Operator (admin) tokens live here too, with no
-- project (project_id NULL), so they can be rotated without a restart.
-- The table is rebuilt: project_id becomes nullable.

-- +goose Up
CREATE TABLE tokens_new (
    id           TEXT PRIMARY KEY,
    hash         TEXT NOT NULL UNIQUE,
    project_id   TEXT REFERENCES projects (id),
    name         TEXT NOT NULL DEFAULT '',
    created_at   INTEGER,
    expires_at   INTEGER,
    revoked_at   INTEGER,
    last_used_at INTEGER
);
INSERT INTO tokens_new (id, hash, project_id, name, created_at)
    SELECT 'tok-' || substr(hash, 1, 16), hash, project_id, 'token', created_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_new RENAME TO tokens;
CREATE INDEX tokens_project ON tokens (project_id);

-- +goose Down
CREATE TABLE tokens_old (
    hash       TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (id),
    created_at INTEGER
);
INSERT INTO tokens_old (hash, project_id, created_at)
    SELECT hash, project_id, created_at FROM tokens WHERE project_id IS NOT NULL AND revoked_at IS NULL;
DROP TABLE tokens;
ALTER TABLE tokens_old RENAME TO tokens;
CREATE INDEX tokens_project ON tokens (project_id);
