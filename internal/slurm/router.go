package slurm

import (
	"context"
	"fmt"
	"sync"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Loader returns the slurm.conf attached to a Slurm cluster, or nil when
// the cluster is not a Slurm cluster or has none attached.
type Loader func(ctx context.Context, clusterID string) ([]byte, error)

// Router sends each call to the driver of its cluster's slurmctld when the
// cluster is a Slurm cluster with a slurm.conf attached, and to next (the
// Kubernetes router) otherwise. A cluster's driver is built on first use
// and kept until Reload.
type Router struct {
	driver.Routed // every call, on the driver picked by driver()
	load          Loader
	next          driver.ClusterDriver
	clusters      driver.Clusters[*Cluster] // nil: not Slurm, use next

	mu   sync.Mutex
	opts Options
}

// NewRouter returns a router.
func NewRouter(load Loader, next driver.ClusterDriver, opts Options) *Router {
	opts.defaults()
	r := &Router{load: load, next: next, opts: opts}
	r.clusters.Build = r.build
	r.clusters.Started = func(id string, _ *Cluster) {
		r.opts.Log.Info("started the Slurm driver of a cluster", "cluster", id)
	}
	r.Routed.Pick = r.driver
	return r
}

// SetHooks sets the hooks of every driver, next's included.
func (r *Router) SetHooks(h driver.Hooks) {
	r.mu.Lock()
	r.opts.Hooks = h
	r.mu.Unlock()
	r.clusters.Each(func(c *Cluster) { c.SetHooks(h) })
	r.next.SetHooks(h)
}

// Start builds the drivers of the given clusters in the background, so
// their first poll is done before a reclaim needs it.
func (r *Router) Start(ctx context.Context, clusterIDs []string) {
	r.clusters.Start(ctx, clusterIDs, func(id string, err error) {
		r.opts.Log.Warn("cannot start the Slurm driver of a cluster", "cluster", id, "err", err)
	})
}

// Reload forgets the cluster's driver (after an attach or detach).
func (r *Router) Reload(clusterID string) {
	if r.clusters.Reload(clusterID) {
		r.opts.Log.Info("stopped the Slurm driver of a cluster", "cluster", clusterID)
	}
}

// Close stops every cluster's driver; a later call builds them again.
func (r *Router) Close() { r.clusters.Close() }

// Attached returns the driver of a Slurm cluster with a slurm.conf, nil
// for any other.
func (r *Router) Attached(ctx context.Context, clusterID string) (*Cluster, error) {
	return r.clusters.Attached(ctx, clusterID)
}

// build makes the driver of a cluster from its slurm.conf; nil for a
// cluster without one.
func (r *Router) build(ctx context.Context, clusterID string) (*Cluster, error) {
	conf, err := r.load(ctx, clusterID)
	if err != nil {
		return nil, fmt.Errorf("slurm.conf of cluster %s: %w", clusterID, err)
	}
	if conf == nil {
		return nil, nil
	}
	r.mu.Lock()
	opts := r.opts
	r.mu.Unlock()
	return NewCluster(ctx, clusterID, conf, opts)
}

// Driver is the cluster's driver as a platform of driver.Router sees it:
// nil (not a nil *Cluster) for a cluster without a slurm.conf.
func (r *Router) Driver(ctx context.Context, clusterID string) (driver.ClusterDriver, error) {
	c, err := r.Attached(ctx, clusterID)
	if err != nil || c == nil {
		return nil, err
	}
	return c, nil
}

// Known is the cluster's driver if it was looked up already (nil: no
// slurm.conf), never building it.
func (r *Router) Known(clusterID string) (driver.ClusterDriver, bool) {
	c, ok := r.clusters.Known(clusterID)
	if !ok || c == nil {
		return nil, ok
	}
	return c, true
}

func (r *Router) driver(ctx context.Context, clusterID string) (driver.ClusterDriver, error) {
	return driver.Pick(ctx, r, r.next, clusterID)
}

// Load asks next for a cluster that is not a Slurm one, and a Slurm
// cluster's driver for its own (see Cluster.Load), once the cluster has
// been used.
func (r *Router) Load(clusterID, nodeName string) domain.NodeLoad {
	return driver.LoadOn(r, r.next, clusterID, nodeName)
}

// Running asks like Load.
func (r *Router) Running(clusterID, nodeName string) ([]domain.Running, bool) {
	return driver.RunningOn(r, r.next, clusterID, nodeName)
}

var _ driver.ClusterDriver = (*Router)(nil)
var _ driver.Platform = (*Router)(nil)

// Check checks a slurm.conf (ParseConf) and asks the slurmctld it reaches
// for its configuration, with the commands of opts and the copy they get
// (written under opts.Dir, removed before Check returns), and returns an
// error saying why when it refuses the file or slurmctld does not answer:
// what an attach checks before it stores the file.
func Check(ctx context.Context, conf []byte, opts Options) error {
	c, err := newCluster(ctx, "check", conf, opts)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}
