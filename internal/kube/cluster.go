// Package kube drives tenants' Kubernetes clusters with client-go: it
// implements driver.ClusterDriver against each attached cluster's API
// server (Cluster), built from the cluster's kubeconfig as the Kubernetes
// platform of driver.Router (NewPlatform), and can stand in for a kubelet
// joining, for clusters whose nodes register by other means (Registrar).
//
// Reading the pods on a node goes through an informer (a watch, not
// polling), which also tells the controller the moment a draining node's
// last pod is gone so it is released early. Every call is bounded by a
// timeout; retries with backoff are the controller's (see
// internal/controller).
package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Defaults for Options. client-go's own default of 5 QPS (burst 10) would
// take minutes to SIGTERM the pods of fifty nodes reclaimed at once; a
// controller that drains many nodes needs hundreds, and API Priority and
// Fairness on the server side keeps that from starving anyone.
//
// DefaultInFlight bounds the calls in flight to one API server: past a few
// dozen concurrent writes an API server and its etcd spend their time
// queueing (measured on the test server: 300 pod deletions took 0.23 s at
// 64 at once and 1.6 s at 256), so more concurrency delivers notices later.
const (
	DefaultQPS      = 500
	DefaultBurst    = 1000
	DefaultTimeout  = 10 * time.Second
	DefaultInFlight = 48
)

// eventSlots of the in-flight calls may carry Events, so that the pod
// deletions (SIGTERM) of fifty nodes are not queued behind the Events of
// the first ones.
const eventSlots = 8

