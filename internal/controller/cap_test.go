package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestACapReleasesAtAPriceChange: a cluster capped at $1.60 a GPU-hour
// holds H200 nodes while their preemptible price is $1.50 (half of
// $3.00); the second a price of $4.00 on demand ($2.00 preemptible)
// takes effect, its nodes are drained with the normal notice, its target
// is unmet for its cap, and nothing of that type is placed again.
func TestACapReleasesAtAPriceChange(t *testing.T) {
	h := newHarness(t, nil, 2)
	h.c.checkParts = nil // allocator.Covers plans without facets
	change := t0.Add(10 * time.Minute)
	h.update(func(tx store.Tx) error {
		for i := range 4 {
			if err := tx.CreateMachine(h.ctx, domain.Machine{ID: fmt.Sprintf("h200-%d", i), Region: region, GPUType: "H200", GPUs: 8, CreatedAt: t0}); err != nil {
				return err
			}
		}
		for i, p := range []domain.Price{
			{Kind: domain.PriceOnDemand, GPUType: "H200", Value: "3.00", EffectiveFrom: t0.Add(-time.Hour)},
			{Kind: domain.PriceOnDemand, GPUType: "H200", Value: "4.00", EffectiveFrom: change},
		} {
			p.ID, p.CreatedAt = fmt.Sprintf("price-%d", i), t0
			if err := tx.CreatePrice(h.ctx, p); err != nil {
				return err
			}
		}
		return nil
	})
	_, err := h.c.CreateCluster(h.ctx, domain.Cluster{ID: "capped", Name: "capped", ProjectID: "q", Region: region, GPUType: "H200",
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, DesiredPreemptibleGPUs: 16, MaxPreemptiblePrice: "1.60"})
	if err != nil {
		t.Fatal(err)
	}
	h.advance(2 * time.Minute)
	if n := len(h.nodes("capped", domain.NodeReady)); n != 2 {
		t.Fatalf("%d nodes ready under the cap, want 2", n)
	}
	h.clk.Set(change.Add(-time.Second))
	if next := h.reconcile(); next.IsZero() || next.After(change) {
		t.Errorf("a second before a price change the loop is next due at %s, not at the change", next)
	}
	if n := len(h.nodes("capped", domain.NodeReady)); n != 2 {
		t.Fatalf("%d nodes ready a second before the change, want 2", n)
	}
	h.advance(time.Second)
	draining := h.nodes("capped", domain.NodeDraining)
	if len(draining) != 2 {
		t.Fatalf("%d nodes draining at the change, want 2", len(draining))
	}
	for _, n := range draining {
		if !n.DrainStartedAt.Equal(change) || !n.Deadline.Equal(change.Add(h.c.cfg.DrainWindow)) {
			t.Errorf("node %s: drain from %s to %s, want from %s with the normal notice", n.ID, n.DrainStartedAt, n.Deadline, change)
		}
	}
	said := false
	for _, ev := range h.events("capped") {
		said = said || strings.Contains(ev.Message, "above the cluster's cap of $1.60")
	}
	if !said {
		t.Errorf("no event says the nodes go for the cap: %+v", h.events("capped"))
	}
	h.advance(10 * time.Minute)
	if n := len(h.nodes("capped", domain.NodeReady, domain.NodeProvisioning, domain.NodePending)); n != 0 {
		t.Fatalf("%d nodes placed above the cap", n)
	}
	c, err := h.st.GetCluster(h.ctx, "capped")
	if err != nil || c.Unfulfilled != domain.UnfulfilledNoCapacity {
		t.Fatalf("cluster %+v (%v): unmet for its cap", c, err)
	}
}
