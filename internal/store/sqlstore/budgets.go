package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

const (
	budgetCols = `id, project_id, name, label, amount, thresholds, change_percent, created_at`
	alertCols  = `seq, budget_id, project_id, name, kind, threshold, alert_key, month, at, spend, forecast, message`
)

// CreateBudget inserts b; ErrConflict when its ID or its name in the
// project is taken.
func (t *tx) CreateBudget(ctx context.Context, b domain.Budget) error {
	th, _ := json.Marshal(b.Thresholds)
	return t.create(ctx, "budget "+b.ID, rebind(t.s.d, `INSERT INTO budgets (`+budgetCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`), b.ID, b.ProjectID, text(b.Name), text(b.Label), b.Amount, string(th), b.ChangePercent,
		t.s.timeArg(b.CreatedAt))
}

// DeleteBudget deletes the budget (its alerts stay: history); ErrNotFound
// if absent.
func (t *tx) DeleteBudget(ctx context.Context, id string) error {
	return t.update(ctx, "budget "+id, rebind(t.s.d, `DELETE FROM budgets WHERE id = ?`), id)
}

// AddBudgetAlerts inserts alerts; one whose project, budget name, key and
// month are stored is left as it was.
func (t *tx) AddBudgetAlerts(ctx context.Context, as []domain.BudgetAlert) error {
	q := rebind(t.s.d, `INSERT INTO budget_alerts (`+strings.TrimPrefix(alertCols, "seq, ")+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`)
	for _, a := range as {
		if _, err := t.q.ExecContext(ctx, q, a.BudgetID, a.ProjectID, text(a.Name), a.Kind, a.Threshold, a.Key, a.Month,
			t.s.timeArg(a.At), a.Spend, a.Forecast, text(a.Message)); err != nil {
			return t.writeErr("add a budget alert", err)
		}
	}
	return nil
}

// PruneBudgetAlerts deletes up to limit of the oldest alerts raised
// before t.
func (t *tx) PruneBudgetAlerts(ctx context.Context, before time.Time, limit int) (int, error) {
	if before.IsZero() || limit <= 0 {
		return 0, nil
	}
	res, err := t.q.ExecContext(ctx, rebind(t.s.d, `DELETE FROM budget_alerts WHERE seq IN
		(SELECT seq FROM budget_alerts WHERE at < ? ORDER BY seq LIMIT ?)`), t.s.timeArg(before), limit)
	if err != nil {
		return 0, t.writeErr("prune budget alerts", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, t.writeErr("prune budget alerts", err)
	}
	return int(n), nil
}

func (s *Store) ListBudgets(ctx context.Context, projectID string) ([]domain.Budget, error) {
	return s.rd().ListBudgets(ctx, projectID)
}

// ListBudgets lists the project's budgets (all with ""), by project and
// name.
func (r reader) ListBudgets(ctx context.Context, projectID string) ([]domain.Budget, error) {
	q, args := `SELECT `+budgetCols+` FROM budgets`, []any{}
	if projectID != "" {
		q, args = q+` WHERE project_id = ?`, append(args, projectID)
	}
	return list(ctx, r, scanBudget, "budgets", rebind(r.s.d, q+` ORDER BY project_id, name`), args...)
}

func scanBudget(sc scanner) (b domain.Budget, err error) {
	var th string
	if err = sc.Scan(&b.ID, &b.ProjectID, &b.Name, &b.Label, &b.Amount, &th, &b.ChangePercent, timeCol{&b.CreatedAt}); err != nil {
		return b, err
	}
	if th != "" {
		err = json.Unmarshal([]byte(th), &b.Thresholds)
	}
	return b, err
}

func (s *Store) ListBudgetAlerts(ctx context.Context, f store.BudgetAlertFilter) ([]domain.BudgetAlert, error) {
	return s.rd().ListBudgetAlerts(ctx, f)
}

// ListBudgetAlerts lists alerts matching f, in f's order.
func (r reader) ListBudgetAlerts(ctx context.Context, f store.BudgetAlertFilter) ([]domain.BudgetAlert, error) {
	var c conds
	c.eq("project_id", f.ProjectID)
	c.eq("budget_id", f.BudgetID)
	c.eq("name", f.Name)
	c.eq("month", f.Month)
	if f.AfterSeq > 0 {
		c.add("seq > ?", f.AfterSeq)
	}
	if f.BeforeSeq > 0 {
		c.add("seq < ?", f.BeforeSeq)
	}
	order := " ORDER BY seq"
	if f.Newest {
		order += " DESC"
	}
	q := `SELECT ` + alertCols + ` FROM budget_alerts` + c.sql() + order
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return list(ctx, r, scanAlert, "budget alerts", rebind(r.s.d, q), c.args...)
}

func scanAlert(sc scanner) (a domain.BudgetAlert, err error) {
	err = sc.Scan(&a.Seq, &a.BudgetID, &a.ProjectID, &a.Name, &a.Kind, &a.Threshold, &a.Key, &a.Month, timeCol{&a.At},
		&a.Spend, &a.Forecast, &a.Message)
	return a, err
}
