-- A budget alert is raised once per project, budget name, key (kind and
-- threshold, or the day of a change) and month, however often a budget of
-- that name is deleted and created again (was: once per budget ID and
-- key, which a new budget's ID escaped, and which kept a threshold from
-- firing in a later month). The first of each alert's copies is kept.

-- +goose Up
DELETE FROM budget_alerts a USING budget_alerts b
WHERE a.project_id = b.project_id AND a.name = b.name AND a.alert_key = b.alert_key AND a.month = b.month AND a.seq > b.seq;
ALTER TABLE budget_alerts DROP CONSTRAINT budget_alerts_budget_id_alert_key_key;
ALTER TABLE budget_alerts ADD CONSTRAINT budget_alerts_once UNIQUE (project_id, name, alert_key, month);

-- +goose Down
ALTER TABLE budget_alerts DROP CONSTRAINT budget_alerts_once;
DELETE FROM budget_alerts a USING budget_alerts b
WHERE a.budget_id = b.budget_id AND a.alert_key = b.alert_key AND a.seq > b.seq;
ALTER TABLE budget_alerts ADD CONSTRAINT budget_alerts_budget_id_alert_key_key UNIQUE (budget_id, alert_key);
