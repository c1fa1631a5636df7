package allocator

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	rg  = "us-central-2"
	gpu = "RTX_6000_PCI"
)

func TestStandardFromFreeOnDemandMachines(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 3)
	pl, sf := w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 16})
	if sf != nil {
		t.Fatalf("unexpected shortfall %v", sf)
	}
	if len(pl.Provisions) != 2 || pl.Provisions[0].Class != domain.Standard || pl.Provisions[0].Pending {
		t.Fatalf("want 2 standard provisions, got %+v", pl.Provisions)
	}
	if st := w.state(pl, "a").Status; st != domain.StatusWaiting {
		t.Fatalf("status %s, want WaitingForDataPlaneNodes", st)
	}
	w.finishProvisioning()
	if st := w.state(w.plan(), "a").Status; st != domain.StatusReady {
		t.Fatalf("status %s, want Ready", st)
	}
}

func TestStandardShortfallChangesNothing(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	w.addReservation("r1", "acme", rg, gpu, 4)
	_, sf := w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 24})
	if sf == nil {
		t.Fatal("want a shortfall: only 2 on-demand machines (reserved ones are not sold on demand)")
	}
	if sf.WantGPUs != 24 || sf.CanGPUs != 16 || sf.Region != rg || sf.GPUType != gpu {
		t.Fatalf("shortfall %+v", sf)
	}
	if got := sf.Error(); got != "asked for 24 RTX_6000_PCI GPUs in us-central-2; 16 can be had" {
		t.Fatalf("message %q", got)
	}
	if len(w.s.Clusters) != 0 || len(w.s.Nodes) != 0 {
		t.Fatal("a refused request must change nothing")
	}
}

func TestUnknownPartitionIsAShortfall(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	_, sf := w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: "eu-west-1", GPUType: gpu, NumGPUs: 8})
	if sf == nil || sf.CanGPUs != 0 {
		t.Fatalf("want shortfall with 0 available, got %+v", sf)
	}
}

func TestPreemptibleUsesIdleReservations(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	w.addReservation("r1", "acme", rg, gpu, 3)
	_, sf := w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 32})
	if sf != nil {
		t.Fatal(sf)
	}
	w.settle()
	pre := w.nodesOf("a", domain.Preemptible, domain.NodeReady)
	if len(pre) != 4 {
		t.Fatalf("want 4 preemptible nodes (1 on-demand + 3 reserved idle), got %d", len(pre))
	}
	pl := w.plan()
	cs := w.state(pl, "a")
	if cs.AllocatedPreemptibleGPUs != 32 || cs.Unfulfilled != "" {
		t.Fatalf("state %+v", cs)
	}
}

func TestReservedStandardReclaimsPreemptibleOnReservation(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 1)
	w.addReservation("r1", "acme", rg, gpu, 2)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 16})
	w.settle()
	if n := len(w.nodesOf("a", domain.Preemptible, domain.NodeReady)); n != 2 {
		t.Fatalf("want 2 preemptible on the idle reservation, got %d", n)
	}
	w.now = w.now.Add(time.Minute)
	pl, sf := w.tryCluster(domain.Cluster{ID: "b", ProjectID: "acme", Region: rg, GPUType: gpu, NumGPUs: 16, BillingType: domain.BillingReserved})
	if sf != nil {
		t.Fatal(sf)
	}
	if len(pl.Reclaims) != 2 {
		t.Fatalf("want both preemptible nodes reclaimed, got %+v", pl.Reclaims)
	}
	for _, r := range pl.Reclaims {
		if r.Cause != domain.CausePreempted || r.ClusterID != "a" || !r.Deadline.Equal(w.now.Add(5*time.Minute)) {
			t.Fatalf("reclaim %+v", r)
		}
	}
	for _, p := range pl.Provisions {
		if p.ClusterID == "b" && !p.Pending {
			t.Fatalf("b's nodes must wait for the drains: %+v", p)
		}
	}
	if st := w.state(pl, "b").Status; st != domain.StatusWaiting {
		t.Fatalf("status %s", st)
	}
	if cs := w.state(pl, "a"); cs.Unfulfilled != domain.UnfulfilledNoCapacity || cs.AllocatedPreemptibleGPUs != 0 {
		t.Fatalf("a should be unfulfilled for lack of capacity: %+v", cs)
	}
	// Drains finish: b comes up, a's target stays unmet but kept.
	w.now = w.now.Add(time.Minute)
	w.finishDrains(func(domain.Node) bool { return true })
	w.finishProvisioning()
	pl = w.plan()
	if st := w.state(pl, "b").Status; st != domain.StatusReady {
		t.Fatalf("b status %s", st)
	}
	if w.cluster("a").DesiredPreemptibleGPUs != 16 {
		t.Fatal("target must be kept")
	}
}

