package allocator

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestPlanInvariants drives random worlds through random operations (new
// clusters, target and size changes, deletions, machines out of service,
// drains and provisioning finishing in any order) and checks, after every
// plan, the invariants the product promises. Every plan is also made by a
// Planner that keeps its indexes from one plan to the next, and must be
// the same.
func TestPlanInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorld(t0)
		w.memo = &memoCheck{fatal: rt.Fatalf}
		w.parts = &partCheck{fatal: rt.Fatalf}
		w.lease = time.Duration(rapid.SampledFrom([]int{0, 0, 5, 30}).Draw(rt, "leaseMinutes")) * time.Minute
		regions := []string{"r1", "r2"}
		gpus := []string{"A", "B"}
		projects := []string{"p", "q", "acme"}
		for _, r := range regions {
			for _, g := range gpus {
				w.addMachines(r, g, "", rapid.IntRange(0, 6).Draw(rt, "od"))
				if n := rapid.IntRange(0, 4).Draw(rt, "res"); n > 0 {
					w.addReservation(fmt.Sprintf("res-%s-%s", r, g), rapid.SampledFrom(projects).Draw(rt, "resProject"), r, g, n)
				}
			}
		}
		nextID := 0
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			w.now = w.now.Add(time.Duration(rapid.IntRange(0, 400).Draw(rt, "dt")) * time.Second)
			switch rapid.IntRange(0, 7).Draw(rt, "op") {
			case 0, 1:
				nextID++
				c := domain.Cluster{
					ID:                     fmt.Sprintf("c%02d", nextID),
					ProjectID:              rapid.SampledFrom(projects).Draw(rt, "project"),
					Region:                 rapid.SampledFrom(regions).Draw(rt, "region"),
					GPUType:                rapid.SampledFrom(gpus).Draw(rt, "gpu"),
					NumGPUs:                8 * rapid.IntRange(1, 3).Draw(rt, "std"),
					DesiredPreemptibleGPUs: 8 * rapid.IntRange(0, 6).Draw(rt, "pre"),
					BillingType:            rapid.SampledFrom([]domain.BillingType{domain.BillingOnDemand, domain.BillingReserved}).Draw(rt, "billing"),
					Weight:                 rapid.IntRange(1, 1).Draw(rt, "weight"),
				}
				before := len(w.s.Nodes)
				pl, sf := w.tryCluster(c)
				if sf != nil {
					if len(w.s.Nodes) != before || w.cluster(c.ID) != nil {
						rt.Fatalf("refused create changed the world")
					}
					checkPlan(rt, w, pl)
				}
			case 2:
				if len(w.s.Clusters) > 0 {
					c := &w.s.Clusters[rapid.IntRange(0, len(w.s.Clusters)-1).Draw(rt, "ci")]
					c.DesiredPreemptibleGPUs = 8 * rapid.IntRange(0, 6).Draw(rt, "pre")
					// The queue's requests, within the tenant's maximum:
					// the target is the larger of the two.
					c.MaxPreemptibleGPUs = 8 * rapid.IntRange(0, 6).Draw(rt, "max")
					c.RequestedPreemptibleGPUs = 8 * rapid.IntRange(0, 8).Draw(rt, "requested")
				}
			case 3:
				if len(w.s.Clusters) > 0 {
					c := &w.s.Clusters[rapid.IntRange(0, len(w.s.Clusters)-1).Draw(rt, "ci")]
					if rapid.Bool().Draw(rt, "delete") {
						c.Deleting = true
					} else if c.NumGPUs > 8 {
						c.NumGPUs -= 8
					}
				}
			case 4:
				if len(w.s.Machines) > 0 {
					m := &w.s.Machines[rapid.IntRange(0, len(w.s.Machines)-1).Draw(rt, "mi")]
					m.OutOfService = !m.OutOfService
				}
			case 5:
				w.finishDrains(func(domain.Node) bool { return rapid.Bool().Draw(rt, "drained") })
				// A drain that ended moves its node to removing first.
				for _, n := range w.s.Nodes {
					if n.State == domain.NodeDraining && rapid.Bool().Draw(rt, "removing") {
						n.State = domain.NodeRemoving
					}
				}
			case 6:
				w.finishProvisioning()
			case 7:
				if len(w.s.Machines) > 0 {
					m := &w.s.Machines[rapid.IntRange(0, len(w.s.Machines)-1).Draw(rt, "mi")]
					m.CooldownUntil = w.now.Add(time.Minute)
				}
			}
			pl := w.plan()
			checkPlan(rt, w, pl)
			w.apply(pl)
			checkWorld(rt, w)
			// A plan applied is a fixed point: planning again at the same
			// moment changes nothing.
			if again := w.plan(); len(again.Reclaims) != 0 || len(again.Provisions) != 0 {
				rt.Fatalf("plan not stable: reclaims %+v provisions %+v", again.Reclaims, again.Provisions)
			}
		}
	})
}

