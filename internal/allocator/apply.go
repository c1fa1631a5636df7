package allocator

import (
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Apply takes the rows one commit wrote (in commit order: the store's
// in-memory copy calls it under its commit): each partition's tables get
// their new rows, and a partition whose plan reads something that changed
// is to be planned again. Before Load it does nothing.
func (pp *Partitioned) Apply(ch Changes) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if !pp.loaded {
		return
	}
	pp.waitIndex()
	if ch.Reserved {
		// Which project a reservation is for is every partition's input.
		pp.res = ch.Reservations
		for _, p := range pp.order {
			touch(p)
		}
	}
	b := batches{by: map[*part]*batch{}, own: ownParts(ch.By)}
	pp.applyMachines(ch.Machines, b)
	pp.applyClusters(ch.Clusters, ch.GoneClusters, b)
	pp.applyNodes(ch.Nodes, ch.GoneNodes, b)
	for p, u := range b.by {
		p.machines = upsertRows(p.machines, u.machines, nil, machineKey)
		if len(u.clusters)+len(u.goneClusters) > 0 {
			// A cluster comes or goes: the part's clusters move in place
			// (no copy of them per create), and its planner drops what it
			// built from them.
			p.clusters = p.planner.moveClusters(p.clusters, u.clusters, u.goneClusters)
		}
		if len(u.nodes)+len(u.goneNodes) > 0 {
			p.nodes = p.planner.moveNodes(p.nodes, u.nodes, u.goneNodes, p.clusters)
		}
	}
	if len(pp.order) > 1 && len(ch.Machines)+len(ch.Clusters) > 0 {
		pp.sortParts() // a new part, or a part's first row
	}
}

// batches are one Apply's rows by part, and the parts whose plan's own
// commit they are (own).
type batches struct {
	by  map[*part]*batch
	own map[*part]bool
}

// touch records a change of p's inputs, unless it is p's plan's own.
func (b batches) touch(p *part) {
	if !b.own[p] {
		touch(p)
	}
}

type batch struct {
	machines     []domain.Machine
	clusters     []domain.Cluster
	goneClusters []rowKey
	nodes        []*domain.Node
	goneNodes    []rowKey
}

func (b batches) of(p *part) *batch {
	u := b.by[p]
	if u == nil {
		u = &batch{}
		b.by[p] = u
	}
	return u
}

func (pp *Partitioned) applyMachines(ms []domain.Machine, b batches) {
	for _, m := range ms {
		p := pp.mPart[m.ID]
		if p == nil {
			p = pp.partOf(m.Region, m.GPUType)
			pp.mPart[m.ID] = p
			touch(p)
		} else if i, ok := slices.BinarySearchFunc(p.machines, m, func(r, m domain.Machine) int {
			return domain.ByCreated(r.CreatedAt, r.ID, m.CreatedAt, m.ID)
		}); ok && sameLayout(&p.machines[i], &m) {
			// What a plan's kept indexes hold of the machine is the same:
			// written in place, no copy of the part's machines (a cooldown
			// set at every standard node's removal). Nothing outside
			// pp.mu reads the part's machines.
			if !machinePlanned(&p.machines[i], &m) {
				b.touch(p)
			}
			p.machines[i] = m
			continue
		} else {
			b.touch(p)
		}
		u := b.of(p)
		u.machines = append(u.machines, m)
	}
}

// sameLayout: a and b are the same to a machine layout (layout.go): its
// partition, pool and service.
func sameLayout(a, b *domain.Machine) bool {
	return a.Region == b.Region && a.GPUType == b.GPUType && a.ReservationID == b.ReservationID &&
		a.OutOfService == b.OutOfService && a.GPUs == b.GPUs
}

func (pp *Partitioned) applyClusters(cs []domain.Cluster, gone []string, b batches) {
	for _, c := range cs {
		p := pp.cPart[c.ID]
		if p == nil {
			p = pp.partOf(c.Region, c.GPUType)
			pp.cPart[c.ID] = p
			b.touch(p)
		} else if i, ok := at(p.clusters, c.CreatedAt, c.ID, clusterKey); ok {
			// Written in place: a layout keeps nothing of a cluster that
			// a write changes (its partition and creation are its key).
			if !clusterPlanned(&p.clusters[i], &c) {
				b.touch(p)
			}
			p.clusters[i] = c
			pp.noteDeleting(c, p)
			continue
		} else {
			b.touch(p)
		}
		u := b.of(p)
		u.clusters = append(u.clusters, c)
		pp.noteDeleting(c, p)
	}
	for _, id := range gone {
		delete(pp.deleting, id)
		if p := pp.cPart[id]; p != nil {
			delete(pp.cPart, id)
			b.touch(p)
			u := b.of(p)
			u.goneClusters = append(u.goneClusters, rowKey{id: id})
		}
	}
}

func (pp *Partitioned) noteDeleting(c domain.Cluster, p *part) {
	if c.Deleting {
		pp.deleting[c.ID] = p
	}
}

func (pp *Partitioned) applyNodes(ns []*domain.Node, gone []string, b batches) {
	for _, n := range ns {
		p := pp.nPart[n.ID].p
		if p == nil {
			if p = pp.nodePart(n); p == nil {
				continue // of a cluster gone already, on a machine unknown
			}
			pp.nPart[n.ID] = nodeRef{p, n.ClusterID, n.CreatedAt}
			pp.nodes[n.ClusterID]++
			b.touch(p)
		} else if i, ok := at(p.nodes, n.CreatedAt, n.ID, nodeKey); ok && sameJoin(p.nodes[i], n) {
			// Written in place, with what the part's node join keeps of
			// it read again: no copy of the part's nodes per step.
			if !nodePlanned(p.nodes[i], n) {
				b.touch(p)
			}
			p.nodes[i] = n
			p.planner.nodeChanged(p.nodes, i)
			continue
		} else {
			b.touch(p)
		}
		u := b.of(p)
		u.nodes = append(u.nodes, n)
	}
	for _, id := range gone {
		if r, ok := pp.nPart[id]; ok {
			p := r.p
			pp.nodes[r.cluster]--
			delete(pp.nPart, id)
			b.touch(p)
			u := b.of(p)
			u.goneNodes = append(u.goneNodes, rowKey{created: r.created, known: true, id: id})
		}
	}
}

// at finds the row of id, created at created, in rows (in the store's
// order).
func at[T any](rows []T, created time.Time, id string, key func(T) (time.Time, string)) (int, bool) {
	return slices.BinarySearchFunc(rows, id, func(r T, id string) int {
		t, rid := key(r)
		return domain.ByCreated(t, rid, created, id)
	})
}

// sameJoin: a and b are the same to a node join's indexes (layout.go):
// the machine and cluster it joins.
func sameJoin(a, b *domain.Node) bool {
	return a.MachineID == b.MachineID && a.ClusterID == b.ClusterID
}

// ownParts are the partitions the plan by (a *Token) planned: its own
// commit's writes are no change to them (see Committed).
func ownParts(by any) map[*part]bool {
	t, ok := by.(*Token)
	if !ok {
		return nil
	}
	own := make(map[*part]bool, len(t.parts))
	for _, s := range t.parts {
		own[s.p] = true
	}
	return own
}