func TestOnDemandNeverTakesReservedMachines(t *testing.T) {
	w := newWorld(t0)
	w.addReservation("r1", "acme", rg, gpu, 2)
	_, sf := w.tryCluster(domain.Cluster{ID: "a", ProjectID: "acme", Region: rg, GPUType: gpu, NumGPUs: 8, BillingType: domain.BillingOnDemand})
	if sf == nil {
		t.Fatal("ON_DEMAND must not draw on a reservation, even its own project's")
	}
	_, sf = w.tryCluster(domain.Cluster{ID: "b", ProjectID: "other", Region: rg, GPUType: gpu, NumGPUs: 8, BillingType: domain.BillingReserved})
	if sf == nil {
		t.Fatal("RESERVED must not draw on another project's reservation")
	}
}

func TestVictimsFurthestAboveFairShareThenYoungest(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 7)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 8})
	w.settle()
	w.now = w.now.Add(time.Second)
	w.tryCluster(domain.Cluster{ID: "b", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 32})
	w.settle()
	// 7 machines: a 1 std + 1 pre, b 1 std + 4 pre.
	if got := len(w.nodesOf("b", domain.Preemptible, domain.NodeReady)); got != 4 {
		t.Fatalf("b holds %d", got)
	}
	w.now = w.now.Add(time.Minute)
	pl, sf := w.tryCluster(domain.Cluster{ID: "c", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 16})
	if sf != nil {
		t.Fatal(sf)
	}
	if len(pl.Reclaims) != 2 {
		t.Fatalf("want 2 reclaims, got %+v", pl.Reclaims)
	}
	youngest := w.nodesOf("b", domain.Preemptible)
	for _, r := range pl.Reclaims {
		if r.ClusterID != "b" {
			t.Fatalf("victim from %s; b is furthest above its fair share", r.ClusterID)
		}
	}
	// b's nodes were created in the same round; ties fall to the higher ID.
	if pl.Reclaims[0].NodeID != youngest[len(youngest)-1].ID {
		t.Fatalf("first victim %s, want the youngest %s", pl.Reclaims[0].NodeID, youngest[len(youngest)-1].ID)
	}
}

func TestStandardNeverReclaimedForDemand(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 16})
	w.settle()
	pl, sf := w.tryCluster(domain.Cluster{ID: "b", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8})
	if sf == nil || len(pl.Reclaims) != 0 {
		t.Fatalf("standard nodes must not be taken: %+v %+v", sf, pl.Reclaims)
	}
}

func TestFairShareRebalances(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 8)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 48})
	w.settle()
	if got := len(w.nodesOf("a", domain.Preemptible, domain.NodeReady)); got != 6 {
		t.Fatalf("a holds %d, want all 6 spare", got)
	}
	w.now = w.now.Add(time.Minute)
	w.tryCluster(domain.Cluster{ID: "b", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 48})
	pl := w.plan()
	w.settle()
	a := len(w.nodesOf("a", domain.Preemptible, domain.NodeReady))
	b := len(w.nodesOf("b", domain.Preemptible, domain.NodeReady))
	if a != 3 || b != 3 {
		t.Fatalf("shares a=%d b=%d, want 3/3", a, b)
	}
	pl = w.plan()
	for _, id := range []string{"a", "b"} {
		cs := w.state(pl, id)
		if cs.Unfulfilled != domain.UnfulfilledFairShare || cs.FairShareGPUs != 24 {
			t.Fatalf("%s: %+v", id, cs)
		}
	}
}

