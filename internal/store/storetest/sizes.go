package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// CheckTableSizes: a Sizer lists every table once, the budgets table with
// the bytes of the 50 budgets written (and, where exact, 50 rows), and no
// table of the migrations' own.
func CheckTableSizes(t *testing.T, s store.Store, exactRows bool) {
	t.Helper()
	ctx := context.Background()
	sz, ok := s.(store.Sizer)
	if !ok {
		t.Fatalf("%T is not a store.Sizer", s)
	}
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "sized", CreatedAt: t0}); err != nil {
			return err
		}
		for i := range 50 {
			if err := tx.CreateBudget(ctx, domain.Budget{ID: fmt.Sprint("sb", i), ProjectID: "sized", Name: fmt.Sprint("b", i),
				Amount: "10", Thresholds: []int{50}, CreatedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
				return err
			}
		}
		return nil
	})
	sizes, err := sz.TableSizes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]store.TableSize{}
	for _, ts := range sizes {
		if _, dup := seen[ts.Table]; dup {
			t.Errorf("table %s listed twice", ts.Table)
		}
		seen[ts.Table] = ts
	}
	b, ok := seen["budgets"]
	if !ok || b.Bytes < 50*20 || (exactRows && b.Rows != 50) {
		t.Errorf("budgets: %+v (listed: %v)", b, sizes)
	}
	for _, want := range []string{"nodes", "events", "work_spans", "usage", "budget_alerts"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("table %s not listed", want)
		}
	}
	if _, ok := seen["goose_db_version"]; ok {
		t.Error("the migrations' own table is listed")
	}
}
