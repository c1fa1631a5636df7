package memstore

import (
	"context"
	"slices"
	"sync"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// snapshots keeps the slices of the last Snapshot, each with the version
// of its table it was built from (the root of the table's tree: a version
// that wrote no row of the table has the same root). A table not written
// since comes back as the very same slice, as store.Cached gives it
// (store.Same); a written one as a new slice, the unchanged nodes in it
// as the same pointers and a written node as a new one. A slice handed
// out is never changed.
type snapshots struct {
	mu           sync.Mutex
	machines     built[tid, *domain.Machine, domain.Machine]
	reservations built[tid, *domain.Reservation, domain.Reservation]
	clusters     built[tid, *clusterRow, domain.Cluster]
	nodes        built[tid, *domain.Node, *domain.Node]
}

// built is a table's slice and the root it was built from.
type built[K, P, T any] struct {
	root *bnode[K, P]
	rows []T
	ok   bool
}

// of returns tr's rows, rebuilt by row only if tr changed.
func (b *built[K, P, T]) of(tr *tree[K, P], row func(P) T) []T {
	if b.ok && b.root == tr.root {
		return b.rows
	}
	rows := make([]T, 0, tr.Len())
	tr.each(func(_ K, p P) bool {
		rows = append(rows, row(p))
		return true
	})
	b.root, b.rows, b.ok = tr.root, rows, true
	return rows
}

// Snapshot reads one committed version: every machine and reservation,
// the clusters not fully deleted and the nodes not removed, in listing
// order. Each slice is capped, so a caller's append copies it.
func (s *Store) Snapshot(ctx context.Context) (store.Snapshot, error) {
	v := s.view()
	if err := v.check(ctx); err != nil {
		return store.Snapshot{}, err
	}
	c := &s.d.snap
	c.mu.Lock()
	defer c.mu.Unlock()
	return store.Snapshot{
		Machines:     slices.Clip(c.machines.of(&v.st.machineOrder, func(m *domain.Machine) domain.Machine { return *m })),
		Reservations: slices.Clip(c.reservations.of(&v.st.reservationOrder, func(r *domain.Reservation) domain.Reservation { return *r })),
		Clusters:     slices.Clip(c.clusters.of(&v.st.clusterOrder, (*clusterRow).cluster)),
		Nodes:        slices.Clip(c.nodes.of(&v.st.live, func(n *domain.Node) *domain.Node { return n })),
	}, nil
}
