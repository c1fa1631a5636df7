package allocator

import (
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestFacetedFillsFromTheSecondTypeWhenTheFirstIsFull: a target of 16
// GPUs over H100 then H200, with every H100 machine serving standard
// nodes: the first plan finds no H100 to lend, the spread moves the
// target to H200, and the next plan provisions it there, for the cluster
// itself.
func TestFacetedFillsFromTheSecondTypeWhenTheFirstIsFull(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var s Snapshot
	for i := range 2 {
		s.Machines = append(s.Machines, domain.Machine{ID: fmt.Sprintf("h100-%d", i), Region: "r", GPUType: "H100", GPUs: 8, CreatedAt: now})
	}
	for i := range 4 {
		s.Machines = append(s.Machines, domain.Machine{ID: fmt.Sprintf("h200-%d", i), Region: "r", GPUType: "H200", GPUs: 8, CreatedAt: now})
	}
	std := domain.Cluster{ID: "c-std", Region: "r", GPUType: "H100", NumGPUs: 16, BillingType: domain.BillingOnDemand, CreatedAt: now}
	multi := domain.Cluster{ID: "c-multi", Region: "r", GPUType: "H100", BillingType: domain.BillingOnDemand, CreatedAt: now.Add(time.Second),
		DesiredPreemptibleGPUs: 16, PreemptibleGPUTypes: []string{"H100", "H200"}}
	s.Clusters = []domain.Cluster{std, multi}
	for i := range 2 {
		s.Nodes = append(s.Nodes, &domain.Node{ID: fmt.Sprintf("n-%d", i), ClusterID: "c-std", MachineID: fmt.Sprintf("h100-%d", i), GPUType: "H100",
			Class: domain.Standard, GPUs: 8, State: domain.NodeReady, CreatedAt: now, ReadyAt: now})
	}
	var f Faceted
	f.Load(s)
	pl, _ := f.Plan(now, Config{}, With{})
	if len(pl.Provisions) != 0 {
		t.Fatalf("the first plan provisions %+v; no H100 is free", pl.Provisions)
	}
	pl, _ = f.Plan(now.Add(time.Second), Config{}, With{})
	types := map[string]int{}
	for _, p := range pl.Provisions {
		if p.ClusterID != "c-multi" || p.Class != domain.Preemptible {
			t.Fatalf("provision %+v", p)
		}
		types[p.GPUType] += p.GPUs
	}
	if types["H200"] != 16 || len(types) != 1 {
		t.Fatalf("provisions by type %v, want 16 H200 GPUs", types)
	}
	for _, cs := range pl.Clusters {
		if cs.ClusterID != "c-std" && cs.ClusterID != "c-multi" {
			t.Errorf("a facet's state leaked: %+v", cs)
		}
	}
}

// TestFacetedForgetsRequestsNeverStored: what a request's plan said of
// the facets of a cluster that was never stored (a create refused) is
// forgotten by the next plan of the stored world, so that refused
// creates do not grow the planner's memory.
func TestFacetedForgetsRequestsNeverStored(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := Snapshot{Machines: []domain.Machine{{ID: "m", Region: "r", GPUType: "H100", GPUs: 8, CreatedAt: now}}}
	var f Faceted
	f.Load(s)
	for i := range 50 {
		asked := domain.Cluster{ID: fmt.Sprintf("c-%d", i), Region: "r", GPUType: "H100", NumGPUs: 8, CreatedAt: now,
			DesiredPreemptibleGPUs: 8, PreemptibleGPUTypes: []string{"H100", "H200"}}
		f.Plan(now, Config{}, With{Clusters: []domain.Cluster{asked}})
	}
	if len(f.states) == 0 {
		t.Fatal("the requests' plans kept no facet state: the test tests nothing")
	}
	f.Plan(now, Config{}, With{})
	if len(f.states)+len(f.blocked)+len(f.held) != 0 {
		t.Errorf("after a plan of the stored world, kept %d states, %d blocked, %d held", len(f.states), len(f.blocked), len(f.held))
	}
}
