package allocator

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// partCheck plans every snapshot a world plans on through one Partitioned
// as well, fed the rows that changed since the last (as the store's copy
// feeds the controller's), and fails the test unless its plan is the whole
// plan's for the partitions it planned, and the whole plan changes
// nothing in the partitions it did not.
type partCheck struct {
	pp    Partitioned
	prev  Snapshot
	fatal func(format string, args ...any)
	plans int
	tok   *Token
}

// storeOrder is s with its tables in the store's order (creation time,
// then ID): the world appends, the store sorts. A world checked with a
// partCheck keeps its tables so (world.plan), so that the plan it applies
// is the one Partitioned made: a partition is settled only once its plan
// was committed.
func storeOrder(s Snapshot) Snapshot {
	out := Snapshot{Reservations: slices.Clone(s.Reservations), Machines: slices.Clone(s.Machines), Clusters: slices.Clone(s.Clusters)}
	for _, n := range s.Nodes {
		c := *n
		out.Nodes = append(out.Nodes, &c)
	}
	slices.SortStableFunc(out.Machines, func(a, b domain.Machine) int { return domain.ByCreated(a.CreatedAt, a.ID, b.CreatedAt, b.ID) })
	slices.SortStableFunc(out.Clusters, func(a, b domain.Cluster) int { return domain.ByCreated(a.CreatedAt, a.ID, b.CreatedAt, b.ID) })
	slices.SortStableFunc(out.Nodes, func(a, b *domain.Node) int { return domain.ByCreated(a.CreatedAt, a.ID, b.CreatedAt, b.ID) })
	return out
}

// changes are the rows of next that differ from prev's, and those gone.
func changes(prev, next Snapshot) Changes {
	var ch Changes
	if !reflect.DeepEqual(prev.Reservations, next.Reservations) {
		ch.Reserved, ch.Reservations = true, next.Reservations
	}
	pm := map[string]domain.Machine{}
	for _, m := range prev.Machines {
		pm[m.ID] = m
	}
	for _, m := range next.Machines {
		if o, ok := pm[m.ID]; !ok || o != m {
			ch.Machines = append(ch.Machines, m)
		}
	}
	pc := map[string]domain.Cluster{}
	for _, c := range prev.Clusters {
		pc[c.ID] = c
	}
	seen := map[string]bool{}
	for _, c := range next.Clusters {
		seen[c.ID] = true
		if o, ok := pc[c.ID]; !ok || !reflect.DeepEqual(o, c) {
			ch.Clusters = append(ch.Clusters, c)
		}
	}
	for id := range pc {
		if !seen[id] {
			ch.GoneClusters = append(ch.GoneClusters, id)
		}
	}
	pn := map[string]*domain.Node{}
	for _, n := range prev.Nodes {
		pn[n.ID] = n
	}
	seen = map[string]bool{}
	for _, n := range next.Nodes {
		seen[n.ID] = true
		if o, ok := pn[n.ID]; !ok || *o != *n {
			ch.Nodes = append(ch.Nodes, n)
		}
	}
	for id := range pn {
		if !seen[id] {
			ch.GoneNodes = append(ch.GoneNodes, id)
		}
	}
	return ch
}

func (pc *partCheck) check(s Snapshot, now time.Time, cfg Config) {
	sorted := storeOrder(s)
	if !pc.pp.Loaded() {
		pc.pp.Load(sorted)
	} else {
		pc.pp.Apply(changes(pc.prev, sorted))
		pc.checkKept()
	}
	pc.prev = sorted
	got, tok := pc.pp.Plan(now, cfg, With{})
	pc.plans++
	if err := Covers(sorted, tok, got, now, cfg); err != nil {
		pc.fatal("%v", err)
	}
	pc.tok = &tok
}

// applied settles what the last plan planned: the world applied it (as
// the controller settles a plan once committed; a plan dropped, a create
// refused, settles nothing).
func (pc *partCheck) applied() {
	if pc.tok != nil {
		pc.pp.Settle(*pc.tok)
		pc.tok = nil
	}
}

// settledParts is a Partitioned loaded with w's world, every partition
// planned once and settled.
func settledParts(t *testing.T, w *world) *Partitioned {
	t.Helper()
	var pp Partitioned
	pp.Load(storeOrder(w.s))
	pl, tok := pp.Plan(w.now, Config{}, With{})
	if len(pl.Reclaims)+len(pl.Provisions) != 0 {
		t.Fatalf("a settled world's first plan changes %d nodes", len(pl.Reclaims)+len(pl.Provisions))
	}
	pp.Settle(tok)
	return &pp
}

