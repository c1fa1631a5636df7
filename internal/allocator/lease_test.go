package allocator

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestLeaseHoldsAgainstFairShare: a cluster's nodes inside their minimum
// lease are not taken to give another cluster its fair share; the plan
// wakes at the lease's end and takes them then. The tenant lowering its
// own target ends its leases.
func TestLeaseHoldsAgainstFairShare(t *testing.T) {
	w := newWorld(t0)
	w.lease = 10 * time.Minute
	w.addMachines(rg, gpu, "", 4)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, DesiredPreemptibleGPUs: 32})
	w.settle()
	ready := w.now
	w.now = w.now.Add(time.Minute)
	pl, _ := w.tryCluster(domain.Cluster{ID: "b", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 0, DesiredPreemptibleGPUs: 16})
	if len(pl.Reclaims) != 0 {
		t.Fatalf("fair share took leased nodes: %+v", pl.Reclaims)
	}
	if want := ready.Add(w.lease); !pl.NextWake.Equal(want) {
		t.Fatalf("next wake %v, want the lease's end %v", pl.NextWake, want)
	}
	// b waits for the lease, not for a provisioning.
	if st := pl.Clusters[1]; st.Unfulfilled != "WaitingForLease" ||
		!strings.HasSuffix(st.Message, "16 GPUs of this cluster's fair share are lent to other clusters within their minimum lease; waiting for a lease to end at "+ready.Add(w.lease).UTC().Format(time.RFC3339)) {
		t.Fatalf("b's state %+v, want it waiting for the lease", st)
	}
	// The tenant's own scale-down is not held by its leases.
	w.cluster("a").DesiredPreemptibleGPUs = 24
	if pl := w.plan(); len(pl.Reclaims) != 1 || pl.Reclaims[0].Cause != domain.CauseScaledDown {
		t.Fatalf("a's own scale-down: %+v, want one of its leased nodes", pl.Reclaims)
	}
	w.cluster("a").DesiredPreemptibleGPUs = 32
	w.now = ready.Add(w.lease)
	pl = w.plan()
	if len(pl.Reclaims) != 2 || pl.Reclaims[0].Cause != domain.CauseFairShare {
		t.Fatalf("at the lease's end: %+v, want two nodes for b's share", pl.Reclaims)
	}
	if st := pl.Clusters[1]; st.Unfulfilled != domain.UnfulfilledProvisioning {
		t.Fatalf("b's state at the lease's end %+v, want its nodes coming", st)
	}
}

// TestLeaseYieldsOnlyWhenNothingElseServes: standard demand takes a node
// outside its lease, even of a cluster less far above its share, before
// a leased one; when it needs more than there are, it takes leased ones
// too, and says so.
func TestLeaseYieldsOnlyWhenNothingElseServes(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 4)
	w.tryCluster(domain.Cluster{ID: "old", ProjectID: "p", Region: rg, GPUType: gpu, DesiredPreemptibleGPUs: 8})
	w.settle()
	w.now = w.now.Add(time.Hour)
	w.tryCluster(domain.Cluster{ID: "new", ProjectID: "p", Region: rg, GPUType: gpu, DesiredPreemptibleGPUs: 24})
	w.settle()
	w.lease = 10 * time.Minute
	w.now = w.now.Add(time.Minute)
	old := w.nodesOf("old", domain.Preemptible, domain.NodeReady)
	fresh := w.nodesOf("new", domain.Preemptible, domain.NodeReady)
	if len(old) != 1 || len(fresh) != 3 {
		t.Fatalf("old holds %d, new %d; want 1 and 3", len(old), len(fresh))
	}
	// "new" is furthest above its share, but its nodes are leased.
	pl, sf := w.tryCluster(domain.Cluster{ID: "std", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 8})
	if sf != nil {
		t.Fatal(sf)
	}
	if got := reclaimed(pl); !slices.Equal(got, []string{old[0].ID}) {
		t.Fatalf("reclaimed %v, want the one node outside its lease %s", got, old[0].ID)
	}
	w.cluster("std").NumGPUs = 24
	pl = w.plan()
	if len(pl.Reclaims) != 2 || !strings.Contains(pl.Reclaims[0].Why, "inside its minimum lease") ||
		!strings.Contains(pl.Reclaims[1].Why, "inside its minimum lease") {
		t.Fatalf("demand for two more nodes: %+v, want two leased ones, saying so", pl.Reclaims)
	}
}
