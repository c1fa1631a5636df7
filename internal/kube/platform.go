package kube

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Platform is the Kubernetes platform of driver.Router: the drivers of
// the clusters with a kubeconfig attached.
type Platform = driver.Platform[*Cluster]

// NewPlatform returns the Kubernetes platform: a cluster's driver is a
// Cluster on the API server of the kubeconfig load returns for it, built
// on first use with opts, and kept until Reload.
func NewPlatform(load driver.Loader, opts Options) *Platform {
	opts.defaults()
	return driver.NewPlatform("Kubernetes", load, func(_ context.Context, clusterID string, kubeconfig []byte, hooks driver.Hooks) (*Cluster, error) {
		return build(clusterID, kubeconfig, hooks, opts)
	}, opts.Log)
}

// build makes the driver of a cluster from its kubeconfig, checked first
// (CheckKubeconfig).
func build(clusterID string, kubeconfig []byte, hooks driver.Hooks, opts Options) (*Cluster, error) {
	if err := CheckKubeconfig(kubeconfig, opts.AllowKubeconfigPlugins); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", clusterID, err)
	}
	rc, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", clusterID, err)
	}
	opts.Hooks = hooks
	return NewCluster(clusterID, rc, opts)
}

// LogValue names the driver's API server in the log.
func (c *Cluster) LogValue() slog.Value {
	return slog.GroupValue(slog.String("server", c.host))
}

// Registrar is the "register" machine provider: there is no machine to
// boot, and for an attached cluster it stands in for the kubelet joining
// by creating the Node object and marking it Ready. Clusters without a
// kubeconfig use the fallback provider (the simulation). It is for tests
// and for clusters whose nodes join by other means.
type Registrar struct {
	clusters *Platform
	fallback driver.MachineProvider
	// Every is how often Run posts heartbeats (default HeartbeatEvery).
	Every time.Duration
	// Wall times Run's heartbeats (default: the real clock).
	Wall clock.Clock
	// Log gets a line when a heartbeat fails (default: discarded).
	Log *slog.Logger
}

// NewRegistrar returns the register provider of the clusters of p.
func NewRegistrar(p *Platform, fallback driver.MachineProvider) *Registrar {
	return &Registrar{clusters: p, fallback: fallback}
}

// Prepare registers the node, Ready, in an attached cluster, with the
// capacity a scheduler needs to place pods on it (Capacity), and labelled
// LabelRegistered so Run keeps its heartbeat going.
func (g *Registrar) Prepare(ctx context.Context, m domain.Machine, spec driver.NodeSpec) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c, err := g.clusters.Attached(ctx, spec.ClusterID)
	if err != nil {
		return false, err
	}
	if c == nil {
		return g.fallback.Prepare(ctx, m, spec)
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	gpus := cmp.Or(m.GPUs, spec.GPUs, domain.DefaultGPUsPerMachine)
	if err := registerNode(ctx, c.client, spec.NodeName, map[string]string{LabelRegistered: "true"}, Capacity(gpus), c.opts.Wall.Now()); err != nil {
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
	var wall clock.Clock = clock.Real{}
	if g.Wall != nil {
		wall = g.Wall
	}
	log := g.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-wall.After(cmp.Or(g.Every, HeartbeatEvery)):
		}
		for _, c := range g.clusters.All() {
			if err := c.heartbeat(ctx); err != nil && ctx.Err() == nil {
				log.Warn("register provider heartbeat failed", "err", err)
			}
		}
	}
}

// Wipe has nothing to do: the node object was deleted by the drain.
func (g *Registrar) Wipe(ctx context.Context, m domain.Machine, clusterID, nodeName string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return true, nil
}

var _ driver.MachineProvider = (*Registrar)(nil)
