package controller

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/store"
)

// TestArchivesRemovedNodesAfterRetention: the hourly archive moves a removed
// node out of the live table once it is metered and removed longer than the
// event retention ago; it stays readable, and an unmetered one stays put.
func TestArchivesRemovedNodesAfterRetention(t *testing.T) {
	h := newHarness(t, quickPods, 4)
	h.create("a", 8, 24)
	h.reconcile()
	h.advance(20 * time.Second)
	eight := 8
	if _, err := h.c.UpdateCluster(h.ctx, "a", Change{PreemptibleGPUs: &eight}); err != nil {
		t.Fatal(err)
	}
	h.advance(40 * time.Second)
	removed := h.nodes("a", domain.NodeRemoved)
	if len(removed) != 2 {
		t.Fatalf("%d removed nodes", len(removed))
	}
	archived := func() int {
		t.Helper()
		n := 0
		for _, r := range removed {
			err := h.st.Update(h.ctx, func(tx store.Tx) error { return tx.UpdateNode(h.ctx, r) })
			if err != nil {
				n++
			}
		}
		return n
	}
	// Not metered yet: kept however old.
	h.clk.Step(domain.DefaultEventRetention + time.Hour)
	h.reconcile()
	if n := archived(); n != 0 {
		t.Fatalf("%d unmetered nodes archived", n)
	}
	if err := metering.New(h.st, h.clk, nil).Cut(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(archiveEvery) // the archive runs at least this often
	h.reconcile()
	if n := archived(); n != 2 {
		t.Fatalf("%d of 2 metered, long removed nodes archived", n)
	}
	if got := h.nodes("a", domain.NodeRemoved); len(got) != 2 {
		t.Fatalf("the past of the cluster lost: %d removed nodes listed", len(got))
	}
	if _, err := h.st.GetNode(h.ctx, removed[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := len(h.nodes("a", domain.NodeReady)); got != 2 {
		t.Fatalf("%d ready nodes", got)
	}
}

// TestPruneFollowsTheOldestEvent: the prune runs when the oldest event
// passes the retention (or hourly), not every minute: the next prune is
// due no later than the oldest event, which is kept until its time and
// gone within a minute after.
func TestPruneFollowsTheOldestEvent(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	h.create("a", 8, 0)
	h.advance(30 * time.Second)
	evs, err := h.st.ListEvents(h.ctx, store.EventFilter{Limit: 1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("no event to prune: %v", err)
	}
	due := evs[0].Timestamp.Add(domain.DefaultEventRetention)
	if next := h.c.nextPrune; next.After(due) || next.Before(h.clk.Now()) {
		t.Fatalf("next prune at %s, the oldest event is due at %s", next, due)
	}
	h.clk.Set(due.Add(-time.Second))
	h.reconcile()
	if got, _ := h.st.ListEvents(h.ctx, store.EventFilter{Limit: 1}); len(got) != 1 || got[0].Seq != evs[0].Seq {
		t.Fatal("the oldest event was pruned before its time")
	}
	h.clk.Set(due.Add(time.Minute))
	h.reconcile()
	if got, _ := h.st.ListEvents(h.ctx, store.EventFilter{Limit: 1}); len(got) == 1 && got[0].Seq == evs[0].Seq {
		t.Fatal("the oldest event outlived its retention by more than a minute")
	}
}