// partsOf are the partitions a plan planned, as region/GPU type.
func partsOf(tok Token) []string {
	var out []string
	for _, k := range tok.planned {
		out = append(out, k.region+"/"+k.gpuType)
	}
	return out
}

func TestPartitionedPlansOnlyWhatMoved(t *testing.T) {
	w := benchWorld(1, true)
	w.s = storeOrder(w.s)
	pp := settledParts(t, w)
	if _, tok := pp.Plan(w.now, Config{}, With{}); len(tok.planned) != 0 {
		t.Fatalf("a settled world plans %v", partsOf(tok))
	}
	// A node of one partition leaves: that partition alone is planned.
	n := w.s.Nodes[len(w.s.Nodes)/2]
	gone := *n
	gone.State = domain.NodeRemoved
	pp.Apply(Changes{GoneNodes: []string{n.ID}})
	pl, tok := pp.Plan(w.now, Config{}, With{})
	m := slices.IndexFunc(w.s.Machines, func(m domain.Machine) bool { return m.ID == n.MachineID })
	want := w.s.Machines[m].Region + "/" + w.s.Machines[m].GPUType
	if got := partsOf(tok); !slices.Equal(got, []string{want}) {
		t.Fatalf("planned %v after a node of %s left", got, want)
	}
	if len(pl.Provisions) == 0 {
		t.Fatal("the freed machine is not given to anyone")
	}
	// Once that plan is committed (its writes applied) and settled, a
	// write that changes nothing a plan reads plans nothing.
	pp.Settle(tok)
	noted := *w.s.Nodes[0]
	noted.Notified, noted.LastError = true, "the cluster's API timed out"
	pp.Apply(Changes{Nodes: []*domain.Node{&noted}})
	if _, tok := pp.Plan(w.now, Config{}, With{}); len(tok.planned) != 0 {
		t.Fatalf("a node's notice recorded planned %v", partsOf(tok))
	}
}

func TestPartitionedPlansAPartitionAgainAtItsWake(t *testing.T) {
	w := newWorld(t0)
	w.addMachines("r1", "A", "", 2)
	w.addMachines("r2", "A", "", 2)
	w.s.Machines[0].CooldownUntil = t0.Add(time.Minute)
	// c1 holds the other machine; the cooling one is lent when its
	// cooldown ends.
	w.s.Clusters = append(w.s.Clusters, domain.Cluster{ID: "c1", ProjectID: "p", Region: "r1", GPUType: "A",
		DesiredPreemptibleGPUs: 16, Weight: 1, BillingType: domain.BillingOnDemand, Type: domain.ClusterKubernetes,
		Status: domain.StatusReady, Unfulfilled: domain.UnfulfilledCoolingDown})
	w.s.Nodes = append(w.s.Nodes, &domain.Node{ID: "n1", ClusterID: "c1", MachineID: w.s.Machines[1].ID, Class: domain.Preemptible,
		GPUs: 8, State: domain.NodeReady, CreatedAt: t0, ReadyAt: t0})
	var pp Partitioned
	pp.Load(storeOrder(w.s))
	pl, tok := pp.Plan(t0, Config{}, With{})
	pp.Settle(tok)
	if !pl.NextWake.Equal(t0.Add(time.Minute)) {
		t.Fatalf("wake %s, want the cooldown's end", pl.NextWake)
	}
	if pl, tok := pp.Plan(t0.Add(30*time.Second), Config{}, With{}); len(tok.planned) != 0 || !pl.NextWake.Equal(t0.Add(time.Minute)) {
		t.Fatalf("before the wake: planned %v, wake %s", partsOf(tok), pl.NextWake)
	}
	if _, tok := pp.Plan(t0.Add(time.Minute), Config{}, With{}); !slices.Equal(partsOf(tok), []string{"r1/A"}) {
		t.Fatalf("at the wake: planned %v", partsOf(tok))
	}
}

