package allocator

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// world applies plans to a snapshot the way the controller applies them to
// the store, and moves nodes through their lifecycle, so tests can run many
// rounds of planning without a store or drivers.
type world struct {
	s      Snapshot
	now    time.Time
	seq    int
	window time.Duration
	// memo, when set, also plans every snapshot through one Planner fed
	// the way store.Cached feeds the controller's, and fails the test if
	// the two plans differ.
	memo *memoCheck
	// parts, when set, also plans every snapshot through a Partitioned fed
	// the rows that changed, and fails the test if its plan is not the
	// whole plan for what it planned.
	parts *partCheck
	// idle, when set, makes Config.Load: the IDs of nodes running no work.
	idle map[string]bool
	// loads, when set, is Config.Load by node ID (over idle).
	loads map[string]domain.NodeLoad
	// lease, when set, is every machine's Config.MinLease.
	lease time.Duration
}

type memoCheck struct {
	pl    Planner
	prev  Snapshot
	fatal func(format string, args ...any)
	plans int
}

// view returns s as store.Cached would hand it out after prev: a table
// equal to prev's is prev's slice, a node equal to one of prev's is the
// same pointer, and everything else is a fresh copy (the world edits its
// rows in place, which the Planner's contract rules out).
func (mc *memoCheck) view(s Snapshot) Snapshot {
	v := Snapshot{Reservations: slices.Clone(s.Reservations)}
	v.Machines = mc.prev.Machines
	if !slices.Equal(s.Machines, v.Machines) {
		v.Machines = slices.Clone(s.Machines)
	}
	v.Clusters = mc.prev.Clusters
	if !reflect.DeepEqual(s.Clusters, v.Clusters) {
		v.Clusters = slices.Clone(s.Clusters)
	}
	byID := make(map[string]*domain.Node, len(mc.prev.Nodes))
	for _, n := range mc.prev.Nodes {
		byID[n.ID] = n
	}
	v.Nodes = make([]*domain.Node, len(s.Nodes))
	for i, n := range s.Nodes {
		if o := byID[n.ID]; o != nil && *o == *n {
			v.Nodes[i] = o
			continue
		}
		c := *n
		v.Nodes[i] = &c
	}
	if slices.Equal(v.Nodes, mc.prev.Nodes) {
		v.Nodes = mc.prev.Nodes
	}
	mc.prev = v
	return v
}

func newWorld(now time.Time) *world {
	return &world{now: now, window: domain.DefaultDrainWindow}
}

func (w *world) addMachines(region, gpu, res string, n int) {
	for i := 0; i < n; i++ {
		w.seq++
		w.s.Machines = append(w.s.Machines, domain.Machine{
			ID: fmt.Sprintf("m-%04d", w.seq), Region: region, GPUType: gpu, GPUs: 8, ReservationID: res,
		})
	}
}

func (w *world) addReservation(id, project, region, gpu string, machines int) {
	w.s.Reservations = append(w.s.Reservations, domain.Reservation{ID: id, ProjectID: project, Region: region, GPUType: gpu})
	w.addMachines(region, gpu, id, machines)
}

func (w *world) cluster(id string) *domain.Cluster {
	for i := range w.s.Clusters {
		if w.s.Clusters[i].ID == id {
			return &w.s.Clusters[i]
		}
	}
	return nil
}

// plan computes a plan for the world as it is.
func (w *world) plan() Plan {
	cfg := Config{DrainWindow: w.window}
	if w.idle != nil || w.loads != nil {
		cfg.Load = func(n *domain.Node) domain.NodeLoad {
			if l, ok := w.loads[n.ID]; ok {
				return l
			}
			return domain.NodeLoad{Known: true, Idle: w.idle[n.ID]}
		}
	}
	if w.lease > 0 {
		cfg.MinLease = func(*domain.Machine) time.Duration { return w.lease }
	}
	if pc := w.parts; pc != nil {
		w.s = storeOrder(w.s)
		pc.check(w.s, w.now, cfg)
	}
	pl := Compute(w.s, w.now, cfg)
	if mc := w.memo; mc != nil {
		mc.plans++
		if got := mc.pl.Compute(mc.view(w.s), w.now, cfg); !reflect.DeepEqual(got, pl) {
			mc.fatal("Planner's plan differs from Compute's:\n got %+v\nwant %+v", got, pl)
		}
	}
	return pl
}

// tryCluster adds a cluster the way the API does: only if the plan shows
// no shortfall for it. It returns the shortfall, if any.
func (w *world) tryCluster(c domain.Cluster) (Plan, *Shortfall) {
	c.CreatedAt = w.now
	if c.Type == "" {
		c.Type = domain.ClusterKubernetes
	}
	if c.BillingType == "" {
		c.BillingType = domain.BillingOnDemand
	}
	w.s.Clusters = append(w.s.Clusters, c)
	pl := w.plan()
	for _, sf := range pl.Shortfalls {
		if sf.ClusterID == c.ID {
			w.s.Clusters = w.s.Clusters[:len(w.s.Clusters)-1]
			return pl, &sf
		}
	}
	w.apply(pl)
	return pl, nil
}