// Options apply to every cluster's driver.
type Options struct {
	// QPS and Burst are the client-side rate limits per cluster.
	QPS   float32
	Burst int
	// Timeout bounds each API call.
	Timeout time.Duration
	// InFlight bounds the calls in flight to the cluster's API server.
	InFlight int
	// NodeLabels and NodeTaints are added to every node sparecap
	// registers or adopts; PreemptibleTaints to preemptible nodes only
	// (to keep pods that do not tolerate preemption off them).
	NodeLabels        map[string]string
	NodeTaints        []Taint
	PreemptibleTaints []Taint
	// Clock is what deadlines are measured on (default: the real clock).
	Clock clock.Clock
	// Wall is what the cluster reads as a kubelet's time: the register
	// provider's heartbeats, whatever speed Clock runs at (default: the
	// real clock).
	Wall clock.Clock
	// Hooks tell the controller what the watches see (see
	// driver.Hooks): the last workload pod on a draining node gone (it is
	// released at once), a managed Node deleted or changing readiness (a
	// lost node), what the driver learns of the cluster's permissions
	// (the check each driver makes when it starts, and each permission a
	// call was refused, once, not once per pod). The platform
	// (NewPlatform) sets them for every cluster.
	Hooks driver.Hooks
	// RegisterNodes: the register machine provider creates Nodes and
	// reports them Ready, so the permission check asks for that too.
	RegisterNodes bool
	// Instance names this server in the Events it posts (their
	// reportingInstance and source host); default: the host name.
	Instance string
	// AllowKubeconfigPlugins: kubeconfigs with exec credential plugins,
	// auth providers or a proxy URL are used (see CheckKubeconfig);
	// otherwise a stored one that has them is refused when loaded.
	AllowKubeconfigPlugins bool
	// Log gets a line when a cluster's driver starts or stops.
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.InFlight <= 0 {
		o.InFlight = DefaultInFlight
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Wall == nil {
		o.Wall = clock.Real{}
	}
	if o.Instance == "" {
		o.Instance, _ = os.Hostname()
		o.Instance = cmp.Or(o.Instance, "sparecap")
	}
}

// RESTConfig parses a kubeconfig (its current context) into a client
// configuration, with a clear error when it cannot be used.
func RESTConfig(kubeconfig []byte) (*rest.Config, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("parse kubeconfig: %w", err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if rc.Host == "" {
		return nil, errors.New("kubeconfig: the current context names no server")
	}
	return rc, nil
}

// Cluster is the driver of one cluster's API server.
type Cluster struct {
	id     string
	host   string // the API server
	rc     *rest.Config
	client kubernetes.Interface
	opts   Options
	pods   cache.SharedIndexInformer
	// nodes watches the cluster's Node objects: adopting and marking
	// read them, and a managed Node deleted or NotReady is a lost node.
	nodes cache.SharedIndexInformer
	// budgets watches PodDisruptionBudgets where the cluster grants it.
	budgets budgets
	stop    chan struct{}
	// slots and eventSlots bound calls in flight (see DefaultInFlight).
	slots      chan struct{}
	eventSlots chan struct{}
	// urgent counts the other calls waiting or in flight: Events wait
	// until there are none, so every SIGTERM of a mass reclaim goes out
	// before the Events that explain it.
	urgent struct {
		sync.Mutex
		n    int
		idle chan struct{} // closed while n == 0
	}
	// draining are the nodes being drained (their pods were listed or
	// they were cordoned, until they are deleted): only their pods'
	// exits wake the controller, not every pod deletion in the cluster.
	draining sync.Map // node name -> struct{}
	// checkpoints are the latest checkpoints the pods of draining nodes
	// reported, kept after the pods go (Load), so a checkpoint on the way
	// out counts for the lost-work ledger: node name -> time.Time.
	checkpoints sync.Map
	// refused are the permissions the cluster refused (see may).
	refused refusals
	// hooksNow are Options.Hooks, or those SetHooks set since.
	hooksNow atomic.Pointer[driver.Hooks]
}

const byNode = "node"

// NewCluster connects to a cluster's API server and starts watching its
// pods. Close stops the watch.
func NewCluster(id string, rc *rest.Config, opts Options) (*Cluster, error) {
	opts.defaults()
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = opts.QPS, opts.Burst
	rc.UserAgent = "sparecap"
	// Custom resources (the queue integrations') speak JSON.
	jsonRC := rest.CopyConfig(rc)
	// Protobuf costs the API server and us far less CPU than JSON for the
	// pod watch and the writes of a mass reclaim (custom resources, which
	// we do not use, would need JSON).
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	c := &Cluster{id: id, host: rc.Host, rc: jsonRC, client: client, opts: opts, stop: make(chan struct{}),
		slots: make(chan struct{}, opts.InFlight), eventSlots: make(chan struct{}, min(eventSlots, opts.InFlight))}
	c.urgent.idle = make(chan struct{})
	close(c.urgent.idle)
	c.SetHooks(opts.Hooks)
	factory := informers.NewSharedInformerFactory(client, 0)
	c.pods = factory.Core().V1().Pods().Informer()
	c.nodes = factory.Core().V1().Nodes().Informer()
	if err := c.watchNodes(); err != nil {
		return nil, err
	}
	if err := c.watchPods(); err != nil {
		return nil, err
	}
	go c.pods.Run(c.stop)
	go c.nodes.Run(c.stop)
	go c.checkAccess()
	return c, nil
}

// watchNodes keeps the node cache trimmed and wakes a managed node's step
// when it registers, its readiness or marks change, or it goes.
func (c *Cluster) watchNodes() error {
	if err := c.nodes.SetTransform(trimNode); err != nil {
		return err
	}
	_, err := c.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok && managed(n) {
				c.wake(n.Name) // registered: its provisioning step asks again
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if ok1 && ok2 && managed(n) && (Ready(o) != Ready(n) || c.unmarked(o, n)) {
				c.wake(n.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok && managed(n) {
				c.wake(n.Name)
			}
		},
	})
	return err
}

// watchPods indexes the pod cache by node, workload and what a pod
// consumes, keeps only what draining needs, and wakes a node's step when
// a pod on it binds or ends.
func (c *Cluster) watchPods() error {
	if err := c.pods.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}, byWorkload: podIndexers[byWorkload], byConsumes: podIndexers[byConsumes]}); err != nil {
		return err
	}
	// The cache holds every pod of the cluster: keep only what draining
	// needs.
	if err := c.pods.SetTransform(trimPod); err != nil {
		return err
	}
	_, err := c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				c.podBound(p)
			}
		},
		UpdateFunc: func(old, obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				c.keepCheckpoint(p)
				switch o, _ := old.(*corev1.Pod); {
				case exited(p):
					c.podGone(p.Spec.NodeName)
				case o != nil && o.Spec.NodeName == "":
					c.podBound(p)
				}
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				c.keepCheckpoint(p)
				c.podGone(p.Spec.NodeName)
			}
		},
	})
	return err
}