func TestWeightedShares(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 11)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 80, Weight: 2})
	w.tryCluster(domain.Cluster{ID: "b", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 80, Weight: 1})
	w.settle()
	// 9 spare machines, weights 2:1.
	a := len(w.nodesOf("a", domain.Preemptible, domain.NodeReady))
	b := len(w.nodesOf("b", domain.Preemptible, domain.NodeReady))
	if a != 6 || b != 3 {
		t.Fatalf("a=%d b=%d, want 6/3", a, b)
	}
}

func TestLoweringTargetDrainsYoungestSurplus(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 4)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 24})
	w.settle()
	w.cluster("a").DesiredPreemptibleGPUs = 8
	pl := w.plan()
	if len(pl.Reclaims) != 2 {
		t.Fatalf("reclaims %+v", pl.Reclaims)
	}
	for _, r := range pl.Reclaims {
		if r.Cause != domain.CauseScaledDown || r.Deadline.IsZero() {
			t.Fatalf("reclaim %+v", r)
		}
	}
	if len(pl.Provisions) != 0 {
		t.Fatalf("nothing to provision, got %+v", pl.Provisions)
	}
}

func TestDeletionDrainsEverythingAndCancelsPending(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 8})
	w.settle()
	w.tryCluster(domain.Cluster{ID: "b", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8})
	// b's node is pending on a's draining preemptible machine.
	if len(w.nodesOf("b", domain.Standard, domain.NodePending)) != 1 {
		t.Fatal("b should wait for a drain")
	}
	w.cluster("b").Deleting = true
	w.cluster("a").Deleting = true
	pl := w.plan()
	var cancels, drains int
	for _, r := range pl.Reclaims {
		if r.Deadline.IsZero() {
			cancels++
		} else {
			drains++
		}
		if r.Cause != domain.CauseClusterDeleted {
			t.Fatalf("cause %s", r.Cause)
		}
	}
	if cancels != 1 || drains != 1 {
		t.Fatalf("cancels=%d drains=%d (a's standard drains, b's pending is cancelled; a's preemptible is already draining)", cancels, drains)
	}
	if w.state(pl, "a").Status != domain.StatusDeleting {
		t.Fatal("status Deleting")
	}
}

func TestOutOfServiceMachineIsVacated(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8})
	w.settle()
	n := w.nodesOf("a", domain.Standard)[0]
	for i := range w.s.Machines {
		if w.s.Machines[i].ID == n.MachineID {
			w.s.Machines[i].OutOfService = true
		}
	}
	pl := w.plan()
	if len(pl.Reclaims) != 1 || pl.Reclaims[0].Cause != domain.CauseOutOfService {
		t.Fatalf("reclaims %+v", pl.Reclaims)
	}
	if len(pl.Provisions) != 1 || pl.Provisions[0].MachineID == n.MachineID {
		t.Fatalf("replacement %+v", pl.Provisions)
	}
}

func TestCoolingDownMachinesAreNotLent(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 2)
	w.s.Machines[1].CooldownUntil = t0.Add(time.Minute)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 8})
	pl := w.plan()
	cs := w.state(pl, "a")
	if cs.Unfulfilled != domain.UnfulfilledCoolingDown || !pl.NextWake.Equal(t0.Add(time.Minute)) {
		t.Fatalf("%+v wake %v", cs, pl.NextWake)
	}
	w.now = t0.Add(time.Minute)
	if pl := w.plan(); len(pl.Provisions) != 1 || pl.Provisions[0].Class != domain.Preemptible {
		t.Fatalf("after the cooldown the machine is lent: %+v", pl.Provisions)
	}
}

func TestReplenishedAfterBurst(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 3)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 16})
	w.settle()
	w.tryCluster(domain.Cluster{ID: "burst", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 16})
	w.settle()
	if got := len(w.nodesOf("a", domain.Preemptible)); got != 0 {
		t.Fatalf("a kept %d preemptible nodes during the burst", got)
	}
	w.cluster("burst").Deleting = true
	w.settle()
	if got := len(w.nodesOf("a", domain.Preemptible, domain.NodeReady)); got != 2 {
		t.Fatalf("a has %d after the burst, want 2", got)
	}
}

