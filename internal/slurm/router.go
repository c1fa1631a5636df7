package slurm

import (
	"context"
	"fmt"
	"sync"

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
	opts          Options

	mu       sync.Mutex
	clusters map[string]*Cluster // nil value: not Slurm, use next
}

// NewRouter returns a router.
func NewRouter(load Loader, next driver.ClusterDriver, opts Options) *Router {
	opts.defaults()
	r := &Router{load: load, next: next, opts: opts, clusters: map[string]*Cluster{}}
	r.Routed.Pick = r.driver
	return r
}

// SetHooks sets the hooks of every driver, next's included.
func (r *Router) SetHooks(h driver.Hooks) {
	r.mu.Lock()
	r.opts.Hooks = h
	for _, c := range r.clusters {
		if c != nil {
			c.SetHooks(h)
		}
	}
	r.mu.Unlock()
	r.next.SetHooks(h)
}

// Start builds the drivers of the given clusters in the background, so
// their first poll is done before a reclaim needs it.
func (r *Router) Start(ctx context.Context, clusterIDs []string) {
	for _, id := range clusterIDs {
		go func() {
			if _, err := r.Attached(ctx, id); err != nil && ctx.Err() == nil {
				r.opts.Log.Warn("cannot start the Slurm driver of a cluster", "cluster", id, "err", err)
			}
		}()
	}
}

// Reload forgets the cluster's driver (after an attach or detach).
func (r *Router) Reload(clusterID string) {
	r.mu.Lock()
	c, ok := r.clusters[clusterID]
	delete(r.clusters, clusterID)
	r.mu.Unlock()
	if ok && c != nil {
		c.Close()
		r.opts.Log.Info("stopped the Slurm driver of a cluster", "cluster", clusterID)
	}
}

// Close stops every cluster's driver; a later call builds them again.
func (r *Router) Close() {
	r.mu.Lock()
	cs := r.clusters
	r.clusters = map[string]*Cluster{}
	r.mu.Unlock()
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// Attached returns the driver of a Slurm cluster with a slurm.conf, nil
// for any other.
func (r *Router) Attached(ctx context.Context, clusterID string) (*Cluster, error) {
	r.mu.Lock()
	c, ok := r.clusters[clusterID]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	conf, err := r.load(ctx, clusterID)
	if err != nil {
		return nil, fmt.Errorf("slurm.conf of cluster %s: %w", clusterID, err)
	}
	if conf != nil {
		r.mu.Lock()
		opts := r.opts
		r.mu.Unlock()
		if c, err = NewCluster(ctx, clusterID, conf, opts); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if have, ok := r.clusters[clusterID]; ok {
		if c != nil {
			c.Close()
		}
		return have, nil
	}
	r.clusters[clusterID] = c
	if c != nil {
		r.opts.Log.Info("started the Slurm driver of a cluster", "cluster", clusterID)
	}
	return c, nil
}

func (r *Router) driver(ctx context.Context, clusterID string) (driver.ClusterDriver, error) {
	c, err := r.Attached(ctx, clusterID)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return r.next, nil
	}
	return c, nil
}

// Idle asks next for a cluster that is not a Slurm one, once the cluster
// has been used; a Slurm cluster's nodes are not known idle (its jobs
// are read by polling, which the controller does not wait for while it
// plans).
func (r *Router) Idle(clusterID, nodeName string) (idle, known bool) {
	r.mu.Lock()
	c, ok := r.clusters[clusterID]
	r.mu.Unlock()
	if !ok || c != nil {
		return false, false
	}
	return driver.IdleOf(r.next, clusterID, nodeName)
}

var _ driver.ClusterDriver = (*Router)(nil)
var _ driver.IdleReporter = (*Router)(nil)

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