func checkPlan(rt *rapid.T, w *world, pl Plan) {
	nodes := map[string]domain.Node{}
	for _, n := range w.s.Nodes {
		nodes[n.ID] = *n
	}
	seen := map[string]bool{}
	for _, r := range pl.Reclaims {
		n, ok := nodes[r.NodeID]
		if !ok || !n.State.Live() {
			rt.Fatalf("reclaim of a node that is not live: %+v", r)
		}
		if seen[r.NodeID] {
			rt.Fatalf("node reclaimed twice: %s", r.NodeID)
		}
		seen[r.NodeID] = true
		// Standard nodes are never reclaimed for someone else's demand.
		if n.Class == domain.Standard && (r.Cause == domain.CausePreempted || r.Cause == domain.CauseFairShare) {
			rt.Fatalf("standard node reclaimed: %+v", r)
		}
		// A node inside its minimum lease never goes for a fair share.
		if r.Cause == domain.CauseFairShare && w.lease > 0 && n.State == domain.NodeReady && w.now.Before(n.ReadyAt.Add(w.lease)) {
			rt.Fatalf("node %s inside its lease (ready %s, now %s) taken for a fair share", n.ID, n.ReadyAt, w.now)
		}
		// Every drain is bounded by the window.
		pending := n.State == domain.NodePending
		if !pending && !r.Deadline.Equal(w.now.Add(w.window)) {
			rt.Fatalf("deadline %v, want now+window", r.Deadline)
		}
		if pending != r.Deadline.IsZero() {
			rt.Fatalf("only pending nodes are dropped without a drain: %+v", r)
		}
	}
	clusters := map[string]domain.Cluster{}
	for _, c := range w.s.Clusters {
		clusters[c.ID] = c
	}
	for _, cs := range pl.Clusters {
		c, ok := clusters[cs.ClusterID]
		if !ok {
			continue // the cluster of a refused create
		}
		if cs.AllocatedPreemptibleGPUs > c.TargetPreemptibleGPUs() {
			rt.Fatalf("allocated %d > target %d", cs.AllocatedPreemptibleGPUs, c.TargetPreemptibleGPUs())
		}
		if (cs.AllocatedPreemptibleGPUs < c.TargetPreemptibleGPUs() && !c.Deleting) != (cs.Unfulfilled != "") {
			rt.Fatalf("unfulfilled reason %q with allocated %d target %d", cs.Unfulfilled, cs.AllocatedPreemptibleGPUs, c.TargetPreemptibleGPUs())
		}
	}
	// Fair shares of clusters with unmet targets differ by at most one node
	// within a partition (all weights are equal here).
	type part struct{ r, g string }
	lo, hi := map[part]int{}, map[part]int{}
	for _, cs := range pl.Clusters {
		c, ok := clusters[cs.ClusterID]
		if !ok || c.Deleting || cs.FairShareGPUs >= c.TargetPreemptibleGPUs() {
			continue
		}
		k := part{c.Region, c.GPUType}
		if v, ok := lo[k]; !ok || cs.FairShareGPUs < v {
			lo[k] = cs.FairShareGPUs
		}
		if cs.FairShareGPUs > hi[k] {
			hi[k] = cs.FairShareGPUs
		}
	}
	for k := range lo {
		if hi[k]-lo[k] > 8 {
			rt.Fatalf("fair shares in %v differ by %d GPUs", k, hi[k]-lo[k])
		}
	}
}

func checkWorld(rt *rapid.T, w *world) {
	machines := map[string]domain.Machine{}
	fleet := 0
	for _, m := range w.s.Machines {
		machines[m.ID] = m
		fleet += m.GPUs
	}
	res := map[string]string{}
	for _, r := range w.s.Reservations {
		res[r.ID] = r.ProjectID
	}
	active, pending := map[string]string{}, map[string]string{}
	assigned := 0
	for _, n := range w.s.Nodes {
		m, ok := machines[n.MachineID]
		if !ok {
			rt.Fatalf("node on unknown machine %s", n.MachineID)
		}
		c := w.cluster(n.ClusterID)
		if c == nil {
			rt.Fatalf("node of unknown cluster %s", n.ClusterID)
		}
		if m.Region != c.Region || m.GPUType != c.GPUType {
			rt.Fatalf("node of %s/%s cluster on %s/%s machine", c.Region, c.GPUType, m.Region, m.GPUType)
		}
		if n.Class == domain.Standard && n.State.Live() {
			if c.BillingType == domain.BillingOnDemand && m.ReservationID != "" {
				rt.Fatalf("on-demand standard node on reserved machine")
			}
			if c.BillingType == domain.BillingReserved && res[m.ReservationID] != c.ProjectID {
				rt.Fatalf("reserved standard node outside the project's reservation")
			}
		}
		if n.State.Live() && m.OutOfService {
			rt.Fatalf("live node on a machine out of service")
		}
		// A machine is in at most one cluster at a time: one active node,
		// plus at most one node waiting for it.
		table := active
		if n.State == domain.NodePending {
			table = pending
		}
		if other, dup := table[n.MachineID]; dup {
			rt.Fatalf("machine %s holds %s and %s", n.MachineID, other, n.ID)
		}
		table[n.MachineID] = n.ID
		if n.State.Live() {
			assigned += n.GPUs
		}
	}
	for mid := range pending {
		if _, ok := active[mid]; !ok {
			rt.Fatalf("pending node on machine %s with nothing to wait for", mid)
		}
	}
	if assigned > fleet {
		rt.Fatalf("assigned %d GPUs of a %d-GPU fleet", assigned, fleet)
	}
	for _, c := range w.s.Clusters {
		live := 0
		for _, n := range w.s.Nodes {
			if n.ClusterID == c.ID && n.Class == domain.Preemptible && n.State.Live() {
				live += n.GPUs
			}
		}
		if live > c.TargetPreemptibleGPUs() && !c.Deleting {
			rt.Fatalf("cluster %s has %d live preemptible GPUs, target %d", c.ID, live, c.TargetPreemptibleGPUs())
		}
	}
}
