package allocator

import (
	"slices"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestPlannerFollowsEveryTable changes each table a Planner keeps indexes
// of, in the ways the random worlds rarely do, and checks each plan
// against Compute's (world.plan fails the test if they differ).
func TestPlannerFollowsEveryTable(t *testing.T) {
	w := newWorld(t0)
	w.memo = &memoCheck{fatal: t.Fatalf}
	w.addMachines(rg, gpu, "", 6)
	for _, id := range []string{"a", "b", "c"} {
		if _, sf := w.tryCluster(domain.Cluster{ID: id, ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 8}); sf != nil {
			t.Fatalf("create %s: %v", id, sf)
		}
	}
	w.finishProvisioning()
	w.settle()

	// A cluster leaves the middle of the list while the nodes stay the
	// same slice: the later clusters' positions move.
	w.s.Clusters = slices.Delete(slices.Clone(w.s.Clusters), 1, 2)
	var kept []*domain.Node
	for _, n := range w.s.Nodes {
		if n.ClusterID != "b" {
			kept = append(kept, n)
		}
	}
	w.s.Nodes = kept
	w.plan() // the view's nodes change here, so plan once more with them unchanged
	w.s.Clusters = append(slices.Clone(w.s.Clusters[:1]), domain.Cluster{ID: "a2", ProjectID: "p", Region: rg, GPUType: gpu, CreatedAt: t0}, w.s.Clusters[1])
	w.plan()
	w.s.Clusters = slices.Delete(slices.Clone(w.s.Clusters), 1, 2)
	w.settle()

	// The fleet grows, with a partition of its own.
	w.addMachines("eu-west-1", "H100_SXM", "", 2)
	w.addMachines(rg, gpu, "", 2)
	if _, sf := w.tryCluster(domain.Cluster{ID: "d", ProjectID: "p", Region: "eu-west-1", GPUType: "H100_SXM", NumGPUs: 16}); sf != nil {
		t.Fatalf("create on new machines: %v", sf)
	}
	w.finishProvisioning()
	w.settle()
	if got := len(w.nodesOf("d", domain.Standard, domain.NodeReady)); got != 2 {
		t.Fatalf("cluster d has %d ready standard nodes on the new machines, want 2", got)
	}

	// Nodes out of the store's order are looked up, not paired wrongly.
	slices.Reverse(w.s.Nodes)
	w.plan()
	if w.memo.plans < 10 {
		t.Fatalf("only %d plans compared", w.memo.plans)
	}
}

// TestParallelJoin: a fleet large enough for a leader's first plan to
// build its indexes on several goroutines (at least two ranges of
// parallelMin nodes) gets the join a lookup of each node gives, and a
// machine index that finds every machine.
func TestParallelJoin(t *testing.T) {
	s := benchWorld(3, true).s
	if len(s.Nodes) < 2*parallelMin || len(s.Machines) < parallelMin {
		t.Fatalf("%d nodes and %d machines: too few to build in parallel", len(s.Nodes), len(s.Machines))
	}
	ml := newMachineLayout(s.Machines)
	for i := range s.Machines {
		if got := ml.idx.find(s.Machines[i].ID); got != int32(i) {
			t.Fatalf("machine %s at %d, found at %d", s.Machines[i].ID, i, got)
		}
	}
	cl := newClusterLayout(s.Clusters, ml)
	j := newNodeJoin(s.Nodes, ml, cl, nil)
	for i, n := range s.Nodes {
		if j.nMachine[i] != ml.idx.find(n.MachineID) || j.nCluster[i] != cl.idx.find(n.ClusterID) || j.facts[i] != factOf(n) {
			t.Fatalf("node %d (%s): joined to machine %d, cluster %d", i, n.ID, j.nMachine[i], j.nCluster[i])
		}
	}
}
