package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testRollups: a cluster month's rows come back as put (label sets
// included), by month, project, cluster and order, selected by project,
// cluster, months and kind, apart from a project's merged rows; putting
// them again replaces them.
func testRollups(t *testing.T, s store.Store) {
	ctx := t.Context()
	nov, dec := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	row := func(month time.Time, cluster, project string, kind domain.RollupKind, labels map[string]string) domain.Rollup {
		return domain.Rollup{Month: month, ProjectID: project, ClusterID: cluster, Kind: kind, Namespace: "ml", Labels: labels,
			ClusterName: "name-" + cluster, NodeID: "n1", Class: "preemptible", Region: "us-east", GPUType: "H100", GPUs: 8,
			Rate: "1.245", OnDemandRate: "2.49", Priced: true, Start: month.Add(time.Hour), End: month.Add(48 * time.Hour),
			BilledSeconds: 3600, GPUSeconds: 28800, UnpricedGPUSeconds: 0, Amount: "35856000000000000000", OnDemand: "71712000000000000000",
			Units: 7, HasLine: true}
	}
	team := map[string]string{"team": "vision", "app": "x"}
	a1, a2 := row(nov, "c1", "p1", domain.RollupWork, team), row(nov, "c1", "p1", domain.RollupIdle, nil)
	b1 := row(nov, "c2", "p2", domain.RollupWork, team)
	c1 := row(dec, "c1", "p1", domain.RollupUsage, nil)
	c1.HasLine, c1.Amount, c1.OnDemand = false, "0", "0"
	stale := row(nov, "c1", "p1", domain.RollupWork, map[string]string{"team": "old"})
	merged := row(nov, "", "p1", domain.RollupWork, team)
	cm := func(m time.Time, p, c string) domain.ClusterMonth {
		return domain.ClusterMonth{Month: m, ProjectID: p, ClusterID: c}
	}
	update(t, s, func(tx store.Tx) error { return tx.PutRollups(ctx, cm(nov, "p1", "c1"), []domain.Rollup{stale}) })
	update(t, s, func(tx store.Tx) error {
		for _, p := range []struct {
			cm   domain.ClusterMonth
			rows []domain.Rollup
		}{{cm(nov, "p1", "c1"), []domain.Rollup{a1, a2}}, {cm(nov, "p2", "c2"), []domain.Rollup{b1}}, {cm(dec, "p1", "c1"), []domain.Rollup{c1}},
			{cm(nov, "p1", ""), []domain.Rollup{merged}}} {
			if err := tx.PutRollups(ctx, p.cm, p.rows); err != nil {
				return err
			}
		}
		return nil
	})
	scan := func(f store.RollupFilter) []domain.Rollup {
		var got []domain.Rollup
		if err := s.ScanRollups(ctx, f, func(r domain.Rollup) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, c := range []struct {
		name string
		f    store.RollupFilter
		want []domain.Rollup
	}{
		{"all", store.RollupFilter{}, []domain.Rollup{a1, a2, b1, c1}},
		{"project", store.RollupFilter{ProjectID: "p1"}, []domain.Rollup{a1, a2, c1}},
		{"cluster", store.RollupFilter{ClusterID: "c2"}, []domain.Rollup{b1}},
		{"months", store.RollupFilter{From: dec, To: dec.AddDate(0, 1, 0)}, []domain.Rollup{c1}},
		{"before", store.RollupFilter{To: dec}, []domain.Rollup{a1, a2, b1}},
		{"kinds", store.RollupFilter{Kinds: []domain.RollupKind{domain.RollupIdle, domain.RollupUsage}}, []domain.Rollup{a2, c1}},
		{"merged", store.RollupFilter{Merged: true}, []domain.Rollup{merged}},
		{"merged of p2", store.RollupFilter{Merged: true, ProjectID: "p2"}, nil},
	} {
		if got := scan(c.f); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got\n%+v\nwant\n%+v", c.name, got, c.want)
		}
	}
	// The clusters' work rows of November go, a slice at a time; their
	// usage and idle rows and the merged rows stay.
	for _, want := range []int{1, 1, 0} {
		var n int
		update(t, s, func(tx store.Tx) (err error) { n, err = tx.PruneClusterWork(ctx, dec, 1); return err })
		if n != want {
			t.Errorf("pruned %d cluster work rows, want %d", n, want)
		}
	}
	if got := scan(store.RollupFilter{}); !reflect.DeepEqual(got, []domain.Rollup{a2, c1}) {
		t.Errorf("after pruning the clusters' work: %+v", got)
	}
	if got := scan(store.RollupFilter{Merged: true}); len(got) != 1 {
		t.Errorf("after pruning the clusters' work, merged rows %+v", got)
	}
	// Label sets no row names go; the merged row keeps its own.
	update(t, s, func(tx store.Tx) error { _, err := tx.PruneLabelSets(ctx, 100); return err })
	if got := scan(store.RollupFilter{Merged: true}); len(got) != 1 || !reflect.DeepEqual(got[0].Labels, team) {
		t.Errorf("after pruning label sets, merged rows %+v", got)
	}
}

// testRollupLateRows: once months are marked rolled, a row written late
// (a record or span ending, or a span starting, before the mark; a price
// of the past) marks its cluster's months dirty from its time on, and a
// row reaching past the mark marks none; pruning takes only final
// records and ended spans before both the cut and the mark, a slice at a
// time.
func testRollupLateRows(t *testing.T, s store.Store) {
	ctx := t.Context()
	oct, nov, dec := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	usage := func(node, cluster string, start, end time.Time, final bool) domain.UsageRecord {
		return domain.UsageRecord{NodeID: node, ClusterID: cluster, ProjectID: "p1", GPUs: 8, Start: start, End: end, Final: final}
	}
	// Before any mark nothing is late.
	update(t, s, func(tx store.Tx) error {
		return tx.PutUsages(ctx, []domain.UsageRecord{usage("n0", "c0", oct, oct.Add(time.Hour), true), usage("n1", "c1", oct, nov.Add(time.Hour), false)})
	})
	state := func() domain.RollupState {
		st, err := s.RollupState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := state(); !st.RolledUntil.IsZero() || len(st.Dirty) != 0 {
		t.Fatalf("fresh state %+v", st)
	}
	update(t, s, func(tx store.Tx) error {
		if err := tx.MarkDirty(ctx, []domain.ClusterMonth{{Month: oct.Add(time.Hour), ProjectID: "p1", ClusterID: "c9"}}); err != nil {
			return err
		}
		return tx.MarkRolled(ctx, dec)
	})
	if st := state(); !reflect.DeepEqual(st.Dirty, []domain.ClusterMonth{{Month: oct, ProjectID: "p1", ClusterID: "c9"}}) {
		t.Fatalf("marked dirty %+v, want c9's October", st.Dirty)
	}
	update(t, s, func(tx store.Tx) error {
		return tx.PutRollups(ctx, domain.ClusterMonth{Month: oct, ProjectID: "p1", ClusterID: "c9"}, nil)
	})
	update(t, s, func(tx store.Tx) error { return tx.MarkRolled(ctx, nov) }) // an older mark changes nothing
	if st := state(); !st.RolledUntil.Equal(dec) {
		t.Fatalf("mark %v, want %v", st.RolledUntil, dec)
	}
	// A running cut reaching past the mark, and a span starting after it,
	// touch no rolled month.
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutUsage(ctx, usage("n1", "c1", oct, dec.Add(time.Hour), false)); err != nil {
			return err
		}
		return tx.AddWorkSpans(ctx, []domain.WorkSpan{span("n1", "c1", dec.Add(time.Minute), time.Time{})})
	})
	if st := state(); len(st.Dirty) != 0 {
		t.Fatalf("rows past the mark marked %v", st.Dirty)
	}
	// A final cut of October, a span started in November, a span ended in
	// November (the end of n1's span as c4's, which marks c4: what was
	// asked is what marks).
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutUsages(ctx, []domain.UsageRecord{usage("n2", "c2", oct.Add(time.Hour), oct.Add(2*time.Hour), true)}); err != nil {
			return err
		}
		return tx.AddWorkSpans(ctx, []domain.WorkSpan{span("n3", "c3", nov.Add(time.Hour), time.Time{})})
	})
	update(t, s, func(tx store.Tx) error {
		return tx.EndWorkSpans(ctx, []domain.WorkSpan{span("n1", "c4", time.Time{}, nov.Add(time.Minute))})
	})
	want := []domain.ClusterMonth{{Month: oct, ProjectID: "p1", ClusterID: "c2"}, {Month: nov, ProjectID: "p1", ClusterID: "c2"},
		{Month: nov, ProjectID: "p1", ClusterID: "c3"}, {Month: nov, ProjectID: "p1", ClusterID: "c4"}}
	if st := state(); !reflect.DeepEqual(st.Dirty, want) {
		t.Fatalf("dirty %+v, want %+v", st.Dirty, want)
	}
	// Rolling a month again clears its mark; a price of the past marks
	// every rolled cluster month from its start.
	update(t, s, func(tx store.Tx) error {
		for _, cm := range want {
			if err := tx.PutRollups(ctx, cm, []domain.Rollup{{Kind: domain.RollupIdle, Start: cm.Month, End: cm.Month}}); err != nil {
				return err
			}
		}
		return nil
	})
	if st := state(); len(st.Dirty) != 0 {
		t.Fatalf("dirty after rolling again: %+v", st.Dirty)
	}
	update(t, s, func(tx store.Tx) error {
		return tx.CreatePrice(ctx, domain.Price{ID: "late", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2", EffectiveFrom: nov.Add(time.Hour)})
	})
	if st := state(); !reflect.DeepEqual(st.Dirty, want[1:]) {
		t.Fatalf("dirty after a past price %+v, want %+v", st.Dirty, want[1:])
	}
	testPruneRolled(t, s, oct, nov, dec)
}

// testPruneRolled prunes what testRollupLateRows wrote.
func testPruneRolled(t *testing.T, s store.Store, oct, nov, dec time.Time) {
	ctx := t.Context()
	prune := func(before time.Time, limit int) (usage, spans int) {
		update(t, s, func(tx store.Tx) error {
			var err error
			if usage, err = tx.PruneUsage(ctx, before, limit); err != nil {
				return err
			}
			spans, err = tx.PruneWorkSpans(ctx, before, limit)
			return err
		})
		return
	}
	// Final October records: n0 and n2 (n1 runs); a span ended in
	// October.
	update(t, s, func(tx store.Tx) error {
		return tx.AddWorkSpans(ctx, []domain.WorkSpan{span("n5", "c5", oct, oct.Add(time.Hour))})
	})
	if u, w := prune(oct.Add(90*time.Minute), 10); u != 1 || w != 1 {
		t.Errorf("pruned %d records and %d spans before October's 90th minute, want 1 and 1", u, w)
	}
	if u, _ := prune(dec.AddDate(1, 0, 0), 10); u != 1 {
		t.Errorf("pruned %d records before the mark, want the other final one", u)
	}
	got := 0
	if err := s.ScanUsage(ctx, store.UsageFilter{}, func(domain.UsageRecord) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != 1 {
		t.Errorf("%d usage records left, want the running one", got)
	}
}

// span is a work span of node in cluster of p1, keyed by its node.
func span(node, cluster string, start, end time.Time) domain.WorkSpan {
	return domain.WorkSpan{ProjectID: "p1", ClusterID: cluster, NodeID: node, End: end, Running: domain.Running{Key: node, Start: start}}
}
