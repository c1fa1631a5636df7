// Package kube drives tenants' Kubernetes clusters with client-go: it
// implements driver.ClusterDriver against each attached cluster's API
// server (Cluster), routes every call to the right cluster or to the
// simulated driver for clusters without a kubeconfig (Router), and can
// stand in for a kubelet joining, for clusters whose nodes register by
// other means (Registrar).
//
// Reading the pods on a node goes through an informer (a watch, not
// polling), which also tells the controller the moment a draining node's
// last pod is gone so it is released early. Every call is bounded by a
// timeout; retries with backoff are the controller's (see
// internal/controller).
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

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
	NodeTaints        []driver.Taint
	PreemptibleTaints []driver.Taint
	// Clock is what deadlines are measured on (default: the real clock).
	Clock clock.Clock
	// OnPodsGone is called when the last workload pod on a node goes
	// (from the pod watch), so a draining node is released at once.
	OnPodsGone func()
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
	client kubernetes.Interface
	opts   Options
	pods   cache.SharedIndexInformer
	stop   chan struct{}
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
}

const byNode = "node"

// NewCluster connects to a cluster's API server and starts watching its
// pods. Close stops the watch.
func NewCluster(id string, rc *rest.Config, opts Options) (*Cluster, error) {
	opts.defaults()
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = opts.QPS, opts.Burst
	rc.UserAgent = "sparecap"
	// Protobuf costs the API server and us far less CPU than JSON for the
	// pod watch and the writes of a mass reclaim (custom resources, which
	// we do not use, would need JSON).
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	c := &Cluster{id: id, host: rc.Host, client: client, opts: opts, stop: make(chan struct{}),
		slots: make(chan struct{}, opts.InFlight), eventSlots: make(chan struct{}, min(eventSlots, opts.InFlight))}
	c.urgent.idle = make(chan struct{})
	close(c.urgent.idle)
	c.pods = informers.NewSharedInformerFactory(client, 0).Core().V1().Pods().Informer()
	if err := c.pods.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	// The cache holds every pod of the cluster: keep only what draining
	// needs.
	if err := c.pods.SetTransform(trimPod); err != nil {
		return nil, err
	}
	if _, err := c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok && exited(p) {
				c.podGone(p.Spec.NodeName)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				c.podGone(p.Spec.NodeName)
			}
		},
	}); err != nil {
		return nil, err
	}
	go c.pods.Run(c.stop)
	return c, nil
}

// Close stops the pod watch.
func (c *Cluster) Close() { close(c.stop) }

// Client is the cluster's client (for the Registrar and tests).
func (c *Cluster) Client() kubernetes.Interface { return c.client }

func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{}
	t.Name, t.Namespace, t.UID, t.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	t.DeletionTimestamp, t.OwnerReferences = p.DeletionTimestamp, p.OwnerReferences
	if v, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		t.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
	}
	t.Spec.NodeName, t.Spec.TerminationGracePeriodSeconds = p.Spec.NodeName, p.Spec.TerminationGracePeriodSeconds
	t.Status.Phase = p.Status.Phase
	return t, nil
}

