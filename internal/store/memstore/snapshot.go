package memstore

import (
	"context"
	"slices"
	"sync"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// snapshots keeps the slices of the last Snapshot, each with the version
// of its table it was built from (the tree's ver: a version that wrote no
// row of the table has the same). A table not written since comes back as
// the very same slice, as store.Cached gives it (store.Same); a written
// one as a new slice, the unchanged nodes in it as the same pointers and
// a written node as a new one. A slice handed out is never changed.
type snapshots struct {
	mu           sync.Mutex
	machines     built[tid, *domain.Machine, domain.Machine]
	reservations built[tid, *domain.Reservation, domain.Reservation]
	clusters     built[tid, *clusterRow, domain.Cluster]
	nodes        built[tid, *domain.Node, *domain.Node]
}

// built is a table's slice and the version it was built from.
type built[K, P, T any] struct {
	ver  uint64
	rows []T
	ok   bool
}

// of returns the rows add makes of tr's values (n of them), rebuilt only
// if tr changed.
func (b *built[K, P, T]) of(tr *tree[K, P], n int, add func(rows []T, vals []P) []T) []T {
	if b.ok && b.ver == tr.ver {
		return b.rows
	}
	rows := make([]T, 0, n)
	tr.runs(func(_ []K, vals []P) { rows = add(rows, vals) })
	b.ver, b.rows, b.ok = tr.ver, rows, true
	return rows
}

// values appends the values ps point to.
func values[T any](rows []T, ps []*T) []T {
	for _, p := range ps {
		rows = append(rows, *p)
	}
	return rows
}

// clusters appends the clusters of rs.
func clusters(rows []domain.Cluster, rs []*clusterRow) []domain.Cluster {
	for _, r := range rs {
		rows = append(rows, r.cluster())
	}
	return rows
}

// liveNodes appends the nodes of ns not removed.
func liveNodes(rows []*domain.Node, ns []*domain.Node) []*domain.Node {
	for _, n := range ns {
		if n.State != domain.NodeRemoved {
			rows = append(rows, n)
		}
	}
	return rows
}

// Snapshot reads one committed version: every machine and reservation,
// the clusters not fully deleted and the nodes not removed, in listing
// order. Each slice is capped, so a caller's append copies it.
func (s *Store) Snapshot(ctx context.Context) (store.Snapshot, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	if err := v.check(ctx); err != nil {
		return store.Snapshot{}, err
	}
	c := &s.d.snap
	c.mu.Lock()
	defer c.mu.Unlock()
	st := v.st
	return store.Snapshot{
		Machines:     slices.Clip(c.machines.of(&st.machineOrder, st.machineOrder.Len(), values)),
		Reservations: slices.Clip(c.reservations.of(&st.reservationOrder, st.reservationOrder.Len(), values)),
		Clusters:     slices.Clip(c.clusters.of(&st.clusterOrder, st.clusterOrder.Len(), clusters)),
		Nodes:        slices.Clip(c.nodes.of(&st.nodes, st.liveNodes, liveNodes)),
	}, nil
}
