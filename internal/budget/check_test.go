package budget

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// world: project p with one 8-GPU standard node at $1 a GPU-hour, ready
// since the first of November and still running: its stored record was
// last cut at start (the meter rewrites a running node's record only every
// so often), and half its GPUs run team vision's pod.
func world(t *testing.T) (store.Store, *billing.Book) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: nov}); err != nil {
			return err
		}
		if err := tx.PutUsage(ctx, domain.UsageRecord{NodeID: "n1", ClusterID: "c1", ProjectID: "p", Class: domain.Standard,
			GPUType: "H100", GPUs: 8, Start: nov, End: nov.Add(time.Hour)}); err != nil {
			return err
		}
		return tx.AddWorkSpans(ctx, []domain.WorkSpan{{ProjectID: "p", ClusterID: "c1", NodeID: "n1", Running: domain.Running{
			Key: "u1", GPUs: 4, Start: nov, Labels: map[string]string{"team": "vision"}}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	book, err := billing.NewBook([]domain.Price{{ID: "od", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "1", EffectiveFrom: nov.AddDate(0, -1, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	return st, book
}

func TestStatusOfAProjectAndALabel(t *testing.T) {
	st, book := world(t)
	now := nov.Add(10 * 24 * time.Hour)
	s, err := StatusAt(t.Context(), st, book, domain.Budget{ProjectID: "p", Amount: "10000"}, now)
	if err != nil {
		t.Fatal(err)
	}
	// $8 an hour for 240 hours, counted up to now though the record was
	// cut at the first hour; a steady month forecasts 30 days of it.
	if s.Spend != 1920 || s.Forecast != 5760 || !s.Interval || len(s.Recent) != 9 || s.Recent[7] != 192 {
		t.Fatalf("project: %+v", s)
	}
	s, err = StatusAt(t.Context(), st, book, domain.Budget{ProjectID: "p", Label: "team=vision", Amount: "10000"}, now)
	if err != nil || s.Spend != 960 || s.Forecast != 2880 {
		t.Fatalf("team vision: %+v (%v)", s, err)
	}
	s, err = StatusAt(t.Context(), st, book, domain.Budget{ProjectID: "p", Label: "team=nlp", Amount: "10000"}, now)
	if err != nil || s.Spend != 0 {
		t.Fatalf("team nlp: %+v (%v)", s, err)
	}
}

// TestAlertAtTheFirstCheckAfterACrossing: the checker, run after each
// metering pass, raises a threshold's alert at the first check after the
// spend crossed it (whatever the lag of the stored records), records and
// queues it in one transaction, and never again.
func TestAlertAtTheFirstCheckAfterACrossing(t *testing.T) {
	st, book := world(t)
	ctx := t.Context()
	err := st.Update(ctx, func(tx store.Tx) error {
		return tx.CreateBudget(ctx, domain.Budget{ID: "b1", ProjectID: "p", Name: "vision", Label: "team=vision",
			Amount: "100", Thresholds: []int{50}, CreatedAt: nov})
	})
	if err != nil {
		t.Fatal(err)
	}
	var queued, raised int
	var seen []Status
	c := &Checker{Store: st, Raised: func(domain.BudgetAlert) { raised++ }, Observe: func(all []Status) { seen = all },
		Queue: func(ctx context.Context, tx store.Tx, as []domain.BudgetAlert) error {
			queued += len(as)
			return nil
		}}
	// Vision spends $4 an hour: $50 at 12:30.
	cross := nov.Add(12*time.Hour + 30*time.Minute)
	for _, at := range []time.Time{cross.Add(-time.Minute), cross.Add(time.Second), cross.Add(time.Minute), cross.Add(time.Hour)} {
		if err := c.Check(ctx, book, at); err != nil {
			t.Fatal(err)
		}
		alerts, err := st.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: "p"})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if !at.Before(cross) {
			want = 1
		}
		if len(alerts) != want || queued != want || raised != want {
			t.Fatalf("at %v: %d alerts (%d queued, %d raised), want %d", at, len(alerts), queued, raised, want)
		}
		if want == 1 && (alerts[0].Key != "spend:50" || !alerts[0].At.Equal(cross.Add(time.Second))) {
			t.Fatalf("alert %+v", alerts[0])
		}
	}
	if len(seen) != 1 || seen[0].Budget.ID != "b1" {
		t.Fatalf("observed %+v", seen)
	}
}

// TestOneAlertPerNameKindThresholdAndMonth: a threshold's alert is raised
// once a month, next month again (and once: a pass that finds it stored
// queues nothing), and a budget deleted and created again under its name
// raises none of the alerts its name already raised that month.
func TestOneAlertPerNameKindThresholdAndMonth(t *testing.T) {
	st, book := world(t)
	ctx := t.Context()
	create := func(id string) {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error {
			return tx.CreateBudget(ctx, domain.Budget{ID: id, ProjectID: "p", Name: "tiny", Amount: "0.000001", Thresholds: []int{1, 10}, CreatedAt: nov})
		}); err != nil {
			t.Fatal(err)
		}
	}
	var queued int
	c := &Checker{Store: st, Queue: func(ctx context.Context, tx store.Tx, as []domain.BudgetAlert) error {
		queued += len(as)
		return nil
	}}
	check := func(at time.Time) {
		t.Helper()
		if err := c.Check(ctx, book, at); err != nil {
			t.Fatal(err)
		}
	}
	create("b1")
	check(nov.Add(2 * time.Hour))
	for i := 2; i <= 12; i++ { // deleted and created again, eleven times
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.DeleteBudget(ctx, fmt.Sprint("b", i-1)) }); err != nil {
			t.Fatal(err)
		}
		create(fmt.Sprint("b", i))
		check(nov.Add(time.Duration(2+i) * time.Hour))
	}
	if queued != 2 {
		t.Errorf("November: %d alerts queued, want 2 (thresholds 1 and 10, once)", queued)
	}
	dec := nov.AddDate(0, 1, 0)
	// December's usage (the meter cuts a running node's record anew).
	if err := st.Update(ctx, func(tx store.Tx) error {
		return tx.PutUsage(ctx, domain.UsageRecord{NodeID: "n2", ClusterID: "c1", ProjectID: "p", Class: domain.Standard,
			GPUType: "H100", GPUs: 8, Start: dec, End: dec.Add(time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	check(dec.Add(2 * time.Hour))
	check(dec.Add(3 * time.Hour))
	check(dec.Add(4 * time.Hour))
	if queued != 4 {
		t.Errorf("November and December: %d alerts queued, want 4", queued)
	}
	alerts, err := st.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 4 || alerts[2].Month != "2026-12" || alerts[3].Month != "2026-12" {
		t.Errorf("stored %d alerts, want 2 of November and 2 of December: %+v", len(alerts), alerts)
	}
}
