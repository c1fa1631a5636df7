-- A budget alert is raised once per project, budget name, key (kind and
-- threshold, or the day of a change) and month, however often a budget of
-- that name is deleted and created again (was: once per budget ID and
-- key, which a new budget's ID escaped, and which kept a threshold from
-- firing in a later month). SQLite cannot drop a table's UNIQUE: the table
-- is copied, keeping the first of each alert's copies.

-- +goose Up
CREATE TABLE budget_alerts_once (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    budget_id  TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    threshold  INTEGER NOT NULL DEFAULT 0,
    alert_key  TEXT NOT NULL,
    month      TEXT NOT NULL,
    at         INTEGER NOT NULL,
    spend      TEXT NOT NULL DEFAULT '',
    forecast   TEXT NOT NULL DEFAULT '',
    message    TEXT NOT NULL DEFAULT '',
    UNIQUE (project_id, name, alert_key, month)
);
INSERT INTO budget_alerts_once (seq, budget_id, project_id, name, kind, threshold, alert_key, month, at, spend, forecast, message)
SELECT seq, budget_id, project_id, name, kind, threshold, alert_key, month, at, spend, forecast, message
FROM budget_alerts a
WHERE seq = (SELECT MIN(seq) FROM budget_alerts b
             WHERE b.project_id = a.project_id AND b.name = a.name AND b.alert_key = a.alert_key AND b.month = a.month);
DROP TABLE budget_alerts;
ALTER TABLE budget_alerts_once RENAME TO budget_alerts;
CREATE INDEX budget_alerts_project ON budget_alerts (project_id, seq);

-- +goose Down
CREATE TABLE budget_alerts_by_id (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    budget_id  TEXT NOT NULL,
    project_id TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    threshold  INTEGER NOT NULL DEFAULT 0,
    alert_key  TEXT NOT NULL,
    month      TEXT NOT NULL,
    at         INTEGER NOT NULL,
    spend      TEXT NOT NULL DEFAULT '',
    forecast   TEXT NOT NULL DEFAULT '',
    message    TEXT NOT NULL DEFAULT '',
    UNIQUE (budget_id, alert_key)
);
INSERT OR IGNORE INTO budget_alerts_by_id SELECT * FROM budget_alerts ORDER BY seq;
DROP TABLE budget_alerts;
ALTER TABLE budget_alerts_by_id RENAME TO budget_alerts;
CREATE INDEX budget_alerts_project ON budget_alerts (project_id, seq);
