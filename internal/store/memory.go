package store

import (
	"context"

	"github.com/sparecap/sparecap/internal/domain"
)

// Memory is a store that holds the world a leader plans on in memory and
// can say, without a query, what changed and where a row is: the
// leader's copy over a database (Cached), or a store that lives in memory
// (memstore, the simulator's). The controller and the meter work in
// proportion to what changed through it.
type Memory interface {
	Store
	// Watch hands w the world as it is now and then what every commit
	// writes, in commit order, until the world in memory is dropped (w's
	// Reset); ErrNotCached when it is not held (a follower's copy).
	Watch(ctx context.Context, w Watcher) error
	// NodeNamed is the live node named name in cluster clusterID
	// (found), when the world is in memory (loaded).
	NodeNamed(clusterID, name string) (n domain.Node, found, loaded bool)
	// ActiveOn is the active node (provisioning, ready, draining,
	// removing) on machine machineID (found), when the world is in memory
	// (loaded).
	ActiveOn(machineID string) (n domain.Node, found, loaded bool)
	// ClustersNamed are the clusters (not fully deleted) of project named
	// name, when the world is in memory (loaded).
	ClustersNamed(project, name string) (cls []domain.Cluster, loaded bool)
}

var _ Memory = (*Cached)(nil)

// MemoryOf is st as a Memory, if it is one.
func MemoryOf(st Store) (Memory, bool) {
	m, ok := st.(Memory)
	return m, ok
}
