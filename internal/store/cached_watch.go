package store

import (
	"context"
	"errors"

	"github.com/sparecap/sparecap/internal/domain"
)

// Watcher follows the leader's in-memory copy (Cached.Watch): Load gets
// it as it is, Apply what each commit wrote since, in commit order, and
// Reset that the copy was dropped (a commit whose outcome is unknown, the
// cache disabled at the end of a term), after which it follows no more.
// They are called under the copy's commit lock: quick, and never calling
// the store.
type Watcher interface {
	Load(Snapshot)
	Apply(Written)
	Reset()
}

// Written is what one commit wrote of the snapshot's tables, as stored:
// machines, clusters and live nodes written, the clusters fully deleted
// and the nodes removed, and every reservation when any was written.
type Written struct {
	Machines     []domain.Machine
	Clusters     []domain.Cluster
	GoneClusters []string
	Nodes        []*domain.Node
	GoneNodes    []string
	Reserved     bool
	Reservations []domain.Reservation
}

// ErrNotCached: the in-memory copy is not enabled (not the leader).
var ErrNotCached = errors.New("the in-memory copy is not enabled")

// Watch hands w the copy as it is now (loading it first if need be) and
// then what every commit writes, until the copy is dropped.
func (c *Cached) Watch(ctx context.Context, w Watcher) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.enabled.Load() {
		return ErrNotCached
	}
	s, ok := c.current()
	if !ok {
		var err error
		if s, err = c.load(ctx); err != nil {
			return err
		}
	}
	w.Load(shared(s))
	c.watchers = append(c.watchers, w)
	return nil
}

// tell hands what a commit wrote to the watchers; c.wmu is held.
func (c *Cached) tell(w *written) {
	if len(c.watchers) == 0 {
		return
	}
	out := Written{Machines: w.machines, Clusters: w.clusters, GoneClusters: w.goneClusters, Nodes: w.nodes,
		GoneNodes: w.goneNodes, Reserved: w.reservations, Reservations: w.allRes}
	for _, x := range c.watchers {
		x.Apply(out)
	}
}

// resetWatchers tells the watchers the copy is dropped and forgets them;
// c.wmu is held.
func (c *Cached) resetWatchers() {
	for _, x := range c.watchers {
		x.Reset()
	}
	c.watchers = nil
}

// Enabled reports whether the copy is enabled (this server leads).
func (c *Cached) Enabled() bool { return c.enabled.Load() }

// FindCluster returns a cluster of the copy (not fully deleted) for which
// match says so (found) if the copy is loaded (loaded). It walks the
// copy's clusters under a read lock: match must be quick.
func (c *Cached) FindCluster(match func(*domain.Cluster) bool) (cl domain.Cluster, found, loaded bool) {
	if !c.enabled.Load() || c.cur.Load() == nil {
		return domain.Cluster{}, false, false
	}
	c.nmu.RLock()
	defer c.nmu.RUnlock()
	for _, cl := range c.clusters {
		if match(cl) {
			return *cl, true, true
		}
	}
	return domain.Cluster{}, false, true
}
