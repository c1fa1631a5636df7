package allocator

import (
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Partitioned makes the plans Compute makes, planning only what an input
// change can affect: a partition (region × GPU type) is planned again
// once a machine, cluster or node of its own changed in a way a plan
// reads, once its last plan's wake-up came, or when a request plans with a
// change of its own; every other partition's plan would change nothing.
// So a plan after one change costs one partition's plan, whatever the size
// of the fleet. It keeps each partition's rows in the store's order, fed
// the rows each commit wrote (Apply) in commit order, and each partition's
// indexes (a Planner of its own), as Kubernetes' scheduler updates its
// snapshot only for nodes whose generation moved.
//
// A partition is settled (Settle) once a plan of it was committed, or
// changed nothing, and none of its inputs changed since that plan was
// made. It is safe for concurrent use.
type Partitioned struct {
	mu     sync.Mutex
	loaded bool
	res    []domain.Reservation
	parts  map[partKey]*part
	// order is the parts in Compute's partition order.
	order []*part
	// mPart and cPart find a machine's and a cluster's part; nPart a live
	// node's (the part of its machine). mPart and nPart are built beside
	// a Load's first plan: indexed is closed once they are (waitIndex).
	mPart   map[string]*part
	cPart   map[string]*part
	nPart   map[string]nodeRef
	indexed chan struct{}
	// deleting are the clusters being deleted; nodes counts each
	// cluster's nodes not removed.
	deleting map[string]*part
	nodes    map[string]int
}

// Changes are the rows of a plan's tables one commit wrote: machines,
// clusters and nodes written (as stored), clusters fully deleted and
// nodes removed since (gone), and all reservations when any changed.
type Changes struct {
	// By, if set, is the plan whose commit wrote them (its Token): the
	// partitions it planned are at their plan's fixed point, not changed.
	By           any
	Machines     []domain.Machine
	Clusters     []domain.Cluster
	GoneClusters []string
	Nodes        []*domain.Node
	GoneNodes    []string
	Reserved     bool
	Reservations []domain.Reservation
}

// With are rows a request plans with in place of the stored ones (a
// cluster it changes) or besides them (a cluster it creates, added last,
// as a create is the newest cluster).
type With struct {
	Clusters []domain.Cluster
	Nodes    []*domain.Node
}

// Token names the partitions a plan settles, each at the version of its
// inputs the plan was made from, with the wake-up of its plan.
type Token struct {
	parts []settling
	// planned are the partitions planned (with's new ones too).
	planned []partKey
}

// Any reports whether the token's plan planned any partition.
func (t Token) Any() bool { return len(t.planned) > 0 }

// Planned reports whether the token's plan planned the partition of
// region and GPU type.
func (t Token) Planned(region, gpuType string) bool {
	return slices.Contains(t.planned, partKey{region, gpuType})
}

type settling struct {
	p       *part
	version uint64
	wake    time.Time
	// with: planned with a request's rows (settled only once committed).
	with bool
}

// Loaded reports whether the world was loaded (Load) since the last Reset.
func (pp *Partitioned) Loaded() bool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.loaded
}

// Reset forgets the world: the next plan needs a Load.
func (pp *Partitioned) Reset() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.loaded, pp.parts, pp.order, pp.res = false, nil, nil, nil
	pp.waitIndex()
	pp.mPart, pp.cPart, pp.nPart, pp.deleting, pp.nodes = nil, nil, nil, nil, nil
}

// partOf returns the part of (region, gpuType), made dirty if new.
func (pp *Partitioned) partOf(region, gpuType string) *part {
	k := partKey{region, gpuType}
	p, ok := pp.parts[k]
	if !ok {
		p = &part{key: k, dirty: true}
		pp.parts[k] = p
		pp.order = append(pp.order, p)
	}
	return p
}

// nodePart is the part of node n: its machine's, else its cluster's.
func (pp *Partitioned) nodePart(n *domain.Node) *part {
	if p := pp.mPart[n.MachineID]; p != nil {
		return p
	}
	return pp.cPart[n.ClusterID]
}

func (pp *Partitioned) sortParts() { slices.SortStableFunc(pp.order, partBefore) }

// nodeRef is where a live node is: its part and its cluster.
type nodeRef struct {
	p       *part
	cluster string
	created time.Time
}

// touch records that an input of p changed.
func touch(p *part) {
	p.version++
	p.dirty = true
}

// Finished lists the clusters being deleted that have no node left (live
// or pending), which can be marked gone.
func (pp *Partitioned) Finished() []string {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var out []string
	for id, p := range pp.deleting {
		if pp.nodes[id] == 0 {
			out = append(out, id)
		}
		_ = p
	}
	slices.Sort(out)
	return out
}

// Booked lists the clusters booked ahead whose nodes are not planned yet
// (ActiveAt after now) and that are not being deleted, from the rows
// the partitions hold: a booking's admission and its claims read them
// without a copy of every cluster. Facets are never bookings (a booking
// is of standard capacity).
func (pp *Partitioned) Booked(now time.Time) []domain.Cluster {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var out []domain.Cluster
	for _, p := range pp.order {
		for i := range p.clusters {
			if c := &p.clusters[i]; c.ActiveAt.After(now) && !c.Deleting {
				out = append(out, *c)
			}
		}
	}
	return out
}

// Machines returns copies of the machines pred selects, from the
// partitions' rows (no copy of the others: the claims of bookings read a
// few of a fleet's machines often).
func (pp *Partitioned) Machines(pred func(*domain.Machine) bool) []domain.Machine {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var out []domain.Machine
	for _, p := range pp.order {
		for i := range p.machines {
			if pred(&p.machines[i]) {
				out = append(out, p.machines[i])
			}
		}
	}
	return out
}