func exited(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podGone tells the controller when a node has no workload pods left.
func (c *Cluster) podGone(node string) {
	if node == "" || c.opts.OnPodsGone == nil {
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
	c.opts.OnPodsGone()
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

// AddNode registers the node (creates its Node object) or adopts the one
// its kubelet registered, adding sparecap's labels and the configured
// taints, and returns nil once the node is Ready.
func (c *Cluster) AddNode(ctx context.Context, spec driver.NodeSpec) error {
	if err := c.check(spec.ClusterID); err != nil {
		return err
	}
	labels := maps.Clone(c.opts.NodeLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, spec.Labels)
	taints := append([]driver.Taint(nil), c.opts.NodeTaints...)
	if spec.Class == domain.Preemptible {
		taints = append(taints, c.opts.PreemptibleTaints...)
	}
	var node *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		ctx, cancel := c.call(ctx)
		defer cancel()
		n, err := c.client.CoreV1().Nodes().Get(ctx, spec.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: spec.NodeName, Labels: labels}}
			for _, t := range taints {
				n.Spec.Taints = append(n.Spec.Taints, kubeTaint(t))
			}
			node, err = c.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		changed := false
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for k, v := range labels {
			if n.Labels[k] != v {
				n.Labels[k], changed = v, true
			}
		}
		for _, t := range taints {
			changed = setTaint(n, t) || changed
		}
		if changed {
			n, err = c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		node = n
		return err
	})
	if err != nil {
		return fmt.Errorf("register node %s: %w", spec.NodeName, err)
	}
	if !Ready(node) {
		return fmt.Errorf("node %s: %w", spec.NodeName, driver.ErrNotReady)
	}
	return nil
}

// Ready reports the node's Ready condition.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func kubeTaint(t driver.Taint) corev1.Taint {
	return corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
}

// setTaint adds t or updates the taint with its key and effect (the same
// taint to Kubernetes); it reports whether anything changed.
func setTaint(n *corev1.Node, t driver.Taint) bool {
	kt := kubeTaint(t)
	for i, have := range n.Spec.Taints {
		if have.Key == kt.Key && have.Effect == kt.Effect {
			if have.Value == kt.Value {
				return false
			}
			n.Spec.Taints[i].Value = kt.Value
			return true
		}
	}
	n.Spec.Taints = append(n.Spec.Taints, kt)
	return true
}

func (c *Cluster) patchNode(ctx context.Context, clusterID, name, what string, patch any) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	return notFound(err, what+" node "+name)
}

// Cordon sets spec.unschedulable.
func (c *Cluster) Cordon(ctx context.Context, clusterID, nodeName string) error {
	c.draining.Store(nodeName, struct{}{})
	return c.patchNode(ctx, clusterID, nodeName, "cordon", map[string]any{"spec": map[string]any{"unschedulable": true}})
}

// Annotate sets an annotation on the node.
func (c *Cluster) Annotate(ctx context.Context, clusterID, nodeName, key, value string) error {
	return c.patchNode(ctx, clusterID, nodeName, "annotate", map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
}

// Taint adds the taint (read, modify, write: a merge patch would replace
// the node's whole list of taints).
func (c *Cluster) Taint(ctx context.Context, clusterID, nodeName string, t driver.Taint) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		ctx, cancel := c.call(ctx)
		defer cancel()
		n, err := c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil || !setTaint(n, t) {
			return err
		}
		_, err = c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	return notFound(err, "taint node "+nodeName)
}

// MarkDraining cordons, taints and annotates the node in one update.
func (c *Cluster) MarkDraining(ctx context.Context, clusterID, nodeName string, t driver.Taint, annotations map[string]string) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	c.draining.Store(nodeName, struct{}{})
	ctx, done := c.call(ctx)
	defer done()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed := setTaint(n, t) || !n.Spec.Unschedulable
		n.Spec.Unschedulable = true
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		for k, v := range annotations {
			if n.Annotations[k] != v {
				n.Annotations[k], changed = v, true
			}
		}
		if !changed {
			return nil
		}
		_, err = c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	return notFound(err, "mark node "+nodeName)
}

var _ driver.Marker = (*Cluster)(nil)

// eventName names an Event after what it is about and says, so posting it
// again (after a crash) finds it there instead of adding another.
func eventName(object string, e driver.NodeEvent) string {
	h := fnv.New64a()
	h.Write([]byte(e.Type + "\x00" + e.Reason + "\x00" + e.Message))
	return fmt.Sprintf("%s.sparecap-%016x", object, h.Sum64())
}

