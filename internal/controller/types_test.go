package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestATargetOverTwoTypesFillsFromTheSecond (WORK IN PROGRESS, issue 50):
// a cluster whose preemptible target may be of the region's GPU type or
// of H200 gets its 16 GPUs from H200 when every machine of its own type
// serves standard nodes; its nodes say H200, and its state counts them.
func TestATargetOverTwoTypesFillsFromTheSecond(t *testing.T) {
	h := newHarness(t, nil, 2)
	h.c.checkParts = nil // allocator.Covers plans without facets
	h.update(func(tx store.Tx) error {
		for i := range 4 {
			if err := tx.CreateMachine(h.ctx, domain.Machine{ID: fmt.Sprintf("h200-%d", i), Region: region, GPUType: "H200", GPUs: 8, CreatedAt: t0}); err != nil {
				return err
			}
		}
		return nil
	})
	h.create("std", 16, 0)
	h.advance(time.Minute)
	_, err := h.c.CreateCluster(h.ctx, domain.Cluster{ID: "multi", Name: "multi", ProjectID: "q", Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, DesiredPreemptibleGPUs: 16, PreemptibleGPUTypes: []string{gpu, "H200"}})
	if err != nil {
		t.Fatal(err)
	}
	h.advance(2 * time.Minute)
	ready := h.nodes("multi", domain.NodeReady)
	gpus := 0
	for _, n := range ready {
		if n.GPUType != "H200" || n.Class != domain.Preemptible {
			t.Errorf("node %+v", n)
		}
		gpus += n.GPUs
	}
	if gpus != 16 {
		t.Fatalf("%d preemptible GPUs ready, want 16 of H200: %+v", gpus, ready)
	}
	c, err := h.st.GetCluster(h.ctx, "multi")
	if err != nil || c.Unfulfilled != domain.UnfulfilledNone {
		t.Fatalf("cluster %+v (%v): its target is met", c, err)
	}
}