func TestPlanIsDeterministic(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 5)
	w.addReservation("r", "acme", rg, gpu, 5)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 40})
	w.tryCluster(domain.Cluster{ID: "b", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 40})
	a, b := w.plan(), w.plan()
	if len(a.Provisions) != len(b.Provisions) {
		t.Fatal("plans differ")
	}
	for i := range a.Provisions {
		if a.Provisions[i] != b.Provisions[i] {
			t.Fatalf("plans differ at %d", i)
		}
	}
}

func TestAvailable(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 4)
	w.addReservation("r1", "acme", rg, gpu, 3)
	w.addMachines("eu", gpu, "", 1)
	w.s.Machines[len(w.s.Machines)-1].OutOfService = true
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 16, DesiredPreemptibleGPUs: 16})
	w.settle()
	av := Available(w.s, w.now, Config{})
	if len(av) != 2 {
		t.Fatalf("partitions %+v", av)
	}
	// 7 machines: 2 standard (on-demand), 2 preemptible (reserved idle
	// ones are lent first), 3 free.
	want := Availability{Region: rg, GPUType: gpu, Total: 56, OnDemand: 16, Preemptible: 40, Free: 24,
		Reserved: 24, InUseStandard: 16, InUsePreemptible: 16}
	if av[0] != want {
		t.Fatalf("got  %+v\nwant %+v", av[0], want)
	}
	if av[1].OutOfService != 8 || av[1].OnDemand != 0 || av[1].Preemptible != 0 {
		t.Fatalf("out of service partition %+v", av[1])
	}
}

// TestQueueRequestsRaiseTheTarget: a cluster whose queue asks for more
// than the tenant's own target is filled to what the queue asks, within
// the tenant's maximum, shares spare capacity with other clusters by the
// same fair sharing, and falls back to its own target (a floor) when the
// requests are gone.
func TestQueueRequestsRaiseTheTarget(t *testing.T) {
	w := newWorld(t0)
	w.addMachines(rg, gpu, "", 8)
	w.tryCluster(domain.Cluster{ID: "a", ProjectID: "p", Region: rg, GPUType: gpu, NumGPUs: 8, DesiredPreemptibleGPUs: 8,
		MaxPreemptibleGPUs: 32, RequestedPreemptibleGPUs: 48})
	w.settle()
	if got := len(w.nodesOf("a", domain.Preemptible, domain.NodeReady)); got != 4 {
		t.Fatalf("a holds %d preemptible nodes, want 4 (requests of 48 GPUs capped at the maximum of 32)", got)
	}
	if cs := w.state(w.plan(), "a"); cs.AllocatedPreemptibleGPUs != 32 || cs.Unfulfilled != "" {
		t.Fatalf("state %+v, want 32 allocated and the target met", cs)
	}

	w.now = w.now.Add(time.Minute)
	w.tryCluster(domain.Cluster{ID: "b", ProjectID: "q", Region: rg, GPUType: gpu, NumGPUs: 8, MaxPreemptibleGPUs: 48, RequestedPreemptibleGPUs: 48})
	w.settle()
	a := len(w.nodesOf("a", domain.Preemptible, domain.NodeReady))
	b := len(w.nodesOf("b", domain.Preemptible, domain.NodeReady))
	if a != 3 || b != 3 {
		t.Fatalf("shares a=%d b=%d, want 3/3: requests share spare capacity like targets", a, b)
	}

	w.cluster("a").RequestedPreemptibleGPUs = 0
	w.settle()
	if got := len(w.nodesOf("a", domain.Preemptible, domain.NodeReady)); got != 1 {
		t.Fatalf("a holds %d preemptible nodes once its requests are gone, want 1 (its own target of 8 GPUs)", got)
	}
	if got := len(w.nodesOf("b", domain.Preemptible, domain.NodeReady)); got != 5 {
		t.Fatalf("b holds %d preemptible nodes, want the 5 a gave back", got)
	}
}
