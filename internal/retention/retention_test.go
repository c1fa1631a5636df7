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

// TestRawRowsGoOnceRolledAndClean: usage records and work spans older
// than their retention go only behind the rollup mark, and never those of
// a month waiting to be rolled again (the roller still reads them).
func TestRawRowsGoOnceRolledAndClean(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	jan, feb, mar := t0, t0.AddDate(0, 1, 0), t0.AddDate(0, 2, 0)
	err := st.Update(ctx, func(tx store.Tx) error {
		var us []domain.UsageRecord
		var ws []domain.WorkSpan
		for i, m := range []time.Time{jan, feb, mar} {
			node := fmt.Sprint("n", i)
			us = append(us, domain.UsageRecord{NodeID: node, ClusterID: "c", ProjectID: "p", GPUs: 8, Start: m, End: m.Add(time.Hour), Final: true})
			ws = append(ws, domain.WorkSpan{ProjectID: "p", ClusterID: "c", NodeID: node, End: m.Add(time.Hour), Running: domain.Running{Key: "k", Start: m}})
		}
		if err := tx.PutUsages(ctx, us); err != nil {
			return err
		}
		return tx.AddWorkSpans(ctx, ws)
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func() (u, w int) {
		st.ScanUsage(ctx, store.UsageFilter{}, func(domain.UsageRecord) error { u++; return nil })
		st.ScanWorkSpans(ctx, store.WorkSpanFilter{}, func(domain.WorkSpan) error { w++; return nil })
		return
	}
	p := &Pruner{Store: st, Clock: clock.NewFake(mar.AddDate(1, 0, 0)), Rules: []Rule{Usage(24 * time.Hour), WorkSpans(24 * time.Hour)}}
	pass := func() {
		if _, err := p.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	if u, w := count(); u != 3 || w != 3 {
		t.Fatalf("nothing rolled, yet %d records and %d spans left of 3", u, w)
	}
	// January and February rolled; February waits to be rolled again.
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.MarkRolled(ctx, mar); err != nil {
			return err
		}
		return tx.MarkDirty(ctx, []domain.ClusterMonth{{Month: feb, ProjectID: "p", ClusterID: "c"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	pass()
	if u, w := count(); u != 2 || w != 2 {
		t.Fatalf("%d records and %d spans left, want February's and March's", u, w)
	}
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.PutRollups(ctx, domain.ClusterMonth{Month: feb, ProjectID: "p", ClusterID: "c"}, nil)
	}); err != nil {
		t.Fatal(err)
	}
	pass()
	if u, w := count(); u != 1 || w != 1 {
		t.Fatalf("%d records and %d spans left, want March's (not rolled)", u, w)
	}
}

// TestTheLedgerIsKeptItsRetention: the lost-work ledger's entries older
// than its retention go.
func TestTheLedgerIsKeptItsRetention(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	err := st.Update(ctx, func(tx store.Tx) error {
		return tx.AddLostWork(ctx, []domain.LostWork{{NodeID: "old", At: t0}, {NodeID: "new", At: t0.AddDate(0, 0, 300)}})
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &Pruner{Store: st, Clock: clock.NewFake(t0.AddDate(0, 0, 401)), Rules: []Rule{LostWork(400 * 24 * time.Hour), NodeHistory(400 * 24 * time.Hour)}}
	if _, err := p.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	left, err := st.ListLostWork(ctx, store.LostWorkFilter{})
	if err != nil || len(left) != 1 || left[0].NodeID != "new" {
		t.Fatalf("left %+v (%v), want the newer entry", left, err)
	}
}
