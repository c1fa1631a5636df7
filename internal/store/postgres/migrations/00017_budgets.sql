-- Budgets: a project's monthly spending limits, and the alerts they
-- raised (each once: by budget and key).

-- +goose Up
CREATE TABLE budgets (
    id             TEXT PRIMARY KEY,
    project_id     TEXT NOT NULL REFERENCES projects (id),
    name           TEXT NOT NULL,
    label          TEXT NOT NULL DEFAULT '',
    amount         TEXT NOT NULL,
    thresholds     TEXT NOT NULL DEFAULT '',
    change_percent INTEGER NOT NULL DEFAULT 0,
    created_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (project_id, name)
);
CREATE TABLE budget_alerts (
    seq BIGSERIAL PRIMARY KEY,
    budget_id  TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    threshold  INTEGER NOT NULL DEFAULT 0,
    alert_key  TEXT NOT NULL,
    month      TEXT NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    spend      TEXT NOT NULL DEFAULT '',
    forecast   TEXT NOT NULL DEFAULT '',
    message    TEXT NOT NULL DEFAULT '',
    UNIQUE (budget_id, alert_key)
);
CREATE INDEX budget_alerts_project ON budget_alerts (project_id, seq);

-- +goose Down
DROP TABLE budget_alerts;
DROP TABLE budgets;
