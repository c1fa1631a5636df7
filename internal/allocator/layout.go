package allocator

import (
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Planner computes the same plans as Compute, and carries from one plan to
// the next what it worked out from the snapshot's tables that did not
// change: the machines' partitions, pools and ID index, the clusters' order
// and ID index, and which machine and cluster each unchanged node belongs
// to. On a settled million-GPU fleet that is most of a plan's cost, and a
// plan after a node step changes one node and one cluster.
//
// It relies on the contract store.Cached keeps: a table whose rows change
// comes as a new slice (a slice seen before, same start and length, holds
// the same rows), and a *domain.Node seen before is unchanged (a node
// written comes as a new pointer). A Planner is safe for concurrent use; calls are
// serialised.
type Planner struct {
	mu sync.Mutex
	m  *machineLayout
	c  *clusterLayout
	j  *nodeJoin
	// kept: the Planner is kept between plans (not Compute's one-off);
	// scratch is its plans' working memory.
	kept    bool
	scratch scratch
	// keptStates: the plan's Clusters may be the working memory's
	// (computeKept).
	keptStates bool
}

// Compute plans as the package-level Compute does.
func (pl *Planner) Compute(s Snapshot, now time.Time, cfg Config) Plan {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.kept = true
	return compute(s, now, cfg, pl)
}

// computeKept is Compute for a plan whose Clusters the caller reads before
// the next plan (Partitioned, which keeps only the states that change):
// they are the planner's working memory.
func (pl *Planner) computeKept(s Snapshot, now time.Time, cfg Config) Plan {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.kept, pl.keptStates = true, true
	defer func() { pl.keptStates = false }()
	return compute(s, now, cfg, pl)
}

// layouts returns the machine and cluster layouts and the node join for s,
// reusing the previous ones where their tables are the same slices.
func (pl *Planner) layouts(s *Snapshot) (*machineLayout, *clusterLayout, *nodeJoin) {
	if pl.m == nil || !same(pl.m.of, s.Machines) {
		pl.m = newMachineLayout(s.Machines)
	}
	if pl.c == nil || pl.c.m != pl.m || !same(pl.c.of, s.Clusters) {
		pl.c = newClusterLayout(s.Clusters, pl.m)
	}
	switch {
	case pl.j != nil && pl.j.m == pl.m && same(pl.j.of, s.Nodes) && pl.j.c == nil:
		// The clusters moved in place, the nodes did not.
		if pl.j.cOK {
			pl.j.c = pl.c
		} else {
			pl.j.rejoinClusters(pl.c)
		}
	case pl.j == nil || pl.j.m != pl.m || pl.j.c != pl.c || !same(pl.j.of, s.Nodes):
		pl.j = newNodeJoin(s.Nodes, pl.m, pl.c, pl.j)
	}
	return pl.m, pl.c, pl.j
}

// same reports whether a and b are the same slice (store.Same).
func same[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// partitioner numbers partitions in the order they are first met; runs of
// one partition are answered without hashing.
type partitioner struct {
	parts  map[partKey]int32
	base   map[partKey]int32 // looked up first (the machines'), never written
	last   partKey
	lastID int32
}

func (pk *partitioner) of(region, gpu string) int32 {
	k := partKey{region, gpu}
	if pk.lastID >= 0 && k == pk.last {
		return pk.lastID
	}
	id, ok := pk.base[k]
	if !ok {
		if id, ok = pk.parts[k]; !ok {
			id = int32(len(pk.base) + len(pk.parts))
			pk.parts[k] = id
		}
	}
	pk.last, pk.lastID = k, id
	return id
}

// machineLayout is what a plan works out from the machines alone.
type machineLayout struct {
	of    []domain.Machine
	parts map[partKey]int32
	mPart []int32
	idx   *idIndex
	// partMachines groups each partition's machines by pool (on-demand
	// first, then each reservation; snapshot order within a pool).
	partMachines [][]int32
	partGPM      []int
	pools        []poolSpan
	// oos says which machines are out of service, oosIdx lists them: the
	// plan's passes ask for every machine, and reading the flag from each
	// machine's record costs a cache miss per machine at 1M GPUs.
	oos    []bool
	oosIdx []int32
}

type poolSpan struct {
	key poolKey
	ms  []int32
}

func newMachineLayout(ms []domain.Machine) *machineLayout {
	l := &machineLayout{of: ms, mPart: make([]int32, len(ms)), oos: make([]bool, len(ms))}
	pk := partitioner{parts: make(map[partKey]int32, 16), lastID: -1}
	for i := range ms {
		l.mPart[i] = pk.of(ms[i].Region, ms[i].GPUType)
		if ms[i].OutOfService {
			l.oos[i] = true
			l.oosIdx = append(l.oosIdx, int32(i))
		}
	}
	l.parts = pk.parts
	// The ID index is built beside the pools: they share nothing.
	defer beside(len(ms), func() { l.idx = newIDIndex(len(ms), func(i int) string { return ms[i].ID }) })()

	np := len(l.parts)
	l.partMachines, l.partGPM = group(l.mPart, np), make([]int, np)
	for part, group := range l.partMachines {
		l.partGPM[part] = ms[group[len(group)-1]].GPUs
		slices.SortStableFunc(group, func(a, b int32) int {
			return cmpString(ms[a].ReservationID, ms[b].ReservationID)
		})
		for i := 0; i < len(group); {
			res := ms[group[i]].ReservationID
			j := i
			for j < len(group) && ms[group[j]].ReservationID == res {
				j++
			}
			l.pools = append(l.pools, poolSpan{poolKey{int32(part), res}, group[i:j]})
			i = j
		}
	}
	return l
}

// group returns, for each of np partitions, the positions whose partition
// it is, in order, all in one backing array.
func group(partOf []int32, np int) [][]int32 {
	count := make([]int, np)
	for _, part := range partOf {
		count[part]++
	}
	flat := make([]int32, 0, len(partOf))
	out := make([][]int32, np)
	for part := range out {
		out[part] = flat[len(flat) : len(flat) : len(flat)+count[part]]
		flat = flat[:len(flat)+count[part]]
	}
	for i, part := range partOf {
		out[part] = append(out[part], int32(i))
	}
	return out
}

// clusterLayout is what a plan works out from the clusters and the
// machines' layout.
type clusterLayout struct {
	of    []domain.Cluster
	m     *machineLayout
	cPart []int32
	idx   *idIndex
	// Per partition, the machines' partitions first, then those only
	// clusters are in (no machines).
	partMachines [][]int32
	partGPM      []int
	partClusters [][]int32 // oldest first
}

func newClusterLayout(cs []domain.Cluster, m *machineLayout) *clusterLayout {
	l := &clusterLayout{of: cs, m: m, cPart: make([]int32, len(cs))}
	pk := partitioner{parts: map[partKey]int32{}, base: m.parts, lastID: -1}
	for i := range cs {
		l.cPart[i] = pk.of(cs[i].Region, cs[i].GPUType)
	}
	l.idx = newIDIndex(len(cs), func(i int) string { return cs[i].ID })

	np := len(m.parts) + len(pk.parts)
	l.partMachines, l.partGPM = m.partMachines, m.partGPM
	if extra := len(pk.parts); extra > 0 {
		l.partMachines = append(slices.Clip(m.partMachines), make([][]int32, extra)...)
		l.partGPM = slices.Clip(m.partGPM)
		for range extra {
			l.partGPM = append(l.partGPM, domain.DefaultGPUsPerMachine)
		}
	}
	l.partClusters = group(l.cPart, np)
	for _, group := range l.partClusters {
		slices.SortFunc(group, func(a, b int32) int {
			ca, cb := &cs[a], &cs[b]
			if c := ca.CreatedAt.Compare(cb.CreatedAt); c != 0 {
				return c
			}
			return cmpString(ca.ID, cb.ID)
		})
	}
	return l
}

// nodeJoin is each node's machine and cluster (positions, -1 if unknown)
// and what the plan reads of its state, packed so a pass over a million
// GPUs' nodes does not load each node.
type nodeJoin struct {
	of       []*domain.Node
	m        *machineLayout
	c        *clusterLayout
	nMachine []int32
	nCluster []int32
	facts    []nodeFact
	// cOK, while c is nil (the clusters moved in place), says nCluster
	// was moved along: positions in the clusters as they are now.
	cOK bool
}

// nodeFact is a node's class, state and size.
type nodeFact struct {
	flags uint8
	gpus  int32
}

const (
	fLive uint8 = 1 << iota
	fActive
	fPending
	fReady
	fStandard
	fPreemptible
)

func factOf(n *domain.Node) nodeFact {
	f := nodeFact{gpus: int32(n.GPUs)}
	if n.State.Live() {
		f.flags |= fLive
	}
	if n.State.Active() {
		f.flags |= fActive
	}
	switch n.State {
	case domain.NodePending:
		f.flags |= fPending
	case domain.NodeReady:
		f.flags |= fReady
	}
	switch n.Class {
	case domain.Standard:
		f.flags |= fStandard
	case domain.Preemptible:
		f.flags |= fPreemptible
	}
	return f
}

func (f nodeFact) is(flag uint8) bool { return f.flags&flag != 0 }

// newNodeJoin joins nodes to m's machines and c's clusters. What prev
// joined is reused for the nodes it had: the same pointer, or the same
// node (ID, machine and cluster) read again. Nodes come in the store's
// order (creation time, then ID), so one walk over both lists pairs them;
// a node out of that order is only looked up, never joined wrongly.
func newNodeJoin(nodes []*domain.Node, m *machineLayout, c *clusterLayout, prev *nodeJoin) *nodeJoin {
	nn := len(nodes)
	ints := make([]int32, 2*nn)
	j := &nodeJoin{of: nodes, m: m, c: c, nMachine: ints[:nn:nn], nCluster: ints[nn:], facts: make([]nodeFact, nn)}

	var old []*domain.Node
	var cmap []int32 // prev's cluster positions in c, if they differ
	lookup := false  // prev's clusters moved in place: look each up
	if prev != nil && prev.m == m {
		old = prev.of
		switch {
		case prev.c == nil:
			lookup = true
		case prev.c != c:
			cmap = remap(prev.c.of, c)
		}
	}
	if old == nil {
		// Nothing to reuse (a leader's first plan): every node is looked
		// up, each independently of the others.
		parallel(nn, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				n := nodes[i]
				j.nMachine[i] = m.idx.find(n.MachineID)
				j.nCluster[i] = c.idx.find(n.ClusterID)
				j.facts[i] = factOf(n)
			}
		})
		return j
	}
	k := 0
	for i, n := range nodes {
		for k < len(old) && !sameNode(old[k], n) && nodeBefore(old[k], n) {
			k++ // old[k] is gone
		}
		if k < len(old) && sameNode(old[k], n) {
			j.nMachine[i] = prev.nMachine[k]
			ci := prev.nCluster[k]
			switch {
			case lookup:
				ci = c.idx.find(n.ClusterID)
			case cmap != nil && ci >= 0:
				ci = cmap[ci]
			}
			j.nCluster[i] = ci
			if old[k] == n {
				j.facts[i] = prev.facts[k]
			} else {
				j.facts[i] = factOf(n)
			}
			k++
			continue
		}
		j.nMachine[i] = m.idx.find(n.MachineID)
		j.nCluster[i] = c.idx.find(n.ClusterID)
		j.facts[i] = factOf(n)
	}
	return j
}

// remap returns, for each position of old clusters, the position of the
// same cluster in c (-1 if gone). Clusters mostly keep their positions.
func remap(old []domain.Cluster, c *clusterLayout) []int32 {
	out := make([]int32, len(old))
	for i := range old {
		if i < len(c.of) && c.of[i].ID == old[i].ID {
			out[i] = int32(i)
			continue
		}
		out[i] = c.idx.find(old[i].ID)
	}
	return out
}

// sameNode reports whether o and n are one node with the same machine and
// cluster.
func sameNode(o, n *domain.Node) bool {
	return o == n || (o.ID == n.ID && o.MachineID == n.MachineID && o.ClusterID == n.ClusterID)
}

// nodeBefore orders nodes as the store lists them: by creation time (a
// zero time first), then ID.
func nodeBefore(a, b *domain.Node) bool {
	if za, zb := a.CreatedAt.IsZero(), b.CreatedAt.IsZero(); za != zb {
		return za
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}
