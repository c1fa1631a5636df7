package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sparecap/sparecap/internal/domain"
)

// Cached is a Store whose Snapshot, while enabled, is served from memory:
// the leader loads the world it plans on once per term and keeps it up to
// date by writing through. Every Update records which machines,
// reservations, clusters and nodes it wrote, reads them back inside its
// own transaction (so the copy holds exactly what the backend stores, its
// time precision included) and, once the transaction has committed,
// applies them to the copy (its by-ID maps at once, its slices when next
// read: see overlay). Updates run one at a time, so the copy changes in
// commit order; a snapshot never waits for an Update. Inside an Update,
// a node the transaction has not written yet is read from the copy, which
// holds what the backend holds (every write goes through here, one
// Update at a time), without a query.
//
// The copy is right only while every write of those tables goes through
// this Cached: on one SQLite file the server is the only writer; on a
// shared PostgreSQL only the leader writes them (followers forward
// writes), so a server enables the cache for its terms only. An Update
// whose outcome is unknown (its commit failed) drops the copy, and the
// next Snapshot loads it again.
//
// The slices a Snapshot returns are shared with other callers: their
// elements must not be modified (appending is safe).
type Cached struct {
	Store
	wmu     sync.Mutex // one Update at a time: the copy changes in commit order
	enabled atomic.Bool
	cur     atomic.Pointer[Snapshot] // nil: not loaded
	loads   atomic.Int64

	// amu guards what committed Updates wrote that cur's slices do not
	// hold yet (pend), and the rebuilding of cur from it; dirty says
	// pend holds something, so a reader of a settled copy takes no lock.
	amu   sync.Mutex
	pend  overlay
	idx   *index // where cur's rows are
	dirty atomic.Bool

	// nodes and machines are cur's by ID, for GetNode and GetMachine:
	// changed by the Update that changes cur, just before it (nmu is never
	// held across a backend call).
	nmu      sync.RWMutex
	ni       nodeIndex
	machines map[string]*domain.Machine
	clusters map[string]*domain.Cluster
	named    clusterNames
	// watchers follow the copy's commits (Watch); under wmu.
	watchers []Watcher
}

// NewCached wraps st; the cache starts disabled.
func NewCached(st Store) *Cached { return &Cached{Store: st} }

// Enable serves later Snapshots from memory, loaded by the first of them.
func (c *Cached) Enable() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.drop()
	c.enabled.Store(true)
}

// Disable drops the copy: Snapshots read the backend again.
func (c *Cached) Disable() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.enabled.Store(false)
	c.drop()
}

// drop forgets the copy, and what was written since it was last rebuilt;
// its watchers are reset.
func (c *Cached) drop() {
	c.resetWatchers()
	c.amu.Lock()
	defer c.amu.Unlock()
	c.cur.Store(nil)
	c.pend, c.idx = overlay{}, nil
	c.dirty.Store(false)
}

// current returns the copy with every committed Update in it, rebuilding
// its slices first if Updates wrote since they were last built; false if
// the copy is not loaded.
func (c *Cached) current() (Snapshot, bool) {
	if !c.dirty.Load() {
		if s := c.cur.Load(); s != nil {
			return *s, true
		}
		return Snapshot{}, false
	}
	c.amu.Lock()
	defer c.amu.Unlock()
	cur := c.cur.Load()
	if cur == nil {
		return Snapshot{}, false
	}
	if c.dirty.Load() {
		next := c.pend.written().apply(*cur, c.idx)
		c.cur.Store(&next)
		c.pend = overlay{}
		c.dirty.Store(false)
		cur = &next
	}
	return *cur, true
}

// Loads is how many times the copy was loaded from the backend.
func (c *Cached) Loads() int64 { return c.loads.Load() }

