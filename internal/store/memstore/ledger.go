package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// ledgerTables are the lost-work ledger (by node, and by notice time then
// node: all and by project), the budgets (by ID, and by project and
// name, their listing order) and the budget alerts (by Seq, and by budget
// and key, which an alert is raised once for).
type ledgerTables struct {
	lostWork          tree[string, *domain.LostWork]
	lostWorkOrder     tree[tid, *domain.LostWork]
	lostWorkByProject tree[stid, *domain.LostWork]
	budgets           tree[string, *domain.Budget]
	budgetNames       tree[ss, *domain.Budget]
	alerts            tree[int64, *domain.BudgetAlert]
	alertKeys         tree[ss, int64]
}

func newLedgerTables() ledgerTables {
	return ledgerTables{lostWork: newTree[string, *domain.LostWork](cmpString),
		lostWorkOrder: newTree[tid, *domain.LostWork](cmpTID), lostWorkByProject: newTree[stid, *domain.LostWork](cmpSTID),
		budgets: newTree[string, *domain.Budget](cmpString), budgetNames: newTree[ss, *domain.Budget](cmpSS),
		alerts: newTree[int64, *domain.BudgetAlert](cmp.Compare[int64]), alertKeys: newTree[ss, int64](cmpSS)}
}

// AddLostWork writes the entries in statements of 64; an entry of a node
// that has one is left as it was.
func (t *tx) AddLostWork(ctx context.Context, ws []domain.LostWork) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	return eachChunk(ws, fixedChunk, func(chunk []domain.LostWork) error {
		for _, w := range chunk {
			if w.At.IsZero() {
				return notNull(fmt.Sprintf("add the lost work of %d nodes", len(chunk)), "lost_work.noticed_at")
			}
		}
		for _, w := range chunk {
			if t.st.lostWork.has(w.NodeID) {
				continue
			}
			w.NodeName, w.ClusterName, w.Job = text(w.NodeName), text(w.ClusterName), text(w.Job)
			w.At, w.SavedAt = dbTime(w.At), dbTime(w.SavedAt)
			t.putLostWork(&w)
		}
		return nil
	})
}

// putLostWork writes an entry (its node, project and notice time never
// change).
func (t *tx) putLostWork(w *domain.LostWork) {
	t.st.lostWork.set(t.w, w.NodeID, w)
	t.st.lostWorkOrder.set(t.w, tid{tkey(w.At), w.NodeID}, w)
	t.st.lostWorkByProject.set(t.w, stid{w.ProjectID, tkey(w.At), w.NodeID}, w)
}

func (t *tx) SaveLostWork(ctx context.Context, nodeID string, at time.Time) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	w, ok := t.st.lostWork.get(nodeID)
	if !ok || !w.SavedAt.IsZero() || at.IsZero() {
		return nil
	}
	next := *w
	next.SavedAt = dbTime(at)
	t.putLostWork(&next)
	return nil
}

func (v view) ListLostWork(ctx context.Context, f store.LostWorkFilter) ([]domain.LostWork, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := []domain.LostWork{}
	from, to := tkey(dbTime(f.From)), tkey(dbTime(f.To))
	visit := func(at int64, w *domain.LostWork) bool {
		if !f.To.IsZero() && at >= to {
			return false
		}
		if (f.ProjectID == "" || w.ProjectID == f.ProjectID) && (f.ClusterID == "" || w.ClusterID == f.ClusterID) &&
			(f.From.IsZero() || at >= from) {
			out = append(out, *w)
		}
		return true
	}
	if f.ProjectID != "" {
		v.st.lostWorkByProject.ascend(&stid{s: f.ProjectID, t: minKey}, func(k stid, w *domain.LostWork) bool {
			return k.s == f.ProjectID && visit(k.t, w)
		})
		return out, nil
	}
	v.st.lostWorkOrder.each(func(k tid, w *domain.LostWork) bool { return visit(k.t, w) })
	return out, nil
}

// CreateBudget writes b unless its ID or its name in the project is
// taken; its project must exist.
func (t *tx) CreateBudget(ctx context.Context, b domain.Budget) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if b.CreatedAt.IsZero() {
		return notNull("create budget "+b.ID, "budgets.created_at")
	}
	b.Name, b.Label, b.CreatedAt = text(b.Name), text(b.Label), dbTime(b.CreatedAt)
	if t.st.budgets.has(b.ID) || t.st.budgetNames.has(ss{b.ProjectID, b.Name}) {
		return conflict("budget " + b.ID)
	}
	if !t.st.projects.has(b.ProjectID) {
		return missingParent("create budget " + b.ID)
	}
	th, err := storedThresholds(b.Thresholds)
	if err != nil {
		return fmt.Errorf("create budget %s: %w", b.ID, err)
	}
	b.Thresholds = th
	t.st.budgets.set(t.w, b.ID, &b)
	t.st.budgetNames.set(t.w, ss{b.ProjectID, b.Name}, &b)
	return nil
}