func (c *Cluster) postEvent(ctx context.Context, ref corev1.ObjectReference, e driver.NodeEvent) error {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(ref.Name, e), Namespace: ref.Namespace},
		InvolvedObject:      ref,
		Type:                e.Type,
		Reason:              e.Reason,
		Message:             e.Message,
		Source:              corev1.EventSource{Component: "sparecap"},
		ReportingController: "sparecap.dev/controller",
		ReportingInstance:   "sparecap",
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
	if ev.Namespace == "" {
		ev.Namespace = metav1.NamespaceDefault // where kubectl looks for node events
	}
	ctx, cancel := c.eventCall(ctx)
	defer cancel()
	_, err := c.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// PostEvent posts an Event involving the node.
func (c *Cluster) PostEvent(ctx context.Context, clusterID, nodeName string, e driver.NodeEvent) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	return c.postEvent(ctx, corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeName, UID: types.UID(nodeName)}, e)
}

// PostPodEvent posts an Event involving the pod, in its namespace.
func (c *Cluster) PostPodEvent(ctx context.Context, clusterID, nodeName string, p driver.Pod, e driver.NodeEvent) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	return c.postEvent(ctx, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: types.UID(p.UID)}, e)
}

// ListPods lists the node's pods that have not exited, from the watch's
// cache (no API call once it has synced). Mirror pods are left out: they
// are the kubelet's static pods, which go with the node.
func (c *Cluster) ListPods(ctx context.Context, clusterID, nodeName string) ([]driver.Pod, error) {
	if err := c.check(clusterID); err != nil {
		return nil, err
	}
	// The controller lists the pods of draining nodes only (also after a
	// restart, when it does not cordon again).
	c.draining.Store(nodeName, struct{}{})
	if !c.pods.HasSynced() {
		ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout) // no API call: no slot
		defer cancel()
		if !cache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced) {
			return nil, fmt.Errorf("list pods on %s: the pod watch of cluster %s has not synced", nodeName, c.id)
		}
	}
	objs, err := c.pods.GetIndexer().ByIndex(byNode, nodeName)
	if err != nil {
		return nil, err
	}
	out := make([]driver.Pod, 0, len(objs))
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if exited(p) {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if p.Spec.TerminationGracePeriodSeconds != nil {
			grace = *p.Spec.TerminationGracePeriodSeconds
		}
		out = append(out, driver.Pod{
			Namespace: p.Namespace, Name: p.Name, UID: string(p.UID),
			TerminationGracePeriod: time.Duration(grace) * time.Second,
			Terminating:            p.DeletionTimestamp != nil,
			DaemonSet:              isDaemon(p),
		})
	}
	return out, nil
}

// DeletePod deletes the pod with the grace period (whole seconds); the
// UID precondition keeps a pod recreated under the same name safe.
func (c *Cluster) DeletePod(ctx context.Context, clusterID, nodeName string, p driver.Pod, grace time.Duration) error {
	return c.deletePod(ctx, clusterID, p, func() time.Duration { return grace })
}

// DeletePodBy deletes the pod so that it is gone by by, reading the clock
// once it has its slot, just before the call.
func (c *Cluster) DeletePodBy(ctx context.Context, clusterID, nodeName string, p driver.Pod, by time.Time) error {
	return c.deletePod(ctx, clusterID, p, func() time.Duration { return driver.GraceBy(p, by, c.opts.Clock.Now()) })
}

var _ driver.DeadlineDeleter = (*Cluster)(nil)

func (c *Cluster) deletePod(ctx context.Context, clusterID string, p driver.Pod, grace func() time.Duration) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	secs := int64(max(grace(), 0) / time.Second)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &secs}
	if p.UID != "" {
		uid := types.UID(p.UID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or replaced by another pod of that name
	}
	return err
}

// DeleteNode deletes the Node object.
func (c *Cluster) DeleteNode(ctx context.Context, clusterID, nodeName string) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	ctx, cancel := c.call(ctx)
	defer cancel()
	err := c.client.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		c.draining.Delete(nodeName)
		return nil
	}
	return err
}

var _ driver.ClusterDriver = (*Cluster)(nil)