func TestPartitionedPlansARequestWithItsRowsWithoutSettlingIt(t *testing.T) {
	w := benchWorld(1, true)
	w.s = storeOrder(w.s)
	pp := settledParts(t, w)
	c := w.s.Clusters[0]
	c.ID, c.Name, c.CreatedAt = "c-new", "new", w.now
	c.NumGPUs, c.DesiredPreemptibleGPUs = 8, 0
	pl, tok := pp.Plan(w.now, Config{}, With{Clusters: []domain.Cluster{c}})
	if got := partsOf(tok); !slices.Equal(got, []string{c.Region + "/" + c.GPUType}) {
		t.Fatalf("a create planned %v", got)
	}
	if len(pl.Provisions) == 0 || pl.Provisions[0].ClusterID != "c-new" || !slices.ContainsFunc(pl.Clusters, func(cs ClusterState) bool { return cs.ClusterID == "c-new" }) {
		t.Fatalf("the create's cluster is not provisioned, or has no state: %+v", pl)
	}
	// Refused (its plan dropped), the partition is as settled as before,
	// and nothing of the create stays.
	pp.Settle(tok)
	if _, tok := pp.Plan(w.now, Config{}, With{}); len(tok.planned) != 0 {
		t.Fatalf("after a dropped create: planned %v", partsOf(tok))
	}
}

// TestACommittedPlanIsItsOwnFixedPoint: once a plan is committed, its own
// writes (tagged as its, Changes.By) leave the partitions it planned
// settled: nothing is planned again, and the whole plan would change
// nothing.
func TestACommittedPlanIsItsOwnFixedPoint(t *testing.T) {
	w := benchWorld(1, false) // no node yet: the first plan places thousands
	w.s = storeOrder(w.s)
	var pp Partitioned
	pp.Load(w.s)
	pl, tok := pp.Plan(w.now, Config{}, With{})
	if len(pl.Provisions) == 0 {
		t.Fatal("nothing to place")
	}
	before := w.s
	w.apply(pl)
	w.s = storeOrder(w.s)
	ch := changes(before, w.s)
	ch.By = &tok
	pp.Apply(ch)
	pp.Committed(&tok)
	again, tok := pp.Plan(w.now, Config{}, With{})
	if len(tok.planned) != 0 {
		t.Fatalf("after its commit, %v planned again", partsOf(tok))
	}
	if err := Covers(w.s, tok, again, w.now, Config{}); err != nil {
		t.Fatal(err)
	}
	// A write of another's, to a partition the plan planned, is a change.
	n := *w.s.Nodes[0]
	n.State = domain.NodeReady
	pp.Apply(Changes{Nodes: []*domain.Node{&n}})
	if _, tok := pp.Plan(w.now, Config{}, With{}); len(tok.planned) == 0 {
		t.Fatal("a node that became ready planned nothing")
	}
}

// checkKept fails unless every part's kept indexes, changed in place by
// Apply, are what building them afresh from the part's rows gives.
func (pc *partCheck) checkKept() {
	for _, p := range pc.pp.order {
		j := p.planner.j
		if j == nil || !same(j.of, p.nodes) {
			continue // built afresh at the part's next plan
		}
		c := j.c
		if c == nil {
			if !j.cOK {
				if len(j.nMachine) != len(p.nodes) || len(j.facts) != len(p.nodes) {
					pc.fatal("part %v: join of %d nodes kept for %d", p.key, len(j.facts), len(p.nodes))
				}
				continue
			}
			c = newClusterLayout(p.clusters, j.m) // the positions were moved along
		}
		fresh := newNodeJoin(p.nodes, j.m, c, nil)
		if !slices.Equal(j.nMachine, fresh.nMachine) || !slices.Equal(j.nCluster, fresh.nCluster) || !slices.Equal(j.facts, fresh.facts) {
			pc.fatal("part %v: the join kept in place differs from a fresh one", p.key)
		}
	}
}

// TestPartitionedFirstPlanIsTheWholePlan: a new leader's first plan of a
// fleet large enough to plan its partitions at once (on several
// goroutines) is the whole plan.
func TestPartitionedFirstPlanIsTheWholePlan(t *testing.T) {
	w := benchWorld(3, true)
	s := storeOrder(w.s)
	if len(s.Nodes) < 2*parallelMin {
		t.Fatalf("%d nodes: too few to plan partitions at once", len(s.Nodes))
	}
	var pp Partitioned
	pp.Load(s)
	pl, tok := pp.Plan(w.now, Config{}, With{})
	if err := Covers(s, tok, pl, w.now, Config{}); err != nil {
		t.Fatal(err)
	}
	if len(tok.planned) != 16 {
		t.Fatalf("%d partitions planned, want every one of 16", len(tok.planned))
	}
}
