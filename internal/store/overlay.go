package store

import "github.com/sparecap/sparecap/internal/domain"

// overlay is what committed Updates wrote that the copy's slices do not
// hold yet. The slices are rebuilt from it when a reader next asks for the
// copy (Cached.Snapshot, Cached.Loaded), not at every commit: rebuilding
// copies a table (62,877 node pointers at a million GPUs), and while a
// fleet comes up the commits outnumber the plans that read the copy by
// tens to one. The maps GetNode, GetMachine and GetCluster read are
// changed at every commit as before.
type overlay struct {
	nodes        map[string]*domain.Node
	goneNodes    map[string]bool
	clusters     map[string]domain.Cluster
	goneClusters map[string]bool
	machines     map[string]domain.Machine
	reservations bool
	allRes       []domain.Reservation
}

// add merges w, committed after everything o holds: a later write of a
// row replaces an earlier one, and a row gone drops what was written of it.
func (o *overlay) add(w *written) {
	if len(w.nodes)+len(w.goneNodes)+len(w.clusters)+len(w.goneClusters)+len(w.machines) == 0 && !w.reservations {
		return
	}
	if o.nodes == nil {
		*o = overlay{nodes: map[string]*domain.Node{}, goneNodes: map[string]bool{},
			clusters: map[string]domain.Cluster{}, goneClusters: map[string]bool{}, machines: map[string]domain.Machine{}}
	}
	for _, id := range w.goneNodes {
		delete(o.nodes, id)
		o.goneNodes[id] = true
	}
	for _, n := range w.nodes {
		o.nodes[n.ID] = n
	}
	for _, id := range w.goneClusters {
		delete(o.clusters, id)
		o.goneClusters[id] = true
	}
	for _, c := range w.clusters {
		o.clusters[c.ID] = c
	}
	for _, m := range w.machines {
		o.machines[m.ID] = m
	}
	if w.reservations {
		o.reservations, o.allRes = true, w.allRes
	}
}

// empty reports whether o holds nothing.
func (o *overlay) empty() bool { return o.nodes == nil }

// written returns o as one Update's writes, for written.apply: what is
// gone is removed before what was written is put, so a row written again
// after it went (never a node: removed is final) is there.
func (o *overlay) written() *written {
	w := &written{reservations: o.reservations, allRes: o.allRes}
	for id := range o.goneNodes {
		w.goneNodes = append(w.goneNodes, id)
	}
	for _, n := range o.nodes {
		w.nodes = append(w.nodes, n)
	}
	for id := range o.goneClusters {
		w.goneClusters = append(w.goneClusters, id)
	}
	for _, c := range o.clusters {
		w.clusters = append(w.clusters, c)
	}
	for _, m := range o.machines {
		w.machines = append(w.machines, m)
	}
	return w
}
