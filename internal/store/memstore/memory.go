package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// The Store is a store.Memory: the world it holds is always in memory, so
// it tells watchers what each commit wrote and finds a node by name or
// machine, and clusters by name, through indexes of its own.
var _ store.Memory = (*Store)(nil)

// notes are the rows of the snapshot's tables (store.Snapshot) that the
// running Update wrote, by ID, for its watchers: the storage writes note
// them (not the calls that asked), so a bulk write refused in part notes
// what it wrote. An Update starts them afresh.
type notes struct {
	nodes, machines, clusters []string
	reserved                  bool
}

// reset forgets the notes, keeping their room unless it grew large.
func (n *notes) reset() {
	for _, ids := range []*[]string{&n.nodes, &n.machines, &n.clusters} {
		if cap(*ids) > 4096 {
			*ids = nil
		}
		*ids = (*ids)[:0]
	}
	n.reserved = false
}

// watchers are the watchers of a DB's commits, each with the handle it
// came through (whose Close resets it). mu is held while one is loaded,
// applied to or reset, so each sees Load, Apply… and Reset in order.
type watchers struct {
	mu   sync.Mutex
	list []watcher
}

type watcher struct {
	s *Store
	w store.Watcher
}

// Watch hands w the committed version (a Snapshot) and then, after every
// Update that commits, what it wrote (store.Written, as store.Cached
// would report it), in commit order, until this handle is closed (w's
// Reset). It holds the writers' lock to load w, so no commit falls
// between the version w is handed and the first it is told of. w is
// called synchronously, while the Update that committed still holds that
// lock: it must be quick and never call the store.
func (s *Store) Watch(ctx context.Context, w store.Watcher) error {
	if s.closed.Load() {
		return errClosed
	}
	if err := s.d.acquire(ctx); err != nil {
		return fmt.Errorf("memstore: watch: %w", err)
	}
	defer s.d.release()
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return err
	}
	ws := &s.d.watchers
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	w.Load(snap)
	ws.list = append(ws.list, watcher{s, w})
	return nil
}

// forget resets and drops the watchers that came through s.
func (ws *watchers) forget(s *Store) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.list = slices.DeleteFunc(ws.list, func(x watcher) bool {
		if x.s == s {
			x.w.Reset()
		}
		return x.s == s
	})
}

// tell hands the watchers what the Update that just committed st wrote
// (d's notes), tagged by (store.WithTag); the writers' lock is held.
func (d *DB) tell(st *state, by any) {
	ws := &d.watchers
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.list) == 0 {
		return
	}
	w := d.notes.written(view{st: st})
	w.By = by
	for _, x := range ws.list {
		x.w.Apply(w)
	}
}

// written reads back in v (the version just committed) what the notes
// say was written, as store.Cached reports it: by ID, the machines, the
// clusters not fully deleted and the live nodes as stored, the IDs of the
// clusters fully deleted and of the nodes removed (or archived), and every
// reservation when one was written.
func (n *notes) written(v view) store.Written {
	var w store.Written
	for _, id := range sortedIDs(n.nodes) {
		if x, ok := v.node(id); ok && x.State != domain.NodeRemoved {
			w.Nodes = append(w.Nodes, x)
		} else {
			w.GoneNodes = append(w.GoneNodes, id)
		}
	}
	for _, id := range sortedIDs(n.machines) {
		if m, ok := v.st.machines.get(id); ok {
			w.Machines = append(w.Machines, *m)
		}
	}
	for _, id := range sortedIDs(n.clusters) {
		if r, ok := v.liveCluster(id); ok {
			w.Clusters = append(w.Clusters, r.cluster())
		} else {
			w.GoneClusters = append(w.GoneClusters, id)
		}
	}
	if n.reserved {
		w.Reserved, w.Reservations = true, rows(&v.st.reservationOrder, nil, nil)
	}
	return w
}

// sortedIDs sorts ids in place and returns them without repeats.
func sortedIDs(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// NodeNamed is the live node named name in cluster clusterID (of several,
// the one of the smallest ID); loaded is false only on a closed handle.
func (s *Store) NodeNamed(clusterID, name string) (n domain.Node, found, loaded bool) {
	v := s.read()
	defer s.d.mu.RUnlock()
	if v.st == nil {
		return n, false, false
	}
	k := sss{clusterID, name, ""}
	v.st.byName.ascend(&k, func(at sss, _ struct{}) bool {
		if at.a == clusterID && at.b == name {
			x, _ := v.node(at.c)
			n, found = *x, true
		}
		return false
	})
	return n, found, true
}

// ActiveOn is the active node (provisioning, ready, draining, removing)
// on machine machineID; loaded is false only on a closed handle.
func (s *Store) ActiveOn(machineID string) (n domain.Node, found, loaded bool) {
	v := s.read()
	defer s.d.mu.RUnlock()
	if v.st == nil {
		return n, false, false
	}
	id, ok := v.st.activeOn.get(machineID)
	if !ok {
		return n, false, true
	}
	x, _ := v.node(id)
	return *x, true, true
}

// ClustersNamed are the clusters not fully deleted of project named name,
// oldest first; loaded is false only on a closed handle.
func (s *Store) ClustersNamed(project, name string) (cls []domain.Cluster, loaded bool) {
	v := s.read()
	defer s.d.mu.RUnlock()
	if v.st == nil {
		return nil, false
	}
	v.st.clusterNames.ascend(&sstid{project, name, minKey, ""}, func(k sstid, r *clusterRow) bool {
		if k.a != project || k.b != name {
			return false
		}
		cls = append(cls, r.cluster())
		return true
	})
	return cls, true
}
