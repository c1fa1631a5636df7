// Package manager runs the queue integrations (packages admission and
// provreq) for every attached Kubernetes cluster whose API serves them:
// it starts them when a cluster is attached, restarts them with the new
// credentials when it is attached again, stops them when it is detached
// or deleted, and looks again every minute for APIs a tenant installs
// later (Kueue's CRDs, the ProvisioningRequest CRD). The leader runs it.
package manager

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/queues"
	"github.com/sparecap/sparecap/internal/queues/admission"
	"github.com/sparecap/sparecap/internal/queues/provreq"
)

// Fleet is what the manager reads of sparecap.
type Fleet interface {
	queues.Fleet
	// Clusters lists the clusters not deleted.
	Clusters(ctx context.Context) ([]domain.Cluster, error)
}

// Drivers gives the Kubernetes driver of an attached cluster (nil when
// none is attached): the Kubernetes platform, kube.Platform.
type Drivers interface {
	Attached(ctx context.Context, clusterID string) (*kube.Cluster, error)
}

// Options configure the integrations.
type Options struct {
	// Tolerations go on the pod sets the admission check pins to
	// preemptible nodes (the operator's --preemptible-taint).
	Tolerations []corev1.Toleration
	// RequeueAfter is the admission check's requeueAfterSeconds.
	RequeueAfter time.Duration
	// Resync bounds the time between passes (default 5 s); Rediscover is
	// how often a cluster's API is asked again for what it serves
	// (default 1 min).
	Resync, Rediscover time.Duration
	Clock              clock.Clock
	Log                *slog.Logger
	// Refused reports a permission a cluster refused (the controller's
	// RecordAccess); Note records a lifecycle event on a node (its
	// RecordNote).
	Refused func(driver.AccessReport)
	Note    func(driver.NodeNote)
}

// Manager runs the integrations of every attached cluster.
type Manager struct {
	Fleet   Fleet
	Drivers Drivers
	Options
}

// Run runs until ctx ends, then waits for every cluster's integrations to
// stop.
func (m *Manager) Run(ctx context.Context) {
	if m.Clock == nil {
		m.Clock = clock.Real{}
	}
	if m.Log == nil {
		m.Log = slog.New(slog.DiscardHandler)
	}
	if m.Rediscover <= 0 {
		m.Rediscover = time.Minute
	}
	type running struct {
		attachedAt time.Time
		stop       context.CancelFunc
	}
	runs := map[string]running{}
	var wg sync.WaitGroup
	defer wg.Wait()
	changed := m.Fleet.Changed()
	for {
		want := map[string]time.Time{}
		if cs, err := m.Fleet.Clusters(ctx); err != nil {
			if ctx.Err() == nil {
				m.Log.Warn("queue integrations: cannot list clusters", "err", err)
			}
		} else {
			for _, c := range cs {
				if c.Type == domain.ClusterKubernetes && !c.KubeAttachedAt.IsZero() && !c.Deleting {
					want[c.ID] = c.KubeAttachedAt
				} else if c.RequestedPreemptibleGPUs > 0 && !c.Deleting {
					// Detached: its requests can no longer be read, and
					// stop counting.
					if err := m.Fleet.SetRequested(ctx, c.ID, 0); err != nil && ctx.Err() == nil {
						m.Log.Warn("queue integrations: cannot drop a detached cluster's requests", "cluster", c.ID, "err", err)
					}
				}
			}
			for id, r := range runs {
				if at, ok := want[id]; !ok || !at.Equal(r.attachedAt) {
					r.stop()
					delete(runs, id)
				}
			}
			for id, at := range want {
				if _, ok := runs[id]; ok {
					continue
				}
				cctx, stop := context.WithCancel(ctx)
				runs[id] = running{attachedAt: at, stop: stop}
				wg.Go(func() { m.cluster(cctx, id) })
			}
		}
		select {
		case <-ctx.Done():
			for _, r := range runs {
				r.stop()
			}
			return
		case <-changed:
			changed = m.Fleet.Changed()
		case <-m.Clock.After(10 * time.Second):
		}
	}
}

