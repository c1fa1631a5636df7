package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestPoolSignals: the planner's price of a pool is the book's on-demand
// rate less the discount at the time asked, a price to come wakes the
// loop at its time, and a pool's reclaims are its preempted nodes per
// preemptible node-hour over the last 7 days (asked for only by the
// strategies that use them).
func TestPoolSignals(t *testing.T) {
	h := newHarness(t, nil, 2)
	change := t0.Add(time.Hour)
	h.update(func(tx store.Tx) error {
		for i, p := range []domain.Price{
			{Kind: domain.PriceOnDemand, GPUType: gpu, Value: "2.00", EffectiveFrom: t0.Add(-time.Hour)},
			{Kind: domain.PriceOnDemand, GPUType: gpu, Value: "3.00", EffectiveFrom: change},
			{Kind: domain.PricePreemptibleDiscount, Value: "40", EffectiveFrom: t0.Add(-time.Hour)},
		} {
			p.ID, p.CreatedAt = fmt.Sprintf("price-%d", i), t0
			if err := tx.CreatePrice(h.ctx, p); err != nil {
				return err
			}
		}
		if err := tx.CreateCluster(h.ctx, domain.Cluster{ID: "gone", Name: "gone", ProjectID: "p", Region: region, GPUType: gpu,
			Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, Weight: 1, CreatedAt: t0.Add(-48 * time.Hour)}); err != nil {
			return err
		}
		// Two nodes served 10 hours each in the last week; one was
		// preempted, one scaled down by its tenant.
		for i, cause := range []domain.DrainCause{domain.CausePreempted, domain.CauseScaledDown} {
			ready := t0.Add(-20 * time.Hour)
			n := domain.Node{ID: fmt.Sprintf("old-%d", i), ClusterID: "gone", MachineID: fmt.Sprintf("m%02d", i), GPUType: gpu,
				Class: domain.Preemptible, GPUs: 8, State: domain.NodeRemoved, CreatedAt: ready, ReadyAt: ready,
				DrainStartedAt: ready.Add(10 * time.Hour), DrainCause: cause, RemovedAt: ready.Add(10*time.Hour + time.Minute)}
			if err := tx.CreateNode(h.ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	h.c.refreshPools(h.ctx, t0)
	if got := h.c.pools.price(region, gpu, t0); got != 1_200_000 {
		t.Errorf("price before the change: %d, want 1.20 (2.00 less 40%%)", got)
	}
	if got := h.c.pools.price(region, gpu, change); got != 1_800_000 {
		t.Errorf("price from the change: %d, want 1.80", got)
	}
	if got := h.c.nextPriceChange(t0); !got.Equal(change) {
		t.Errorf("next price change %s, want %s", got, change)
	}
	if got := h.c.nextPriceChange(change); !got.IsZero() {
		t.Errorf("after the last change: %s", got)
	}
	if got := h.c.pools.reclaimRate(region, gpu); got != 0 {
		t.Errorf("reclaims before anyone asked: %v", got)
	}
	h.c.refreshPools(h.ctx, t0.Add(time.Minute))
	if got := h.c.pools.reclaimRate(region, gpu); got != 1.0/20 {
		t.Errorf("reclaims per node-hour %v, want 1 in 20 node-hours", got)
	}
}

// A pool's reclaims to come: of its four live preemptible nodes, one is
// on a machine claimed for within the day, another on one claimed for
// later; the other pool has none claimed.
func TestBookedRates(t *testing.T) {
	var ms []domain.Machine
	var ns []domain.Node
	for i := range 5 {
		m := domain.Machine{ID: fmt.Sprintf("a%d", i), Region: region, GPUType: gpu}
		switch i {
		case 0:
			m.PreemptAt = t0.Add(3 * time.Hour)
		case 1:
			m.PreemptAt = t0.Add(30 * time.Hour)
		case 4:
			m.GPUType = "H200"
		}
		ms = append(ms, m)
		ns = append(ns, domain.Node{MachineID: m.ID, Class: domain.Preemptible, State: domain.NodeReady})
	}
	got := bookedRates(ms, ns, t0)
	if want := 1.0 / (4 * 24); len(got) != 1 || got[[2]string{region, gpu}] != want {
		t.Errorf("booked rates %v, want %g for %s/%s alone", got, want, region, gpu)
	}
}