// storedThresholds are thresholds as their JSON column gives them back:
// none (nil) stays nil, an empty list stays empty.
func storedThresholds(th []int) ([]int, error) {
	b, _ := json.Marshal(th)
	var out []int
	err := json.Unmarshal(b, &out)
	return out, err
}

func (t *tx) DeleteBudget(ctx context.Context, id string) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	b, ok := t.st.budgets.delete(t.w, id)
	if !ok {
		return missing("update budget " + id)
	}
	t.st.budgetNames.delete(t.w, ss{b.ProjectID, b.Name})
	return nil
}

func (v view) ListBudgets(ctx context.Context, projectID string) ([]domain.Budget, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := []domain.Budget{}
	v.st.budgetNames.ascend(&ss{a: projectID}, func(k ss, b *domain.Budget) bool {
		if projectID != "" && k.a != projectID {
			return false
		}
		c := *b
		c.Thresholds = slices.Clone(b.Thresholds)
		out = append(out, c)
		return true
	})
	return out, nil
}

// AddBudgetAlerts writes each alert in a statement of its own: one whose
// project, budget name, key and month are stored is left as it was, though, as with any
// AUTOINCREMENT key, its row took a Seq.
func (t *tx) AddBudgetAlerts(ctx context.Context, as []domain.BudgetAlert) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	for _, a := range as {
		if a.At.IsZero() {
			return notNull("add a budget alert", "budget_alerts.at")
		}
		t.st.alertSeq++
		once := alertOnce(a)
		if t.st.alertKeys.has(once) {
			continue
		}
		a.Seq = t.st.alertSeq
		a.Name, a.Message, a.At = text(a.Name), text(a.Message), dbTime(a.At)
		t.st.alerts.set(t.w, a.Seq, &a)
		t.st.alertKeys.set(t.w, once, a.Seq)
	}
	return nil
}

// PruneBudgetAlerts deletes up to limit of the oldest alerts raised
// before t.
func (t *tx) PruneBudgetAlerts(ctx context.Context, before time.Time, limit int) (int, error) {
	if before.IsZero() || limit <= 0 {
		return 0, nil
	}
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	cut := dbTime(before)
	var gone []*domain.BudgetAlert
	t.st.alerts.each(func(_ int64, a *domain.BudgetAlert) bool {
		if a.At.Before(cut) {
			gone = append(gone, a)
		}
		return len(gone) < limit
	})
	for _, a := range gone {
		t.st.alerts.delete(t.w, a.Seq)
		t.st.alertKeys.delete(t.w, alertOnce(*a))
	}
	return len(gone), nil
}

func (v view) ListBudgetAlerts(ctx context.Context, f store.BudgetAlertFilter) ([]domain.BudgetAlert, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := []domain.BudgetAlert{}
	fn := func(_ int64, a *domain.BudgetAlert) bool {
		if f.Limit > 0 && len(out) >= f.Limit {
			return false
		}
		if alertMatches(a, f) {
			out = append(out, *a)
		}
		return true
	}
	if f.Newest {
		var hi *int64
		if f.BeforeSeq > 0 {
			hi = new(f.BeforeSeq - 1)
		}
		v.st.alerts.descend(hi, fn)
	} else {
		var lo *int64
		if f.AfterSeq > 0 {
			lo = new(f.AfterSeq + 1)
		}
		v.st.alerts.ascend(lo, fn)
	}
	return out, nil
}

// alertMatches says whether a is one f selects (its order and limit
// aside).
func alertMatches(a *domain.BudgetAlert, f store.BudgetAlertFilter) bool {
	return (f.ProjectID == "" || a.ProjectID == f.ProjectID) && (f.BudgetID == "" || a.BudgetID == f.BudgetID) &&
		(f.Name == "" || a.Name == f.Name) && (f.Month == "" || a.Month == f.Month) &&
		(f.AfterSeq <= 0 || a.Seq > f.AfterSeq) && (f.BeforeSeq <= 0 || a.Seq < f.BeforeSeq)
}

// alertOnce is what an alert is raised once for: its project, budget
// name, key and month.
func alertOnce(a domain.BudgetAlert) ss {
	return ss{a.ProjectID + "\x00" + a.Name, a.Key + "\x00" + a.Month}
}