// managed: the Node is one of sparecap's (it carries the node-id label).
func managed(n *corev1.Node) bool { return n.Labels[domain.LabelNodeID] != "" }

// wake tells the controller that something its step waits for changed
// for node name: that node's turn runs now.
func (c *Cluster) wake(name string) {
	if f := c.hooks().Wake; f != nil && name != "" {
		f(c.id, name, time.Time{})
	}
}

// Tells: the driver's watches wake a node whenever what its step waits
// for changes (see wake's callers).
func (c *Cluster) Tells(string) bool { return true }

// unmarked: n, draining, lost a mark o had (someone uncordoned it or
// removed its taint or deadline): its drain puts them back.
func (c *Cluster) unmarked(o, n *corev1.Node) bool {
	if _, ok := c.draining.Load(n.Name); !ok {
		return false
	}
	_, hadDeadline := o.Annotations[domain.AnnotationDeadline]
	_, hasDeadline := n.Annotations[domain.AnnotationDeadline]
	return (o.Spec.Unschedulable && !n.Spec.Unschedulable) || (hadDeadline && !hasDeadline) || len(n.Spec.Taints) < len(o.Spec.Taints)
}

// podBound wakes a draining node a pod was bound to after its notice:
// the pod gets its own notice.
func (c *Cluster) podBound(p *corev1.Pod) {
	if _, ok := c.draining.Load(p.Spec.NodeName); ok && !exited(p) {
		c.wake(p.Spec.NodeName)
	}
}

// SetHooks replaces the hooks the driver was built with.
func (c *Cluster) SetHooks(h driver.Hooks) { c.hooksNow.Store(&h) }

func (c *Cluster) hooks() driver.Hooks { return *c.hooksNow.Load() }

// trimNode keeps what adopting, marking and health need of a Node.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	t := &corev1.Node{}
	t.Name, t.UID, t.ResourceVersion, t.CreationTimestamp = n.Name, n.UID, n.ResourceVersion, n.CreationTimestamp
	t.Labels = n.Labels
	t.Annotations = keep(n.Annotations, domain.AnnotationDeadline, domain.AnnotationPreemptAt)
	t.Spec.Unschedulable, t.Spec.Taints = n.Spec.Unschedulable, n.Spec.Taints
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			t.Status.Conditions = []corev1.NodeCondition{cond}
		}
	}
	return t, nil
}

