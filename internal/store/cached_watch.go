package store

import (
	"context"
	"errors"
	"slices"

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
	// By is the tag the Update's context carried (WithTag): who wrote it.
	By           any
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
func (c *Cached) tell(ctx context.Context, w *written) {
	if len(c.watchers) == 0 {
		return
	}
	out := Written{By: TagOf(ctx), Machines: w.machines, Clusters: w.clusters, GoneClusters: w.goneClusters, Nodes: w.nodes,
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

// ClustersNamed returns the copy's clusters (not fully deleted) of
// project named name (several when all but one are being deleted), if the
// copy is loaded (loaded).
func (c *Cached) ClustersNamed(project, name string) (cls []domain.Cluster, loaded bool) {
	if !c.enabled.Load() || c.cur.Load() == nil {
		return nil, false
	}
	c.nmu.RLock()
	defer c.nmu.RUnlock()
	for _, cl := range c.named[projectName{project, name}] {
		cls = append(cls, *cl)
	}
	return cls, true
}

// clusterNames finds the copy's clusters by project and name (a create
// checks its name is free).
type clusterNames map[projectName][]*domain.Cluster

type projectName struct{ project, name string }

func (n clusterNames) put(cl *domain.Cluster) {
	k := projectName{cl.ProjectID, cl.Name}
	n[k] = append(n[k], cl)
}

func (n clusterNames) remove(cl *domain.Cluster) {
	if cl == nil {
		return
	}
	k := projectName{cl.ProjectID, cl.Name}
	n[k] = slices.DeleteFunc(n[k], func(o *domain.Cluster) bool { return o.ID == cl.ID })
	if len(n[k]) == 0 {
		delete(n, k)
	}
}

type tagKey struct{}

// WithTag returns ctx whose Updates tell the copy's watchers they were
// written by tag (Written.By): a planner knows its own plan's commit.
func WithTag(ctx context.Context, tag any) context.Context {
	return context.WithValue(ctx, tagKey{}, tag)
}

// TagOf is the tag WithTag put in ctx (nil: none): what a store's
// watchers are told wrote an Update made under ctx (Written.By).
func TagOf(ctx context.Context) any { return ctx.Value(tagKey{}) }
