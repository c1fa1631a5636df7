package allocator

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestFreedNodeGoesToTheLongestWaiter: two spare machines, three clusters
// wanting one node each. When a node is freed, it goes to the cluster
// whose target has been unmet longest, not to the oldest cluster, and no
// node is reclaimed just to rotate.
func TestFreedNodeGoesToTheLongestWaiter(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	for _, id := range []string{"a", "b", "c"} {
		if _, sf := w.tryCluster(domain.Cluster{ID: id, ProjectID: "p", Region: rg, GPUType: gpu, DesiredPreemptibleGPUs: 8}); sf != nil {
			t.Fatal(sf)
		}
		w.now = w.now.Add(time.Minute)
	}
	w.settle()
	w.apply(w.plan()) // the statuses of the nodes settle made ready
	holders := func() (out []string) {
		for _, id := range []string{"a", "b", "c"} {
			if len(w.nodesOf(id, domain.Preemptible, domain.NodeReady)) > 0 {
				out = append(out, id)
			}
		}
		return out
	}
	if got := holders(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("holders %v, want the two oldest", got)
	}
	if since := w.cluster("c").UnmetSince; !since.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("c is unmet since its creation, UnmetSince is %v", since)
	}
	if since := w.cluster("a").UnmetSince; !since.IsZero() {
		t.Fatalf("a is met, UnmetSince is %v", since)
	}
	// Nothing is reclaimed to rotate: c waits while the others hold.
	if pl := w.plan(); len(pl.Reclaims) != 0 || len(pl.Provisions) != 0 {
		t.Fatalf("a settled world changes: %+v %+v", pl.Reclaims, pl.Provisions)
	}

	// b's machine goes out of service: b loses its node and waits from now.
	bm := w.nodesOf("b", domain.Preemptible)[0].MachineID
	machine := func(id string) *domain.Machine {
		for i := range w.s.Machines {
			if w.s.Machines[i].ID == id {
				return &w.s.Machines[i]
			}
		}
		t.Fatalf("no machine %s", id)
		return nil
	}
	machine(bm).OutOfService = true
	w.settle()
	w.apply(w.plan())
	if !w.cluster("b").UnmetSince.After(w.cluster("c").UnmetSince) {
		t.Fatalf("b waits since %v, c since %v", w.cluster("b").UnmetSince, w.cluster("c").UnmetSince)
	}

	// Back in service: the freed machine goes to c, which waited longer,
	// though b is the older cluster.
	machine(bm).OutOfService = false
	pl := w.plan()
	if len(pl.Reclaims) != 0 {
		t.Fatalf("reclaims %+v", pl.Reclaims)
	}
	if len(pl.Provisions) != 1 || pl.Provisions[0].ClusterID != "c" {
		t.Fatalf("provisions %+v, want one for c", pl.Provisions)
	}
	w.apply(pl)
	w.finishProvisioning()
	w.apply(w.plan())
	if !w.cluster("c").UnmetSince.IsZero() {
		t.Fatalf("c is met, UnmetSince is %v", w.cluster("c").UnmetSince)
	}

	// With no record of waiting, the older cluster gets it, as before.
	w2 := newWorld(t0)
	w2.s = w.s
	w2.s.Clusters = append([]domain.Cluster(nil), w.s.Clusters...)
	for i := range w2.s.Clusters {
		w2.s.Clusters[i].UnmetSince = time.Time{}
	}
	for i := range w2.s.Nodes {
		if w2.s.Nodes[i].ClusterID == "c" {
			w2.s.Nodes = append(w2.s.Nodes[:i:i], w2.s.Nodes[i+1:]...)
			break
		}
	}
	w2.now = w.now
	if pl := w2.plan(); len(pl.Provisions) != 1 || pl.Provisions[0].ClusterID != "b" {
		t.Fatalf("provisions %+v, want one for b", pl.Provisions)
	}
}

func TestUnmetSince(t *testing.T) {
	now, before := t0.Add(time.Hour), t0
	for _, tc := range []struct {
		name string
		prev time.Time
		cs   ClusterState
		want time.Time
	}{
		{"met stays met", time.Time{}, ClusterState{}, time.Time{}},
		{"becomes unmet", time.Time{}, ClusterState{Unfulfilled: domain.UnfulfilledFairShare}, now},
		{"stays unmet from when it began", before, ClusterState{Unfulfilled: domain.UnfulfilledNoCapacity}, before},
		{"provisioning is still unmet", before, ClusterState{Unfulfilled: domain.UnfulfilledProvisioning}, before},
		{"met again", before, ClusterState{}, time.Time{}},
		{"deleting waits for nothing", before, ClusterState{Status: domain.StatusDeleting, Unfulfilled: domain.UnfulfilledFairShare}, time.Time{}},
	} {
		if got := UnmetSince(tc.prev, tc.cs, now); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
