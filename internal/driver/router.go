package driver

import (
	"context"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Drivers is one platform's drivers as a Router sees them, whatever their
// type: a *Platform[D].
type Drivers interface {
	// Driver returns the cluster's driver, built on first use; nil when
	// nothing of this platform is attached to the cluster.
	Driver(ctx context.Context, clusterID string) (ClusterDriver, error)
	// Known returns the cluster's driver (nil: nothing attached) if it
	// was looked up since its last Reload, never building one.
	Known(clusterID string) (d ClusterDriver, ok bool)
	// Reload forgets the cluster's driver (after an attach or detach).
	Reload(clusterID string)
	// SetHooks sets the hooks of every driver the platform builds.
	SetHooks(h Hooks)
	// Close closes every driver.
	Close()
}

// Router is the ClusterDriver of the whole fleet: each call goes, by the
// cluster's type, to its platform's driver of the cluster when something
// is attached to it, and to the fallback (the simulated fleet) otherwise.
type Router struct {
	Routed    // every call, on the driver pick chooses
	typeOf    func(ctx context.Context, clusterID string) (domain.ClusterType, error)
	platforms map[domain.ClusterType]Drivers
	fallback  ClusterDriver
	types     sync.Map // cluster ID → domain.ClusterType: it never changes
}

// NewRouter returns the router over platforms by cluster type; typeOf
// tells a cluster's type, asked once per cluster.
func NewRouter(typeOf func(ctx context.Context, clusterID string) (domain.ClusterType, error), platforms map[domain.ClusterType]Drivers, fallback ClusterDriver) *Router {
	r := &Router{typeOf: typeOf, platforms: platforms, fallback: fallback}
	r.Routed.Pick = r.pick
	return r
}

// platform is the platform of the cluster's type, nil for a type none
// drives.
func (r *Router) platform(ctx context.Context, clusterID string) (Drivers, error) {
	t, ok := r.types.Load(clusterID)
	if !ok {
		typ, err := r.typeOf(ctx, clusterID)
		if err != nil {
			return nil, err
		}
		r.types.Store(clusterID, typ)
		t = typ
	}
	return r.platforms[t.(domain.ClusterType)], nil
}

// pick is the cluster's driver: its platform's, or the fallback when
// nothing of its platform is attached to it (or no platform drives its
// type).
func (r *Router) pick(ctx context.Context, clusterID string) (ClusterDriver, error) {
	p, err := r.platform(ctx, clusterID)
	switch {
	case err != nil:
		return nil, err
	case p == nil:
		return r.fallback, nil
	}
	d, err := p.Driver(ctx, clusterID)
	switch {
	case err != nil:
		return nil, err
	case d == nil:
		return r.fallback, nil
	}
	return d, nil
}

// known is, without building one, the cluster's driver once the cluster
// has been used (its platform's, or the fallback); nil before.
func (r *Router) known(clusterID string) ClusterDriver {
	t, ok := r.types.Load(clusterID)
	if !ok {
		return nil
	}
	p := r.platforms[t.(domain.ClusterType)]
	if p == nil {
		return r.fallback
	}
	d, ok := p.Known(clusterID)
	switch {
	case !ok:
		return nil
	case d == nil:
		return r.fallback
	}
	return d
}

// Load asks the cluster's driver, or the fallback for a cluster with
// nothing attached, once the cluster has been used; it never builds a
// driver (the controller asks while it plans).
func (r *Router) Load(clusterID, nodeName string) domain.NodeLoad {
	if d := r.known(clusterID); d != nil {
		return d.Load(clusterID, nodeName)
	}
	return domain.NodeLoad{}
}

// Running asks like Load.
func (r *Router) Running(clusterID, nodeName string) ([]domain.Running, bool) {
	if d := r.known(clusterID); d != nil {
		return d.Running(clusterID, nodeName)
	}
	return nil, false
}

// Tells asks the cluster's driver, once the cluster has been used (a
// cluster not used yet cannot be told of: its steps poll until it is).
func (r *Router) Tells(clusterID string) bool {
	return Tells(r.known(clusterID), clusterID)
}

// Announce forwards to the cluster's driver, if it announces
// (Announcer); nothing otherwise.
func (r *Router) Announce(ctx context.Context, clusterID, nodeName string, at time.Time) error {
	d, err := r.pick(ctx, clusterID)
	if err != nil {
		return err
	}
	_, err = Announce(ctx, d, clusterID, nodeName, at)
	return err
}

// SetHooks sets the hooks of every platform's drivers and the fallback's.
func (r *Router) SetHooks(h Hooks) {
	for _, p := range r.platforms {
		p.SetHooks(h)
	}
	r.fallback.SetHooks(h)
}

// Reload forgets the cluster's driver, whatever its platform, so the next
// call reads its attachment again (and its type: a deleted cluster leaves
// nothing behind).
func (r *Router) Reload(clusterID string) {
	r.types.Delete(clusterID)
	for _, p := range r.platforms {
		p.Reload(clusterID)
	}
}

// Close stops every platform's drivers (their watches, their polls); a
// later call builds them again.
func (r *Router) Close() {
	for _, p := range r.platforms {
		p.Close()
	}
}

var _ ClusterDriver = (*Router)(nil)
