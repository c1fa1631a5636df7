package driver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Loader returns what is attached to a cluster for one platform (a
// kubeconfig, a slurm.conf), or nil when nothing of that platform is
// attached to it.
type Loader func(ctx context.Context, clusterID string) ([]byte, error)

// Build makes the driver of cluster clusterID from its attachment, telling
// the controller what it sees through hooks: all a platform supplies.
type Build[D Built] func(ctx context.Context, clusterID string, attachment []byte, hooks Hooks) (D, error)

// Built is the driver a platform builds for one of its clusters: Close
// stops it (its watches, its poll) once the platform forgets it.
type Built interface {
	comparable
	ClusterDriver
	Close()
}

// Platform keeps the drivers of one platform's clusters (Kubernetes,
// Slurm), one per cluster, built on first use from what is attached to it
// and kept until Reload. A cluster with nothing of the platform attached
// has the zero D, remembered too. What differs between platforms is only
// how a driver is built (Build); the platforms of a Router are Platforms
// of their own D.
type Platform[D Built] struct {
	name  string
	load  Loader
	build Build[D]
	log   *slog.Logger

	// mu guards hooks and orders SetHooks with the hooks given to each
	// driver kept, so none is left with hooks set before the last.
	mu    sync.Mutex
	hooks Hooks

	dmu     sync.Mutex
	drivers map[string]D
}

// NewPlatform returns the platform named name (in its log lines): a
// cluster's driver is build's, from what load returns for it.
func NewPlatform[D Built](name string, load Loader, build Build[D], log *slog.Logger) *Platform[D] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Platform[D]{name: name, load: load, build: build, log: log}
}

// Attached returns the cluster's driver, building it on first use; the
// zero D for a cluster with nothing of the platform attached.
func (p *Platform[D]) Attached(ctx context.Context, clusterID string) (D, error) {
	var zero D
	if d, ok := p.known(clusterID); ok {
		return d, nil
	}
	d, err := p.make(ctx, clusterID)
	if err != nil {
		return zero, err
	}
	p.dmu.Lock()
	if have, ok := p.drivers[clusterID]; ok {
		p.dmu.Unlock()
		// Another call built it first: keep that one.
		if d != zero {
			d.Close()
		}
		return have, nil
	}
	if p.drivers == nil {
		p.drivers = map[string]D{}
	}
	p.drivers[clusterID] = d
	p.dmu.Unlock()
	if d != zero {
		p.kept(clusterID, d)
	}
	return d, nil
}

// make builds the cluster's driver from its attachment, with the hooks
// set now.
func (p *Platform[D]) make(ctx context.Context, clusterID string) (D, error) {
	var zero D
	a, err := p.load(ctx, clusterID)
	if err != nil {
		return zero, fmt.Errorf("the %s attachment of cluster %s: %w", p.name, clusterID, err)
	}
	if a == nil {
		return zero, nil
	}
	p.mu.Lock()
	h := p.hooks
	p.mu.Unlock()
	return p.build(ctx, clusterID, a, h)
}

// kept logs a driver kept, and gives it the hooks set since it was built
// (SetHooks while it was being built found it not yet kept).
func (p *Platform[D]) kept(clusterID string, d D) {
	p.mu.Lock()
	d.SetHooks(p.hooks)
	p.mu.Unlock()
	args := []any{"cluster", clusterID}
	if v, ok := any(d).(slog.LogValuer); ok {
		args = append(args, "driver", v)
	}
	p.log.Info("started the "+p.name+" driver of a cluster", args...)
}

// Driver is Attached as a Router sees it: nil (not a nil D) for a cluster
// with nothing of the platform attached.
func (p *Platform[D]) Driver(ctx context.Context, clusterID string) (ClusterDriver, error) {
	var zero D
	d, err := p.Attached(ctx, clusterID)
	if err != nil || d == zero {
		return nil, err
	}
	return d, nil
}

// Known returns the cluster's driver (nil: nothing attached) if it was
// looked up since its last Reload, never building one.
func (p *Platform[D]) Known(clusterID string) (ClusterDriver, bool) {
	var zero D
	d, ok := p.known(clusterID)
	if !ok || d == zero {
		return nil, ok
	}
	return d, true
}

func (p *Platform[D]) known(clusterID string) (D, bool) {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	d, ok := p.drivers[clusterID]
	return d, ok
}

// Reload forgets the cluster's driver and closes it, so the next call
// reads its attachment again (after an attach or a detach).
func (p *Platform[D]) Reload(clusterID string) {
	var zero D
	p.dmu.Lock()
	d, ok := p.drivers[clusterID]
	delete(p.drivers, clusterID)
	p.dmu.Unlock()
	if ok && d != zero {
		d.Close()
		p.log.Info("stopped the "+p.name+" driver of a cluster", "cluster", clusterID)
	}
}

// SetHooks sets the hooks of every driver, those built already and those
// built from now on.
func (p *Platform[D]) SetHooks(h Hooks) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hooks = h
	for _, d := range p.All() {
		d.SetHooks(h)
	}
}

// Start builds the drivers of the given clusters now, in the background,
// so they are ready (their watches synced, their first poll done) before
// the first reclaim after a restart needs them. A cluster whose driver
// cannot be built is logged (unless ctx ended) and tried again on first
// use.
func (p *Platform[D]) Start(ctx context.Context, clusterIDs []string) {
	for _, id := range clusterIDs {
		go func() {
			if _, err := p.Attached(ctx, id); err != nil && ctx.Err() == nil {
				p.log.Warn("cannot start the "+p.name+" driver of a cluster", "cluster", id, "err", err)
			}
		}()
	}
}

// Close closes every driver; later calls build them again.
func (p *Platform[D]) Close() {
	var zero D
	p.dmu.Lock()
	m := p.drivers
	p.drivers = nil
	p.dmu.Unlock()
	for _, d := range m {
		if d != zero {
			d.Close()
		}
	}
}

// All lists the drivers built so far.
func (p *Platform[D]) All() []D {
	var zero D
	p.dmu.Lock()
	defer p.dmu.Unlock()
	out := make([]D, 0, len(p.drivers))
	for _, d := range p.drivers {
		if d != zero {
			out = append(out, d)
		}
	}
	return out
}
