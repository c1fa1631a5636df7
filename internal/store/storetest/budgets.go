package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testBudgets: a budget's name is its project's; a budget needs its
// project; deleting one leaves its alerts; an alert is written once per
// project, budget name, key and month; alerts list oldest or newest
// first, after or before a Seq.
func testBudgets(t *testing.T, s store.Store) {
	ctx := t.Context()
	update(t, s, func(tx store.Tx) error {
		for _, p := range []string{"bp1", "bp2"} {
			if err := tx.CreateProject(ctx, domain.Project{ID: p, CreatedAt: at(0)}); err != nil {
				return err
			}
		}
		return nil
	})
	a := domain.Budget{ID: "b1", ProjectID: "bp1", Name: "all", Amount: "1000.5", Thresholds: []int{50, 100}, CreatedAt: at(1)}
	b := domain.Budget{ID: "b2", ProjectID: "bp1", Name: "vision", Label: "team=vision", Amount: "10", ChangePercent: 40, CreatedAt: at(2)}
	c := domain.Budget{ID: "b3", ProjectID: "bp2", Name: "all", Amount: "1", CreatedAt: at(3)}
	update(t, s, func(tx store.Tx) error {
		for _, x := range []domain.Budget{a, b, c} {
			if err := tx.CreateBudget(ctx, x); err != nil {
				return err
			}
		}
		return nil
	})
	for _, bad := range []struct {
		b    domain.Budget
		want error
	}{
		{domain.Budget{ID: "b9", ProjectID: "bp1", Name: "all", Amount: "1", CreatedAt: at(1)}, domain.ErrConflict},
		{domain.Budget{ID: "b1", ProjectID: "bp2", Name: "other", Amount: "1", CreatedAt: at(1)}, domain.ErrConflict},
		{domain.Budget{ID: "b8", ProjectID: "nope", Name: "x", Amount: "1", CreatedAt: at(1)}, domain.ErrNotFound},
	} {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateBudget(ctx, bad.b) })
		if !errors.Is(err, bad.want) {
			t.Errorf("create %+v: %v, want %v", bad.b, err, bad.want)
		}
	}
	got, err := s.ListBudgets(ctx, "bp1")
	if err != nil || !reflect.DeepEqual(got, []domain.Budget{a, b}) {
		t.Fatalf("bp1's budgets: %+v (%v)", got, err)
	}
	if all, _ := s.ListBudgets(ctx, ""); len(all) != 3 {
		t.Fatalf("all budgets: %+v", all)
	}
	alert := func(budget, name, key string, minute int) domain.BudgetAlert {
		return domain.BudgetAlert{BudgetID: budget, ProjectID: "bp1", Name: name, Kind: domain.AlertSpend, Threshold: 50, Key: key,
			Month: "2026-11", At: at(minute), Spend: "500.25", Forecast: "1200.00", Message: "half spent"}
	}
	update(t, s, func(tx store.Tx) error {
		return tx.AddBudgetAlerts(ctx, []domain.BudgetAlert{alert("b1", "all", "spend:50", 10), alert("b2", "team", "spend:50", 11)})
	})
	again := alert("b1", "all", "spend:50", 20)
	again.Message = "changed"
	// A budget of the same name created again raises nothing its name
	// raised that month.
	recreated := alert("b9", "all", "spend:50", 21)
	recreated.Message = "again"
	update(t, s, func(tx store.Tx) error { return tx.AddBudgetAlerts(ctx, []domain.BudgetAlert{again, recreated}) })
	update(t, s, func(tx store.Tx) error { return tx.DeleteBudget(ctx, "b1") })
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.DeleteBudget(ctx, "b1") }); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("delete a deleted budget: %v", err)
	}
	alerts, err := s.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: "bp1", Month: "2026-11"})
	if err != nil || len(alerts) != 2 || alerts[0].Message != "half spent" || alerts[0].Seq == 0 || alerts[1].BudgetID != "b2" ||
		!alerts[0].At.Equal(at(10)) {
		t.Fatalf("alerts: %+v (%v)", alerts, err)
	}
	if one, _ := s.ListBudgetAlerts(ctx, store.BudgetAlertFilter{BudgetID: "b2", Limit: 1}); len(one) != 1 || one[0].BudgetID != "b2" {
		t.Fatalf("b2's alerts: %+v", one)
	}
	// Next month the same name and key is a new alert.
	dec := alert("b9", "all", "spend:50", 30)
	dec.Month = "2026-12"
	update(t, s, func(tx store.Tx) error { return tx.AddBudgetAlerts(ctx, []domain.BudgetAlert{dec}) })
	if got, _ := s.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: "bp1", Name: "all"}); len(got) != 2 || got[1].Month != "2026-12" {
		t.Fatalf("the name all's alerts: %+v", got)
	}
	checkAlertOrder(t, s, alerts[0].Seq, alerts[1].Seq)
	checkAlertPrune(t, s)
}