// integration is one controller a cluster's API may serve.
type integration struct {
	name     string
	group    string // the group/version it needs
	resource []string
	run      func(ctx context.Context, c *kube.Cluster, client dynamic.Interface) error
}

func (m *Manager) integrations(clusterID string) []integration {
	return []integration{{
		name: "Kueue admission check", group: "kueue.x-k8s.io/v1beta2",
		resource: []string{"workloads", "admissionchecks", "resourceflavors"},
		run: func(ctx context.Context, c *kube.Cluster, client dynamic.Interface) error {
			return admission.Run(ctx, admission.Config{Base: m.base(clusterID, client), Pods: c,
				Tolerations: m.Tolerations, RequeueAfter: m.RequeueAfter, Note: m.Note})
		},
	}, {
		name: "ProvisioningRequest class", group: "autoscaling.x-k8s.io/v1", resource: []string{"provisioningrequests"},
		run: func(ctx context.Context, c *kube.Cluster, client dynamic.Interface) error {
			return provreq.Run(ctx, provreq.Config{Base: m.base(clusterID, client), Pods: c})
		},
	}}
}

func (m *Manager) base(clusterID string, client dynamic.Interface) queues.Base {
	return queues.Base{ClusterID: clusterID, Client: client, Fleet: m.Fleet, Resync: m.Resync, Clock: m.Clock,
		Log: m.Log, Refused: m.Refused}
}

// cluster runs the integrations one cluster's API serves, asking it again
// every Rediscover for those it did not (and for those that stopped).
func (m *Manager) cluster(ctx context.Context, clusterID string) {
	all := m.integrations(clusterID)
	running := make([]bool, len(all))
	done := make(chan int, len(all))
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		if c, err := m.Drivers.Attached(ctx, clusterID); err != nil {
			if ctx.Err() == nil {
				m.Log.Warn("queue integrations: no driver for the cluster", "cluster", clusterID, "err", err)
			}
		} else if c != nil {
			m.start(ctx, c, all, running, done, &wg)
		}
		select {
		case <-ctx.Done():
			return
		case i := <-done:
			running[i] = false
		case <-m.Clock.After(m.Rediscover):
		}
	}
}

// start starts the integrations not running whose API c serves.
func (m *Manager) start(ctx context.Context, c *kube.Cluster, all []integration, running []bool, done chan<- int, wg *sync.WaitGroup) {
	rc := c.RESTConfig()
	// Discovery takes no context: a bound, so a cluster whose API hangs
	// cannot hold up the term's end.
	drc := rest.CopyConfig(rc)
	drc.Timeout = 10 * time.Second
	disc, err := discovery.NewDiscoveryClientForConfig(drc)
	if err != nil {
		m.Log.Warn("queue integrations: discovery client", "cluster", c.ID(), "err", err)
		return
	}
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		m.Log.Warn("queue integrations: client", "cluster", c.ID(), "err", err)
		return
	}
	for i, in := range all {
		if running[i] || !serves(disc, in.group, in.resource) {
			continue
		}
		running[i] = true
		wg.Go(func() {
			if err := in.run(ctx, c, client); err != nil && ctx.Err() == nil {
				m.Log.Warn("queue integration stopped", "cluster", c.ID(), "integration", in.name, "err", err)
			}
			done <- i
		})
	}
}

// serves reports whether the API serves every resource of groupVersion.
func serves(disc discovery.DiscoveryInterface, groupVersion string, resources []string) bool {
	list, err := disc.ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return false
	}
	have := map[string]bool{}
	for _, r := range list.APIResources {
		have[r.Name] = true
	}
	for _, r := range resources {
		if !have[r] {
			return false
		}
	}
	return true
}