// Snapshot returns the copy while the cache is enabled, loading it first
// if needed; the backend's snapshot otherwise.
func (c *Cached) Snapshot(ctx context.Context) (Snapshot, error) {
	if !c.enabled.Load() {
		return c.Store.Snapshot(ctx)
	}
	if s, ok := c.current(); ok {
		return shared(s), nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.enabled.Load() {
		return c.Store.Snapshot(ctx)
	}
	if s, ok := c.current(); ok {
		return shared(s), nil
	}
	s, err := c.load(ctx)
	if err != nil {
		return s, err
	}
	return shared(s), nil
}

// load reads the copy from the backend; c.wmu is held.
func (c *Cached) load(ctx context.Context) (Snapshot, error) {
	s, err := c.Store.Snapshot(ctx)
	if err != nil {
		return s, err
	}
	c.loads.Add(1)
	idx := newIndex(s)
	ni := newNodeIndex(s.Nodes)
	machines := make(map[string]*domain.Machine, len(s.Machines))
	for i := range s.Machines {
		machines[s.Machines[i].ID] = &s.Machines[i]
	}
	clusters := make(map[string]*domain.Cluster, len(s.Clusters))
	for i := range s.Clusters {
		clusters[s.Clusters[i].ID] = &s.Clusters[i]
	}
	named := clusterNames{}
	for _, cl := range clusters {
		named.put(cl)
	}
	c.nmu.Lock()
	c.ni, c.machines, c.clusters, c.named = ni, machines, clusters, named
	c.nmu.Unlock()
	c.amu.Lock()
	c.pend, c.idx = overlay{}, idx
	c.cur.Store(&s)
	c.amu.Unlock()
	return s, nil
}

// GetNode reads a live node from the copy while it is loaded (a node step
// starts with it: on the leader that read costs a map lookup, not a
// query). A node the copy lacks (removed, or not loaded) is read from the
// backend. The copy may trail the backend by the commit being applied,
// as a read just before that commit would: whoever acts on the node
// checks its state again in its transaction.
func (c *Cached) GetNode(ctx context.Context, id string) (domain.Node, error) {
	if n, ok := fromCopy(c, func() map[string]*domain.Node { return c.ni.byID }, id); ok {
		return n, nil
	}
	return c.Store.GetNode(ctx, id)
}

// fromCopy reads row id from one of the copy's maps (byID, read under
// nmu) while the copy is loaded.
func fromCopy[T any](c *Cached, byID func() map[string]*T, id string) (T, bool) {
	var zero T
	if !c.enabled.Load() || c.cur.Load() == nil {
		return zero, false
	}
	c.nmu.RLock()
	row, ok := byID()[id]
	c.nmu.RUnlock()
	if !ok {
		return zero, false
	}
	return *row, true
}

// GetMachine reads a machine from the copy while it is loaded, as GetNode
// reads a node (a provisioning step asks for its machine on every poll).
func (c *Cached) GetMachine(ctx context.Context, id string) (domain.Machine, error) {
	if m, ok := fromCopy(c, func() map[string]*domain.Machine { return c.machines }, id); ok {
		return m, nil
	}
	return c.Store.GetMachine(ctx, id)
}

// GetCluster reads a cluster from the copy while it is loaded, as GetNode
// reads a node (a provisioning step asks for its cluster's type on every
// poll); one the copy lacks (fully deleted) is read from the backend.
func (c *Cached) GetCluster(ctx context.Context, id string) (domain.Cluster, error) {
	if cl, ok := fromCopy(c, func() map[string]*domain.Cluster { return c.clusters }, id); ok {
		return cl, nil
	}
	return c.Store.GetCluster(ctx, id)
}

// Loaded returns the copy if the cache is enabled and loaded, without
// loading it: readers that can also ask the backend use it when it is
// there (the API's lists on the leader).
func (c *Cached) Loaded() (Snapshot, bool) {
	if !c.enabled.Load() {
		return Snapshot{}, false
	}
	s, ok := c.current()
	if !ok {
		return Snapshot{}, false
	}
	return shared(s), true
}

// LoadedSnapshot returns st's in-memory copy if st is a Cached whose copy
// is enabled and loaded (the leader's), without loading it.
func LoadedSnapshot(st Store) (Snapshot, bool) {
	if c, ok := st.(*Cached); ok {
		return c.Loaded()
	}
	return Snapshot{}, false
}

// Same reports whether a and b are the same rows of the in-memory copy
// (the same slice, not equal copies): the copy replaces a table's slice
// whenever it writes one of its rows, so what was worked out from a table
// holds while Same says so.
func Same[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// shared caps each slice so an append by one caller copies it.
func shared(s Snapshot) Snapshot {
	return Snapshot{Machines: slices.Clip(s.Machines), Reservations: slices.Clip(s.Reservations),
		Clusters: slices.Clip(s.Clusters), Nodes: slices.Clip(s.Nodes)}
}

// Update runs fn through the backend and applies what it wrote to the copy.
func (c *Cached) Update(ctx context.Context, fn func(Tx) error) error {
	// Under wmu even while disabled: an Update that began before Enable
	// must commit before the copy is loaded.
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.enabled.Load() {
		return c.Store.Update(ctx, fn)
	}
	var wrote written
	ran := false
	err := c.Store.Update(ctx, func(tx Tx) error {
		wrote, ran = written{}, false
		rec := &recordingTx{Tx: tx, w: &wrote, c: c}
		if err := fn(rec); err != nil {
			return err
		}
		if err := wrote.readBack(ctx, tx); err != nil {
			return err
		}
		ran = true
		return nil
	})
	cur := c.cur.Load()
	switch {
	case cur == nil:
	case err == nil:
		c.nmu.Lock()
		for _, id := range wrote.goneNodes {
			c.ni.remove(id)
		}
		for _, n := range wrote.nodes {
			c.ni.put(n)
		}
		for _, m := range wrote.machines {
			c.machines[m.ID] = &m
		}
		for _, id := range wrote.goneClusters {
			c.named.remove(c.clusters[id])
			delete(c.clusters, id)
		}
		for _, cl := range wrote.clusters {
			c.named.remove(c.clusters[cl.ID])
			c.clusters[cl.ID] = &cl
			c.named.put(&cl)
		}
		c.nmu.Unlock()
		c.amu.Lock()
		c.pend.add(&wrote)
		c.dirty.Store(!c.pend.empty())
		c.amu.Unlock()
		c.tell(ctx, &wrote)
	case ran && !errors.Is(err, ErrFenced) && !errors.Is(err, context.Canceled):
		// fn and the read-back succeeded but the commit did not say so: it
		// may have committed. Load again rather than guess.
		c.drop()
	}
	return err
}