// keep is the entries of m named by keys (nil if none): what a trimmed
// object keeps of its annotations.
func keep(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// cachedNode is the node as the watch last saw it; nil when the watch has
// not synced or has no such node.
func (c *Cluster) cachedNode(name string) *corev1.Node {
	if !c.nodes.HasSynced() {
		return nil
	}
	obj, ok, err := c.nodes.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	return obj.(*corev1.Node)
}

// Close stops the driver: its pod and node watches, and any permission
// check still running. It reports nothing after that.
func (c *Cluster) Close() { close(c.stop) }

// Client is the cluster's client (for the Registrar and tests).
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// RESTConfig is a copy of the cluster's client configuration, with the
// driver's rate limits and JSON (custom resources have no protobuf), for
// the queue integrations' clients of Kueue's and ProvisioningRequests'
// resources.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.rc) }

// ID is the sparecap cluster the driver drives.
func (c *Cluster) ID() string { return c.id }

func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{}
	t.Name, t.Namespace, t.UID, t.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	t.DeletionTimestamp, t.OwnerReferences = p.DeletionTimestamp, p.OwnerReferences
	t.Annotations = keep(p.Annotations, corev1.MirrorPodAnnotationKey, domain.AnnotationPreemptAt)
	t.Spec.NodeName, t.Spec.TerminationGracePeriodSeconds = p.Spec.NodeName, p.Spec.TerminationGracePeriodSeconds
	if readsDeadline(p) {
		t.Spec.Volumes = deadlineReader // what readsDeadline looks for, shared
	}
	trimQueue(t, p)
	trimLoad(t, p)
	t.Status.Phase = p.Status.Phase
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget {
			t.Status.Conditions = []corev1.PodCondition{cond}
		}
	}
	return t, nil
}

func exited(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// keepCheckpoint remembers the checkpoint a pod of a draining node
// reported, the latest of the node's.
func (c *Cluster) keepCheckpoint(p *corev1.Pod) {
	node := p.Spec.NodeName
	if _, ok := c.draining.Load(node); !ok || node == "" {
		return
	}
	t, err := time.Parse(time.RFC3339, p.Annotations[domain.AnnotationLastCheckpoint])
	if err != nil {
		return
	}
	if prev, ok := c.checkpoints.Load(node); ok && !t.After(prev.(time.Time)) {
		return
	}
	c.checkpoints.Store(node, t)
}

// podGone wakes a draining node whose workload is gone: it can go now,
// or give its support pods their notice (each of whose ends wakes it
// again, the last one to go).
func (c *Cluster) podGone(node string) {
	if node == "" {
		return
	}
	if _, ok := c.draining.Load(node); !ok {
		return
	}
	objs, err := c.pods.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return
	}
	for _, o := range objs {
		if p := o.(*corev1.Pod); !exited(p) && !isDaemon(p) {
			return
		}
	}
	c.wake(node)
}

func isDaemon(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

// call takes a slot for one API call (waiting for it counts against the
// call's timeout) and bounds the call by the timeout; done gives both
// back.
func (c *Cluster) call(ctx context.Context) (context.Context, context.CancelFunc) {
	c.urgent.Lock()
	if c.urgent.n++; c.urgent.n == 1 {
		c.urgent.idle = make(chan struct{})
	}
	c.urgent.Unlock()
	ctx, done := c.take(ctx, c.slots)
	return ctx, func() {
		done()
		c.urgent.Lock()
		if c.urgent.n--; c.urgent.n == 0 {
			close(c.urgent.idle)
		}
		c.urgent.Unlock()
	}
}

// eventCall is call for an Event: it waits for the urgent calls first.
func (c *Cluster) eventCall(ctx context.Context) (context.Context, context.CancelFunc) {
	c.urgent.Lock()
	idle := c.urgent.idle
	c.urgent.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
	return c.take(ctx, c.eventSlots, c.slots)
}

func (c *Cluster) take(ctx context.Context, slots ...chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	var held []chan struct{}
	for _, s := range slots {
		select {
		case s <- struct{}{}:
			held = append(held, s)
		case <-ctx.Done():
			// The call fails at once with ctx's error.
		}
	}
	return ctx, func() {
		for _, s := range held {
			<-s
		}
		cancel()
	}
}

func (c *Cluster) check(clusterID string) error {
	if clusterID != c.id {
		return fmt.Errorf("kube: driver of cluster %s called for cluster %s", c.id, clusterID)
	}
	return nil
}

// notFound wraps a Kubernetes NotFound as domain.ErrNotFound.
func notFound(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w", what, domain.ErrNotFound)
	}
	return err
}

var _ driver.ClusterDriver = (*Cluster)(nil)
