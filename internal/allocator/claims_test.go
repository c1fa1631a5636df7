package allocator

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// A booking's claimed machines are taken for it before any other, though
// fair share and age would pick other nodes: their tenants were told.
func TestABookingTakesItsClaimedMachinesFirst(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 7)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 8})
	w.settle()
	w.now = w.now.Add(time.Second)
	w.tryCluster(domain.Cluster{ID: "b", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 32})
	w.settle()
	claimed := map[string]bool{}
	for _, n := range append(w.nodesOf("a", domain.Preemptible, domain.NodeReady), w.nodesOf("b", domain.Preemptible, domain.NodeReady)[0]) {
		claimed[n.ID] = true
		for i := range w.s.Machines {
			if w.s.Machines[i].ID == n.MachineID {
				w.s.Machines[i].ClaimedBy, w.s.Machines[i].PreemptAt = "c", w.now
			}
		}
	}
	w.now = w.now.Add(time.Minute)
	pl, sf := w.tryCluster(domain.Cluster{ID: "c", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 16})
	if sf != nil {
		t.Fatal(sf)
	}
	taken := 0
	for _, r := range pl.Reclaims {
		if r.Cause != domain.CausePreempted {
			continue // a's share given back to it from b
		}
		if taken++; !claimed[r.NodeID] {
			t.Errorf("reclaimed %s of %s, not a claimed node (%v)", r.NodeID, r.ClusterID, claimed)
		}
	}
	if taken != 2 {
		t.Errorf("%d nodes taken for the booking, want 2: %+v", taken, pl.Reclaims)
	}
}

// A booking is planned nothing before its ActiveAt: Scheduled, no node,
// and the plan wakes then.
func TestABookingIsPlannedFromItsActiveAt(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	at := w.now.Add(time.Hour)
	pl, sf := w.tryCluster(domain.Cluster{ID: "c", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 16, ActiveAt: at})
	if sf != nil || len(pl.Provisions) != 0 || !pl.NextWake.Equal(at) {
		t.Fatalf("before its start: %+v, shortfall %v", pl, sf)
	}
	if st := pl.Clusters[0]; st.Status != domain.StatusScheduled {
		t.Errorf("status %s, want Scheduled", st.Status)
	}
	w.now = at
	if pl := w.plan(); len(pl.Provisions) != 2 {
		t.Errorf("at its ActiveAt: %+v", pl.Provisions)
	}
}

// A claimed machine is not lent to a preemptible node whose minimum lease
// would outlast the claim's notice; with the notice further off, it is,
// and the plan wakes when that changes.
func TestAClaimedMachineIsNotLentPastItsNotice(t *testing.T) {
	for _, tc := range []struct {
		notice time.Duration
		lent   bool
	}{{90 * time.Minute, true}, {50 * time.Minute, false}} {
		w := newWorld(t0)
		w.lease = time.Hour
		w.addMachines(rg, gpu, "", 2)
		claimed := w.s.Machines[1].ID
		w.s.Machines[1].ClaimedBy, w.s.Machines[1].PreemptAt = "booked", w.now.Add(tc.notice)
		pl, _ := w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 8})
		lent := false
		for _, pv := range pl.Provisions {
			lent = lent || (pv.Class == domain.Preemptible && pv.MachineID == claimed)
		}
		if lent != tc.lent {
			t.Errorf("notice in %s: lent %v, want %v (%+v)", tc.notice, lent, tc.lent, pl.Provisions)
		}
		if wake := w.now.Add(tc.notice - time.Hour); tc.lent && !pl.NextWake.Equal(wake) {
			t.Errorf("notice in %s: wake %s, want %s", tc.notice, pl.NextWake, wake)
		}
	}
}