// apply writes a plan into the snapshot.
func (w *world) apply(pl Plan) {
	if w.parts != nil {
		w.parts.applied()
	}
	cidx := make(map[string]*domain.Cluster, len(w.s.Clusters))
	for i := range w.s.Clusters {
		cidx[w.s.Clusters[i].ID] = &w.s.Clusters[i]
	}
	idx := map[string]int{}
	for i := range w.s.Nodes {
		idx[w.s.Nodes[i].ID] = i
	}
	removed := map[string]bool{}
	for _, r := range pl.Reclaims {
		n := w.s.Nodes[idx[r.NodeID]]
		if n.State == domain.NodePending {
			removed[n.ID] = true
			continue
		}
		n.State = domain.NodeDraining
		n.Deadline = r.Deadline
		n.DrainStartedAt = w.now
		n.DrainCause = r.Cause
	}
	w.dropNodes(removed)
	for _, pv := range pl.Provisions {
		c := cidx[pv.ClusterID]
		c.NodeSeq++
		st := domain.NodeProvisioning
		if pv.Pending {
			st = domain.NodePending
		}
		w.s.Nodes = append(w.s.Nodes, &domain.Node{
			ID: fmt.Sprintf("%s-n%d", c.ID, c.NodeSeq), ClusterID: c.ID, MachineID: pv.MachineID,
			Name: domain.NodeName(pv.Class, c.NodeSeq), Class: pv.Class, GPUs: pv.GPUs, State: st, CreatedAt: w.now,
		})
	}
	for _, cs := range pl.Clusters {
		c := cidx[cs.ClusterID]
		c.Status = cs.Status
		c.Unfulfilled = cs.Unfulfilled
		c.UnfulfilledMessage = cs.Message
		c.UnmetSince = UnmetSince(c.UnmetSince, cs, w.now)
	}
}

func (w *world) dropNodes(removed map[string]bool) {
	kept := w.s.Nodes[:0]
	for _, n := range w.s.Nodes {
		if !removed[n.ID] {
			kept = append(kept, n)
		}
	}
	w.s.Nodes = kept
}

// finishDrains removes draining nodes for which done says so (and every one
// past its deadline), and starts pending nodes whose machine is then free.
func (w *world) finishDrains(done func(n domain.Node) bool) {
	removed := map[string]bool{}
	for _, n := range w.s.Nodes {
		if (n.State == domain.NodeDraining || n.State == domain.NodeRemoving) && (done(*n) || !w.now.Before(n.Deadline)) {
			removed[n.ID] = true
		}
	}
	w.dropNodes(removed)
	occupied := map[string]bool{}
	for _, n := range w.s.Nodes {
		if n.State.Active() {
			occupied[n.MachineID] = true
		}
	}
	for i := range w.s.Nodes {
		n := w.s.Nodes[i]
		if n.State == domain.NodePending && !occupied[n.MachineID] {
			n.State = domain.NodeProvisioning
			occupied[n.MachineID] = true
		}
	}
	// Fully deleted clusters go once they have no nodes.
	has := map[string]bool{}
	for _, n := range w.s.Nodes {
		has[n.ClusterID] = true
	}
	kept := w.s.Clusters[:0]
	for _, c := range w.s.Clusters {
		if !c.Deleting || has[c.ID] {
			kept = append(kept, c)
		}
	}
	w.s.Clusters = kept
}

// finishProvisioning makes every provisioning node ready.
func (w *world) finishProvisioning() {
	for i := range w.s.Nodes {
		if w.s.Nodes[i].State == domain.NodeProvisioning {
			w.s.Nodes[i].State = domain.NodeReady
			w.s.Nodes[i].ReadyAt = w.now
		}
	}
}

// settle runs plan/apply/finish rounds until nothing changes.
func (w *world) settle() {
	for i := 0; i < 20; i++ {
		pl := w.plan()
		w.apply(pl)
		w.now = w.now.Add(w.window)
		w.finishDrains(func(domain.Node) bool { return true })
		w.finishProvisioning()
		if len(pl.Reclaims) == 0 && len(pl.Provisions) == 0 {
			return
		}
	}
}

func (w *world) nodesOf(clusterID string, class domain.ComputeClass, states ...domain.NodeState) []domain.Node {
	var out []domain.Node
	for _, n := range w.s.Nodes {
		if n.ClusterID != clusterID || n.Class != class {
			continue
		}
		if len(states) == 0 {
			out = append(out, *n)
			continue
		}
		for _, s := range states {
			if n.State == s {
				out = append(out, *n)
			}
		}
	}
	return out
}

func (w *world) state(pl Plan, id string) ClusterState {
	for _, cs := range pl.Clusters {
		if cs.ClusterID == id {
			return cs
		}
	}
	return ClusterState{}
}
