package driver

import (
	"context"
	"sync"

	"github.com/sparecap/sparecap/internal/domain"
)

// Platform is the drivers of one platform's clusters (Kubernetes, Slurm):
// a cluster's driver is built from what is attached to it.
type Platform interface {
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
}

// Router is the ClusterDriver of the whole fleet: each call goes, by the
// cluster's type, to its platform's driver of the cluster when something
// is attached to it, and to the fallback (the simulated fleet) otherwise.
type Router struct {
	Routed    // every call, on the driver pick chooses
	typeOf    func(ctx context.Context, clusterID string) (domain.ClusterType, error)
	platforms map[domain.ClusterType]Platform
	fallback  ClusterDriver
	types     sync.Map // cluster ID → domain.ClusterType: it never changes
}

// NewRouter returns the router over platforms by cluster type; typeOf
// tells a cluster's type, asked once per cluster.
func NewRouter(typeOf func(ctx context.Context, clusterID string) (domain.ClusterType, error), platforms map[domain.ClusterType]Platform, fallback ClusterDriver) *Router {
	r := &Router{typeOf: typeOf, platforms: platforms, fallback: fallback}
	r.Routed.Pick = r.pick
	return r
}

// platform is the platform of the cluster's type, nil for a type none
// drives.
func (r *Router) platform(ctx context.Context, clusterID string) (Platform, error) {
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

func (r *Router) pick(ctx context.Context, clusterID string) (ClusterDriver, error) {
	p, err := r.platform(ctx, clusterID)
	if err != nil {
		return nil, err
	}
	return Pick(ctx, p, r.fallback, clusterID)
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

// known is the cluster's driver once the cluster has been used, nil
// before.
func (r *Router) known(clusterID string) ClusterDriver {
	t, ok := r.types.Load(clusterID)
	if !ok {
		return nil
	}
	return KnownOn(r.platforms[t.(domain.ClusterType)], r.fallback, clusterID)
}

// Pick is the driver of a cluster of platform p: p's driver of it, or
// fallback when nothing of p is attached to it (or p is nil).
func Pick(ctx context.Context, p Platform, fallback ClusterDriver, clusterID string) (ClusterDriver, error) {
	if p == nil {
		return fallback, nil
	}
	d, err := p.Driver(ctx, clusterID)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return fallback, nil
	}
	return d, nil
}

// KnownOn is, without building one, the driver of a cluster of platform
// p once it was looked up: p's driver, or fallback when nothing of p is
// attached to it (or p is nil); nil before it was looked up.
func KnownOn(p Platform, fallback ClusterDriver, clusterID string) ClusterDriver {
	if p == nil {
		return fallback
	}
	d, ok := p.Known(clusterID)
	switch {
	case !ok:
		return nil
	case d == nil:
		return fallback
	}
	return d
}

// LoadOn is the Load of KnownOn's driver (unknown before it is looked up).
func LoadOn(p Platform, fallback ClusterDriver, clusterID, nodeName string) domain.NodeLoad {
	if d := KnownOn(p, fallback, clusterID); d != nil {
		return d.Load(clusterID, nodeName)
	}
	return domain.NodeLoad{}
}

// RunningOn is the Running of KnownOn's driver.
func RunningOn(p Platform, fallback ClusterDriver, clusterID, nodeName string) ([]domain.Running, bool) {
	if d := KnownOn(p, fallback, clusterID); d != nil {
		return d.Running(clusterID, nodeName)
	}
	return nil, false
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

var _ ClusterDriver = (*Router)(nil)