// checkAlertPrune: the retention deletes the oldest alerts raised before
// a time, at most a slice of them at a time.
func checkAlertPrune(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	prune := func(before time.Time, limit int) int {
		var n int
		update(t, s, func(tx store.Tx) (err error) {
			n, err = tx.PruneBudgetAlerts(ctx, before, limit)
			return err
		})
		return n
	}
	if n := prune(at(11), 5); n != 1 {
		t.Errorf("pruned %d alerts raised before minute 11, want 1", n)
	}
	if n := prune(at(31), 1); n != 1 {
		t.Errorf("pruned %d alerts in a slice of 1", n)
	}
	left, err := s.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: "bp1"})
	if err != nil || len(left) != 1 || left[0].Month != "2026-12" {
		t.Fatalf("left after the prunes: %+v (%v)", left, err)
	}
	if n := prune(time.Time{}, 10); n != 0 {
		t.Errorf("a zero time pruned %d", n)
	}
}

// checkAlertOrder checks the listing's orders and cursors over bp1's
// three alerts, of Seq first, second and a third after them.
func checkAlertOrder(t *testing.T, s store.Store, first, second int64) {
	t.Helper()
	ctx := context.Background()
	seqs := func(f store.BudgetAlertFilter) []int64 {
		f.ProjectID = "bp1"
		as, err := s.ListBudgetAlerts(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, a := range as {
			out = append(out, a.Seq)
		}
		return out
	}
	all := seqs(store.BudgetAlertFilter{})
	if len(all) != 3 || all[0] != first || all[1] != second {
		t.Fatalf("oldest first: %v", all)
	}
	third := all[2]
	for _, tc := range []struct {
		f    store.BudgetAlertFilter
		want []int64
	}{
		{store.BudgetAlertFilter{Newest: true}, []int64{third, second, first}},
		{store.BudgetAlertFilter{Newest: true, Limit: 2}, []int64{third, second}},
		{store.BudgetAlertFilter{Newest: true, BeforeSeq: second}, []int64{first}},
		{store.BudgetAlertFilter{Newest: true, AfterSeq: first}, []int64{third, second}},
		{store.BudgetAlertFilter{AfterSeq: first, Limit: 1}, []int64{second}},
		{store.BudgetAlertFilter{AfterSeq: first, BeforeSeq: third}, []int64{second}},
	} {
		if got := seqs(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.f, got, tc.want)
		}
	}
}

// CheckUpgradedAlerts checks a store upgraded from a database whose
// budget_alerts held, for project p, the 50% alert of budget b1 (named
// "all", 2026-11, seq 1), the same of b2 (the name created again, seq 2)
// and of b1x in 2026-10 (seq 3): the first of November's is kept,
// October's too, and the name raises no November 50% alert again.
func CheckUpgradedAlerts(t *testing.T, s store.Store, at time.Time) {
	t.Helper()
	ctx := context.Background()
	got, err := s.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: "p"})
	if err != nil || len(got) != 2 || got[0].Seq != 1 || got[0].BudgetID != "b1" || got[1].Month != "2026-10" {
		t.Fatalf("upgraded alerts: %+v (%v)", got, err)
	}
	again := domain.BudgetAlert{BudgetID: "b3", ProjectID: "p", Name: "all", Kind: domain.AlertSpend, Threshold: 50, Key: "spend:50",
		Month: "2026-11", At: at}
	update(t, s, func(tx store.Tx) error { return tx.AddBudgetAlerts(ctx, []domain.BudgetAlert{again}) })
	if got, _ := s.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: "p"}); len(got) != 2 {
		t.Fatalf("after a third copy: %+v", got)
	}
}

// CheckUpgradedNodeTypes: nodes and archived nodes written before nodes
// had a GPU type (n on machine m, h archived, both of cluster c in
// project p) read as their machines' type.
func CheckUpgradedNodeTypes(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"n", "h"} {
		n, err := s.GetNode(ctx, id)
		if err != nil || n.GPUType != "H200" {
			t.Errorf("upgraded node %s: %+v (%v); want its machine's type H200", id, n, err)
		}
	}
}
