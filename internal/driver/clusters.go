package driver

import (
	"context"
	"sync"
)

// Clusters keeps the drivers a platform builds for its clusters, one per
// cluster, built on first use from what is attached to it and kept until
// Reload: the part of every platform's router that does not depend on
// the platform. A zero C for a cluster means it is not this platform's to
// drive (nothing attached), and is remembered too.
type Clusters[C interface {
	comparable
	Close()
}] struct {
	// Build returns the driver of a cluster, or the zero C when nothing
	// of this platform is attached to it.
	Build func(ctx context.Context, clusterID string) (C, error)
	// Started, if set, is told of each driver kept (to log it).
	Started func(clusterID string, c C)

	mu sync.Mutex
	m  map[string]C
}

// Attached returns the cluster's driver, building it on first use; the
// zero C for a cluster of another platform or with nothing attached.
func (cs *Clusters[C]) Attached(ctx context.Context, clusterID string) (C, error) {
	var zero C
	if c, ok := cs.Known(clusterID); ok {
		return c, nil
	}
	c, err := cs.Build(ctx, clusterID)
	if err != nil {
		return zero, err
	}
	cs.mu.Lock()
	if have, ok := cs.m[clusterID]; ok {
		cs.mu.Unlock()
		// Another call built it first: keep that one.
		if c != zero {
			c.Close()
		}
		return have, nil
	}
	if cs.m == nil {
		cs.m = map[string]C{}
	}
	cs.m[clusterID] = c
	cs.mu.Unlock()
	if c != zero && cs.Started != nil {
		cs.Started(clusterID, c)
	}
	return c, nil
}

// Known returns the cluster's driver if it was built (or found to be
// none) already, without building it: ok is false for a cluster not used
// since the last Reload.
func (cs *Clusters[C]) Known(clusterID string) (c C, ok bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok = cs.m[clusterID]
	return c, ok
}

// Reload forgets the cluster's driver and closes it, so the next call
// reads its attachment again (after an attach or a detach); it reports
// whether a driver was closed.
func (cs *Clusters[C]) Reload(clusterID string) bool {
	var zero C
	cs.mu.Lock()
	c, ok := cs.m[clusterID]
	delete(cs.m, clusterID)
	cs.mu.Unlock()
	if ok && c != zero {
		c.Close()
		return true
	}
	return false
}

// Close closes every driver; later calls build them again.
func (cs *Clusters[C]) Close() {
	var zero C
	cs.mu.Lock()
	m := cs.m
	cs.m = nil
	cs.mu.Unlock()
	for _, c := range m {
		if c != zero {
			c.Close()
		}
	}
}

// All lists the drivers built so far.
func (cs *Clusters[C]) All() []C {
	var zero C
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]C, 0, len(cs.m))
	for _, c := range cs.m {
		if c != zero {
			out = append(out, c)
		}
	}
	return out
}

// Each calls f with every driver built so far, under the lock: f must not
// call back into cs.
func (cs *Clusters[C]) Each(f func(C)) {
	var zero C
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.m {
		if c != zero {
			f(c)
		}
	}
}

// Start builds the drivers of the given clusters now, in the background,
// so they are ready (their watches synced, their first poll done) before
// the first reclaim after a restart needs them. A cluster whose driver
// cannot be built is told to failed (unless ctx ended) and tried again on
// first use.
func (cs *Clusters[C]) Start(ctx context.Context, clusterIDs []string, failed func(clusterID string, err error)) {
	for _, id := range clusterIDs {
		go func() {
			if _, err := cs.Attached(ctx, id); err != nil && ctx.Err() == nil {
				failed(id, err)
			}
		}()
	}
}
