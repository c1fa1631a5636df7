package storetest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testBudgets: a budget's name is its project's; a budget needs its
// project; deleting one leaves its alerts; an alert is written once per
// budget and key.
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
	alert := func(budget, key string, minute int) domain.BudgetAlert {
		return domain.BudgetAlert{BudgetID: budget, ProjectID: "bp1", Name: "all", Kind: domain.AlertSpend, Threshold: 50, Key: key,
			Month: "2026-11", At: at(minute), Spend: "500.25", Forecast: "1200.00", Message: "half spent"}
	}
	update(t, s, func(tx store.Tx) error {
		return tx.AddBudgetAlerts(ctx, []domain.BudgetAlert{alert("b1", "spend:50", 10), alert("b2", "spend:50", 11)})
	})
	again := alert("b1", "spend:50", 20)
	again.Message = "changed"
	update(t, s, func(tx store.Tx) error { return tx.AddBudgetAlerts(ctx, []domain.BudgetAlert{again}) })
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
	if none, _ := s.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: "bp1", Month: "2026-12"}); len(none) != 0 {
		t.Fatalf("December's alerts: %+v", none)
	}
}
