package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/store"
)

// testUsagePeriods: a node converted in place has a usage record per class
// period, keyed by node and start. The final record of an earlier period
// leaves the node on the meter's work list; only its current period's
// final record takes it off. Bulk writes key alike.
func testUsagePeriods(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	n := node("conv", "c1", "m1", domain.NodeReady, at(1))
	n.ReadyAt, n.ClassSince, n.Class = at(2), at(10), domain.Standard
	update(t, s, func(tx store.Tx) error { return tx.CreateNode(ctx, n) })
	if got, err := s.GetNode(ctx, "conv"); err != nil || !got.ClassSince.Equal(at(10)) || !got.PeriodStart().Equal(at(10)) {
		t.Fatalf("class since not kept: %v %+v", err, got)
	}
	before := usageRecord("conv", "c1", "p1", at(2), at(10), true)
	after := usageRecord("conv", "c1", "p1", at(10), at(15), false)
	after.Class = domain.Standard
	update(t, s, func(tx store.Tx) error { return tx.PutUsages(ctx, []domain.UsageRecord{before, after}) })
	got, err := s.ListUsage(ctx, store.UsageFilter{ClusterID: "c1"})
	if err != nil || !reflect.DeepEqual(got, []domain.UsageRecord{before, after}) {
		t.Fatalf("periods: %v\n%+v", err, got)
	}
	unmetered := func() []string {
		ns, err := s.ListNodes(ctx, store.NodeFilter{Unmetered: true})
		if err != nil {
			t.Fatal(err)
		}
		return nodeIDs(ns)
	}
	if got := unmetered(); !reflect.DeepEqual(got, []string{"conv"}) {
		t.Fatalf("unmetered %v: the final record of an earlier period ended the node's billing", got)
	}
	// A stale cut of the earlier period (from before the conversion) never
	// reopens or lengthens it.
	stale := usageRecord("conv", "c1", "p1", at(2), at(12), false)
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, stale) })
	if got, _ := s.ListUsage(ctx, store.UsageFilter{ClusterID: "c1"}); !reflect.DeepEqual(got, []domain.UsageRecord{before, after}) {
		t.Fatalf("a stale cut changed the closed period: %+v", got)
	}
	if open, _ := s.ListUsage(ctx, store.UsageFilter{Open: true}); !reflect.DeepEqual(open, []domain.UsageRecord{after}) {
		t.Fatalf("open records %+v, want the current period's", open)
	}
	after.End, after.Final = at(20), true
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, after) })
	if got := unmetered(); len(got) != 0 {
		t.Fatalf("unmetered %v after the current period's final record", got)
	}
	// The class change is an update like any other.
	n.Class, n.ClassSince = domain.Preemptible, at(20)
	update(t, s, func(tx store.Tx) error { return tx.UpdateNode(ctx, n) })
	if got, _ := s.GetNode(ctx, "conv"); got.Class != domain.Preemptible || !got.ClassSince.Equal(at(20)) {
		t.Fatalf("converted back: %+v", got)
	}
}

// CheckUpgradedUsage checks a database from before usage periods, which
// held a running record of node "n" (start at, end at+1h, not final): the
// record is kept, the meter's next cut of it replaces it, and its final
// record ends the node's billing.
func CheckUpgradedUsage(t *testing.T, s store.Store, at time.Time) {
	t.Helper()
	ctx := t.Context()
	got, err := s.ListUsage(ctx, store.UsageFilter{})
	if err != nil || len(got) != 1 || got[0].NodeID != "n" || !got[0].Start.Equal(at) || got[0].Final {
		t.Fatalf("upgraded usage: %v %+v", err, got)
	}
	r := got[0]
	r.End, r.Final = at.Add(2*time.Hour), true
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutUsage(ctx, r) }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ListUsage(ctx, store.UsageFilter{}); len(got) != 1 || !reflect.DeepEqual(got[0], r) {
		t.Fatalf("upgraded usage after a cut: %+v, want %+v", got, r)
	}
}

// NodeUsage cuts every usage record up to now (as a usage query does) and
// returns node's, in cluster, in the order of their periods.
func NodeUsage(t testing.TB, s store.Store, clk clock.Clock, cluster, node string) []domain.UsageRecord {
	t.Helper()
	if err := metering.New(s, clk, nil).Cut(t.Context()); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListUsage(t.Context(), store.UsageFilter{ClusterID: cluster})
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.UsageRecord
	for _, r := range all {
		if r.NodeID == node {
			out = append(out, r)
		}
	}
	return out
}
