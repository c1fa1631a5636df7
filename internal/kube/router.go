package kube

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Loader returns a cluster's kubeconfig, or nil when none is attached.
type Loader func(ctx context.Context, clusterID string) ([]byte, error)

// Router is the ClusterDriver of the whole fleet: each call goes to the
// driver of its cluster's API server when the cluster has a kubeconfig
// attached, and to the fallback (the simulated driver) otherwise. A
// cluster's driver is built on first use and kept until Reload.
type Router struct {
	driver.Routed // every call, on the driver picked by driver()
	load          Loader
	fallback      driver.ClusterDriver
	clusters      driver.Clusters[*Cluster] // nil: not attached, use fallback

	mu   sync.Mutex
	opts Options
}

// NewRouter returns a router.
func NewRouter(load Loader, fallback driver.ClusterDriver, opts Options) *Router {
	opts.defaults()
	r := &Router{load: load, fallback: fallback, opts: opts}
	r.clusters.Build = r.build
	r.clusters.Started = func(id string, c *Cluster) {
		r.opts.Log.Info("started the Kubernetes driver of a cluster", "cluster", id, "server", c.host)
	}
	r.Routed.Pick = r.driver
	return r
}

// SetHooks sets the hooks of every cluster's driver (the controller's
// Kick, SweepSoon and RecordAccess) and of the fallback, before the first
// call: drivers built from then on get them.
func (r *Router) SetHooks(h driver.Hooks) {
	r.mu.Lock()
	r.opts.Hooks = h
	r.mu.Unlock()
	r.fallback.SetHooks(h)
}

// Start builds the drivers of the given clusters now, in the background,
// so their watches have synced before the first reclaim after a restart
// needs them. A cluster whose driver cannot be built is logged and tried
// again on first use.
func (r *Router) Start(ctx context.Context, clusterIDs []string) {
	r.clusters.Start(ctx, clusterIDs, func(id string, err error) {
		r.opts.Log.Warn("cannot start the Kubernetes driver of a cluster", "cluster", id, "err", err)
	})
}

// Reload forgets the cluster's driver, so the next call reads its
// kubeconfig again (after an attach or detach).
func (r *Router) Reload(clusterID string) {
	if r.clusters.Reload(clusterID) {
		r.opts.Log.Info("stopped the Kubernetes driver of a cluster", "cluster", clusterID)
	}
}

// Close stops the driver of every cluster (their watches); a later call
// builds them again.
func (r *Router) Close() { r.clusters.Close() }

// attached lists the drivers built so far.
func (r *Router) attached() []*Cluster { return r.clusters.All() }

// Attached returns the driver of an attached cluster, nil for one that
// runs on the fallback.
func (r *Router) Attached(ctx context.Context, clusterID string) (*Cluster, error) {
	return r.clusters.Attached(ctx, clusterID)
}

// build makes the driver of a cluster from its kubeconfig; nil for a
// cluster without one.
func (r *Router) build(ctx context.Context, clusterID string) (*Cluster, error) {
	kc, err := r.load(ctx, clusterID)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of cluster %s: %w", clusterID, err)
	}
	if kc == nil {
		return nil, nil
	}
	if err := CheckKubeconfig(kc, r.opts.AllowKubeconfigPlugins); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", clusterID, err)
	}
	rc, err := RESTConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", clusterID, err)
	}
	r.mu.Lock()
	opts := r.opts
	r.mu.Unlock()
	return NewCluster(clusterID, rc, opts)
}

// Driver is the cluster's driver as a platform of driver.Router sees it:
// nil (not a nil *Cluster) for a cluster without a kubeconfig.
func (r *Router) Driver(ctx context.Context, clusterID string) (driver.ClusterDriver, error) {
	c, err := r.Attached(ctx, clusterID)
	if err != nil || c == nil {
		return nil, err
	}
	return c, nil
}

// Known is the cluster's driver if it was looked up already (nil: no
// kubeconfig), never building it.
func (r *Router) Known(clusterID string) (driver.ClusterDriver, bool) {
	c, ok := r.clusters.Known(clusterID)
	if !ok || c == nil {
		return nil, ok
	}
	return c, true
}

func (r *Router) driver(ctx context.Context, clusterID string) (driver.ClusterDriver, error) {
	return driver.Pick(ctx, r, r.fallback, clusterID)
}

// Load asks the cluster's driver, or the fallback for a cluster without
// a kubeconfig, once the cluster has been used; it never starts a driver
// (the controller asks while it plans).
func (r *Router) Load(clusterID, nodeName string) domain.NodeLoad {
	return driver.LoadOn(r, r.fallback, clusterID, nodeName)
}

// Running asks like Load.
func (r *Router) Running(clusterID, nodeName string) ([]domain.Running, bool) {
	return driver.RunningOn(r, r.fallback, clusterID, nodeName)
}

var _ driver.ClusterDriver = (*Router)(nil)
var _ driver.Platform = (*Router)(nil)

// Registrar is the "register" machine provider: there is no machine to
// boot, and for an attached cluster it stands in for the kubelet joining
// by creating the Node object and marking it Ready. Clusters without a
// kubeconfig use the fallback provider (the simulation). It is for tests
// and for clusters whose nodes join by other means.
type Registrar struct {
	router   *Router
	fallback driver.MachineProvider
	// Every is how often Run posts heartbeats (default HeartbeatEvery).
	Every time.Duration
}

// NewRegistrar returns the register provider.
func NewRegistrar(r *Router, fallback driver.MachineProvider) *Registrar {
	return &Registrar{router: r, fallback: fallback}
}

// Prepare registers the node, Ready, in an attached cluster, with the
// capacity a scheduler needs to place pods on it (Capacity), and labelled
// LabelRegistered so Run keeps its heartbeat going.
func (g *Registrar) Prepare(ctx context.Context, m domain.Machine, spec driver.NodeSpec) (bool, error) {
	c, err := g.router.Attached(ctx, spec.ClusterID)
	if err != nil {
		return false, err
	}
	if c == nil {
		return g.fallback.Prepare(ctx, m, spec)
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	gpus := cmp.Or(m.GPUs, spec.GPUs, domain.DefaultGPUsPerMachine)
	if err := registerNode(ctx, c.client, spec.NodeName, map[string]string{LabelRegistered: "true"}, Capacity(gpus), g.router.opts.Wall.Now()); err != nil {
		return false, err
	}
	return true, nil
}

// Run posts the heartbeats of the nodes the provider registered, in every
// attached cluster, every HeartbeatEvery, until ctx ends: their status
// stays current as a kubelet's would.
func (g *Registrar) Run(ctx context.Context) {
	// Wall time: heartbeats are for the cluster's node lifecycle
	// controller, whatever speed sparecap's clock runs at.
	wall := g.router.opts.Wall
	for {
		select {
		case <-ctx.Done():
			return
		case <-wall.After(cmp.Or(g.Every, HeartbeatEvery)):
		}
		for _, c := range g.router.attached() {
			if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
				g.router.opts.Log.Warn("register provider heartbeat failed", "err", err)
			}
		}
	}
}

// Wipe has nothing to do: the node object was deleted by the drain.
func (g *Registrar) Wipe(ctx context.Context, m domain.Machine, clusterID, nodeName string) (bool, error) {
	return true, ctx.Err()
}

var _ driver.MachineProvider = (*Registrar)(nil)
