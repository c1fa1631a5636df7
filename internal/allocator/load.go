package allocator

import (
	"github.com/sparecap/sparecap/internal/domain"
)

// Load takes the world of s (a store's snapshot: every table in the
// store's order); every partition is to be planned. A new leader's first
// plan waits on it: the rows are split into their parts in one pass each
// (each part's tables sized once), and the ID indexes that only Apply
// reads are built on a goroutine of their own, beside that plan.
func (pp *Partitioned) Load(s Snapshot) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.waitIndex()
	pp.loaded, pp.res = true, s.Reservations
	pp.parts, pp.order = map[partKey]*part{}, nil
	pp.cPart = make(map[string]*part, len(s.Clusters))
	pp.deleting, pp.nodes = map[string]*part{}, make(map[string]int, len(s.Clusters))
	mParts := pp.loadMachines(s.Machines)
	for i := range s.Clusters {
		c := &s.Clusters[i]
		p := pp.partOf(c.Region, c.GPUType)
		p.clusters = append(p.clusters, *c)
		pp.cPart[c.ID] = p
		if c.Deleting {
			pp.deleting[c.ID] = p
		}
	}
	nParts, orphans := pp.loadNodes(s.Nodes)
	pp.sortParts()
	idx := func() { pp.indexRows(s, mParts, nParts) }
	if orphans || len(s.Machines)+len(s.Nodes) < parallelMin {
		idx() // a node joined by its machine alone needs the machines' index
		return
	}
	pp.indexed = make(chan struct{})
	go func() {
		defer close(pp.indexed)
		idx()
	}()
}

// loadMachines puts each machine in its part, and returns the part of
// each, in s's order.
func (pp *Partitioned) loadMachines(ms []domain.Machine) []*part {
	of := make([]*part, len(ms))
	count := map[*part]int{}
	var last *part
	for i := range ms {
		if last == nil || last.key.region != ms[i].Region || last.key.gpuType != ms[i].GPUType {
			last = pp.partOf(ms[i].Region, ms[i].GPUType)
		}
		of[i] = last
		count[last]++
	}
	for p, n := range count {
		p.machines = make([]domain.Machine, 0, n)
	}
	for i := range ms {
		of[i].machines = append(of[i].machines, ms[i])
	}
	return of
}

// loadNodes puts each node in its part, its cluster's (the part of the
// machine it is on, in any world the allocator made), and returns the
// part of each; if any node's cluster is not known, it places none and
// says so (indexRows places them).
func (pp *Partitioned) loadNodes(ns []*domain.Node) (of []*part, orphans bool) {
	of = make([]*part, len(ns))
	count := map[*part]int{}
	for i, n := range ns {
		if of[i] = pp.cPart[n.ClusterID]; of[i] == nil {
			orphans = true
			continue
		}
		count[of[i]]++
		pp.nodes[n.ClusterID]++
	}
	if orphans {
		clear(pp.nodes)
		return nil, true // every node placed with the machines' index
	}
	for p, n := range count {
		p.nodes = make([]*domain.Node, 0, n)
	}
	for i, n := range ns {
		of[i].nodes = append(of[i].nodes, n)
	}
	return of, false
}

// indexRows builds the machines' and live nodes' indexes of s, whose rows
// are in the parts mParts and nParts give (nil nParts: the nodes are not
// placed yet, and are placed here, each in its machine's part, else its
// cluster's).
func (pp *Partitioned) indexRows(s Snapshot, mParts, nParts []*part) {
	mPart := make(map[string]*part, len(s.Machines))
	for i := range s.Machines {
		mPart[s.Machines[i].ID] = mParts[i]
	}
	nPart := make(map[string]nodeRef, len(s.Nodes))
	for i, n := range s.Nodes {
		var p *part
		if nParts != nil {
			p = nParts[i]
		} else {
			if p = mPart[n.MachineID]; p == nil {
				if p = pp.cPart[n.ClusterID]; p == nil {
					continue // of no known machine or cluster
				}
			}
			p.nodes = append(p.nodes, n)
			pp.nodes[n.ClusterID]++
		}
		nPart[n.ID] = nodeRef{p, n.ClusterID, n.CreatedAt}
	}
	pp.mPart, pp.nPart = mPart, nPart
}

// waitIndex waits for the indexes a Load builds beside its first plan.
func (pp *Partitioned) waitIndex() {
	if pp.indexed != nil {
		<-pp.indexed
		pp.indexed = nil
	}
}
