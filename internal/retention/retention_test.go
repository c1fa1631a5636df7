package retention

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestBudgetAlertsAreKeptTheirRetention: a pass deletes the alerts older
// than the retention in slices, at most Slices of them, says a backlog is
// left when its last slice was full, and the next pass finishes; newer
// alerts stay, and a retention of 0 keeps everything.
func TestBudgetAlertsAreKeptTheirRetention(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	// 25 alerts, one a day from January 1st, each of its own month key.
	err := st.Update(ctx, func(tx store.Tx) error {
		var as []domain.BudgetAlert
		for d := range 25 {
			as = append(as, domain.BudgetAlert{BudgetID: "b", ProjectID: "p", Name: "all", Kind: domain.AlertChange,
				Key: fmt.Sprint("change:", d), Month: "2026-01", At: t0.AddDate(0, 0, d)})
		}
		return tx.AddBudgetAlerts(ctx, as)
	})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0.AddDate(0, 0, 30))
	pruned := map[string]int{}
	p := &Pruner{Store: st, Clock: clk, Rules: []Rule{BudgetAlerts(10 * 24 * time.Hour)}, Slice: 4, Slices: 2,
		Pruned: func(table string, n int) { pruned[table] += n }}
	// Kept 10 days at day 30: the 20 alerts of days 0-19 go.
	left := func() int {
		as, err := st.ListBudgetAlerts(ctx, store.BudgetAlertFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(as)
	}
	for i, want := range []struct {
		backlog bool
		left    int
	}{{true, 17}, {true, 9}, {false, 5}, {false, 5}} {
		backlog, err := p.Pass(ctx)
		if err != nil || backlog != want.backlog || left() != want.left {
			t.Fatalf("pass %d: backlog %v (%v), %d left; want %v, %d", i, backlog, err, left(), want.backlog, want.left)
		}
	}
	if pruned["budget_alerts"] != 20 {
		t.Errorf("told %v, want 20 budget_alerts", pruned)
	}
	p.Rules = []Rule{BudgetAlerts(0)}
	clk.Step(365 * 24 * time.Hour)
	if _, err := p.Pass(ctx); err != nil || left() != 5 {
		t.Errorf("a retention of 0 pruned: %d left (%v)", left(), err)
	}
}

type sizer []store.TableSize

func (s sizer) TableSizes(context.Context) ([]store.TableSize, error) { return s, nil }

// TestAPassToldTheTableSizes: after its rules, a pass tells what the
// store's Sizer says of every table (the server's table gauges).
func TestAPassToldTheTableSizes(t *testing.T) {
	var told []store.TableSize
	p := &Pruner{Store: memstore.New(), Clock: clock.NewFake(t0), Sizer: sizer{{Table: "events", Rows: 3, Bytes: 4096}},
		Sizes: func(s []store.TableSize) { told = s }}
	if _, err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(told) != 1 || told[0].Table != "events" || told[0].Bytes != 4096 {
		t.Errorf("told %+v", told)
	}
}
