package allocator

import (
	"slices"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// reclaimed returns the IDs of pl's reclaims, in order.
func reclaimed(pl Plan) []string {
	var out []string
	for _, r := range pl.Reclaims {
		out = append(out, r.NodeID)
	}
	return out
}

// TestScaleDownTakesIdleNodesFirst: lowering a target gives up the
// ready nodes running no work first, even the oldest, before the
// youngest busy ones; without Idle it is the youngest.
func TestScaleDownTakesIdleNodesFirst(t *testing.T) {
	w := newWorld(t0)
	w.memo = &memoCheck{fatal: t.Fatalf}
	w.addMachines(rg, gpu, "", 4)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, DesiredPreemptibleGPUs: 32})
	w.settle()
	nodes := w.nodesOf("a", domain.Preemptible, domain.NodeReady)
	if len(nodes) != 4 {
		t.Fatalf("a holds %d nodes, want 4", len(nodes))
	}
	w.cluster("a").DesiredPreemptibleGPUs = 16

	// The same round, so the youngest is the highest ID.
	youngest := []string{nodes[3].ID, nodes[2].ID}
	if got := reclaimed(w.plan()); !slices.Equal(got, youngest) {
		t.Fatalf("no Idle: reclaimed %v, want the youngest %v", got, youngest)
	}
	w.idle = map[string]bool{nodes[0].ID: true}
	want := []string{nodes[0].ID, nodes[3].ID}
	if got := reclaimed(w.plan()); !slices.Equal(got, want) {
		t.Fatalf("node %s idle: reclaimed %v, want it first, then the youngest busy: %v", nodes[0].ID, got, want)
	}
	w.idle = map[string]bool{nodes[0].ID: true, nodes[1].ID: true}
	want = []string{nodes[1].ID, nodes[0].ID}
	if got := reclaimed(w.plan()); !slices.Equal(got, want) {
		t.Fatalf("two idle: reclaimed %v, want the idle ones, youngest first: %v", got, want)
	}
}

// TestDemandTakesIdleNodesFirst: standard demand that must take a
// preemptible node takes an idle one of the cluster furthest above its
// share before its busy ones, and so does fair-share shedding.
func TestDemandTakesIdleNodesFirst(t *testing.T) {
	w := newWorld(t0)
	w.memo = &memoCheck{fatal: t.Fatalf}
	w.addMachines(rg, gpu, "", 3)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, DesiredPreemptibleGPUs: 24})
	w.settle()
	nodes := w.nodesOf("a", domain.Preemptible, domain.NodeReady)
	w.idle = map[string]bool{nodes[0].ID: true}
	w.now = w.now.Add(time.Minute)
	pl, sf := w.tryCluster(domain.Cluster{ID: "b", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 8})
	if sf != nil {
		t.Fatal(sf)
	}
	if got := reclaimed(pl); !slices.Equal(got, []string{nodes[0].ID}) {
		t.Fatalf("standard demand reclaimed %v, want the idle %s", got, nodes[0].ID)
	}
	w.settle()

	w.now = w.now.Add(time.Minute)
	w.idle = map[string]bool{nodes[1].ID: true}
	pl, _ = w.tryCluster(domain.Cluster{ID: "c", ProjectID: "q", Region: rg, GPUType: gpu, DesiredPreemptibleGPUs: 8})
	if got := reclaimed(pl); !slices.Equal(got, []string{nodes[1].ID}) || pl.Reclaims[0].Cause != domain.CauseFairShare {
		t.Fatalf("fair share reclaimed %+v, want the idle %s", pl.Reclaims, nodes[1].ID)
	}
}
