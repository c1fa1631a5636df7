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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"os"
	"slices"
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
	// OnNodeChange is called when a Node object sparecap manages is
	// deleted or its Ready condition changes (from the node watch), so
	// the controller checks for lost nodes at once.
	OnNodeChange func()
	// OnAccess is told what the driver learns of the permissions a
	// cluster grants: the check each driver makes when it starts, and
	// each permission a call was refused (once, not once per pod). It
	// must not block or call the driver.
	OnAccess func(driver.AccessReport)
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
	client kubernetes.Interface
	opts   Options
	pods   cache.SharedIndexInformer
	// nodes watches the cluster's Node objects: adopting and marking
	// read them, and a managed Node deleted or NotReady is a lost node.
	nodes cache.SharedIndexInformer
	stop  chan struct{}
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
	// refused are the permissions the cluster refused (see may).
	refused refusals
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
	factory := informers.NewSharedInformerFactory(client, 0)
	c.pods = factory.Core().V1().Pods().Informer()
	c.nodes = factory.Core().V1().Nodes().Informer()
	if err := c.nodes.SetTransform(trimNode); err != nil {
		return nil, err
	}
	if _, err := c.nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if ok1 && ok2 && managed(n) && Ready(o) != Ready(n) {
				c.nodeChanged()
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok && managed(n) {
				c.nodeChanged()
			}
		},
	}); err != nil {
		return nil, err
	}
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
	go c.nodes.Run(c.stop)
	go c.checkAccess()
	return c, nil
}

// managed: the Node is one of sparecap's (it carries the node-id label).
func managed(n *corev1.Node) bool { return n.Labels[domain.LabelNodeID] != "" }

func (c *Cluster) nodeChanged() {
	if c.opts.OnNodeChange != nil {
		c.opts.OnNodeChange()
	}
}

// trimNode keeps what adopting, marking and health need of a Node.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	t := &corev1.Node{}
	t.Name, t.UID, t.ResourceVersion, t.CreationTimestamp = n.Name, n.UID, n.ResourceVersion, n.CreationTimestamp
	t.Labels = n.Labels
	if v, ok := n.Annotations[domain.AnnotationDeadline]; ok {
		t.Annotations = map[string]string{domain.AnnotationDeadline: v}
	}
	t.Spec.Unschedulable, t.Spec.Taints = n.Spec.Unschedulable, n.Spec.Taints
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			t.Status.Conditions = []corev1.NodeCondition{cond}
		}
	}
	return t, nil
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

// Health reports what the node watch says of the node. Before the watch
// has synced nothing can be told: a node missing from an empty cache is
// not a deleted node.
func (c *Cluster) Health(ctx context.Context, clusterID, nodeName string) (driver.NodeHealth, error) {
	if err := c.check(clusterID); err != nil {
		return driver.NodeHealth{}, err
	}
	if !c.nodes.HasSynced() {
		return driver.NodeHealth{}, fmt.Errorf("the node watch of cluster %s has not synced", c.id)
	}
	obj, ok, err := c.nodes.GetStore().GetByKey(nodeName)
	if err != nil {
		return driver.NodeHealth{}, err
	}
	if !ok {
		return driver.NodeHealth{Gone: true}, nil
	}
	n := obj.(*corev1.Node)
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return driver.NodeHealth{}, nil
			}
			return driver.NodeHealth{NotReadySince: cmp.Or(cond.LastTransitionTime.Time, n.CreationTimestamp.Time)}, nil
		}
	}
	return driver.NodeHealth{NotReadySince: n.CreationTimestamp.Time}, nil
}

var _ driver.NodeWatcher = (*Cluster)(nil)

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
	if readsDeadline(p) {
		t.Spec.Volumes = deadlineReader // what readsDeadline looks for, shared
	}
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

// AddNode adopts the node once its kubelet (or the register provider)
// has registered it: sparecap never creates the Node itself, so the
// kubelet's own registration (its --node-labels, --register-with-taints,
// --provider-id) is kept. It patches in sparecap's labels and the
// configured taints and returns nil once the node is Ready; until the
// Node exists, or while it is not Ready, an error wrapping
// driver.ErrNotReady.
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
	perm := permGetNodes
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		ctx, cancel := c.call(ctx)
		defer cancel()
		perm = permGetNodes
		n, err := c.client.CoreV1().Nodes().Get(ctx, spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		meta := map[string]any{"resourceVersion": n.ResourceVersion}
		patch := map[string]any{"metadata": meta}
		add := missing(n.Labels, labels)
		if len(add) > 0 {
			meta["labels"] = add
		}
		want := slices.Clone(n.Spec.Taints)
		changed := false
		for _, t := range taints {
			want, changed = withTaint(want, t)
		}
		if changed {
			patch["spec"] = map[string]any{"taints": want}
		}
		if len(add) == 0 && !changed {
			node = n
			return nil
		}
		perm = permPatchNodes
		node, err = c.patch(ctx, spec.NodeName, patch)
		return err
	})
	if err != nil {
		c.refusal(perm, spec.NodeName, err)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s has not registered with the cluster yet: %w", spec.NodeName, driver.ErrNotReady)
	}
	if err != nil {
		return fmt.Errorf("adopt node %s: %w", spec.NodeName, err)
	}
	if !Ready(node) {
		return fmt.Errorf("node %s: %w", spec.NodeName, driver.ErrNotReady)
	}
	return nil
}

// missing returns the entries of want that have does not have (or has
// with another value).
func missing(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if have[k] != v {
			out[k] = v
		}
	}
	return out
}

// patch applies a JSON merge patch to the Node. A patch carrying
// metadata.resourceVersion is refused with a Conflict when the Node
// changed since it was read: the caller reads again and retries, so a
// list it replaces (taints) never loses someone else's change.
func (c *Cluster) patch(ctx context.Context, name string, patch map[string]any) (*corev1.Node, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	return c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
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

// withTaint returns taints with t added, or the taint with t's key and
// effect (the same taint to Kubernetes) given t's value; it reports
// whether anything changed.
func withTaint(taints []corev1.Taint, t driver.Taint) ([]corev1.Taint, bool) {
	kt := kubeTaint(t)
	for i, have := range taints {
		if have.Key == kt.Key && have.Effect == kt.Effect {
			if have.Value == kt.Value {
				return taints, false
			}
			taints = slices.Clone(taints)
			taints[i].Value = kt.Value
			return taints, true
		}
	}
	return append(slices.Clone(taints), kt), true
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

// Taint adds the taint, with a patch that replaces the taint list as read
// (under a resourceVersion precondition, so a concurrent change is not
// lost: the patch is retried on the new list).
func (c *Cluster) Taint(ctx context.Context, clusterID, nodeName string, t driver.Taint) error {
	return c.mark(ctx, clusterID, nodeName, false, &t, nil)
}

// MarkDraining cordons, taints and annotates the node in one patch. The
// node watch's copy is checked first: on a node already marked it makes
// no call, so the controller can check the marks on every pass and put
// them back when the tenant removed them.
func (c *Cluster) MarkDraining(ctx context.Context, clusterID, nodeName string, t driver.Taint, annotations map[string]string) error {
	c.draining.Store(nodeName, struct{}{})
	return c.mark(ctx, clusterID, nodeName, true, &t, annotations)
}

func (c *Cluster) mark(ctx context.Context, clusterID, nodeName string, cordon bool, t *driver.Taint, annotations map[string]string) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	patchFor := func(n *corev1.Node) map[string]any {
		meta := map[string]any{}
		spec := map[string]any{}
		if cordon && !n.Spec.Unschedulable {
			spec["unschedulable"] = true
		}
		if t != nil {
			if taints, changed := withTaint(n.Spec.Taints, *t); changed {
				spec["taints"] = taints
			}
		}
		if add := missing(n.Annotations, annotations); len(add) > 0 {
			meta["annotations"] = add
		}
		if len(spec) == 0 && len(meta) == 0 {
			return nil
		}
		meta["resourceVersion"] = n.ResourceVersion
		return map[string]any{"metadata": meta, "spec": spec}
	}
	cached := c.cachedNode(nodeName)
	if cached != nil && patchFor(cached) == nil {
		return nil
	}
	if !c.may(permPatchNodes) {
		return refused(permPatchNodes)
	}
	ctx, done := c.call(ctx)
	defer done()
	perm := permPatchNodes
	// The watch's copy is usually current: patch from it, and read the
	// Node only when it was not (a conflict) or is not there.
	read := cached == nil
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n := cached
		if read {
			perm = permGetNodes
			var err error
			if n, err = c.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		read = true
		p := patchFor(n)
		if p == nil {
			return nil
		}
		perm = permPatchNodes
		_, err := c.patch(ctx, nodeName, p)
		return err
	})
	if err == nil {
		c.granted(permPatchNodes)
	} else if c.refusal(perm, nodeName, err) {
		return fmt.Errorf("mark node %s: %w: %w", nodeName, driver.ErrRefused, err)
	}
	return notFound(err, "mark node "+nodeName)
}

// refused is the error of a call not made because the cluster refused
// its permission a moment ago (see may).
func refused(p Permission) error {
	return fmt.Errorf("%w: %s was refused less than %s ago", driver.ErrRefused, p, refusedFor)
}

var _ driver.Marker = (*Cluster)(nil)

// eventName names an Event after what it is about and says, so posting it
// again (after a crash) finds it there instead of adding another.
func eventName(object string, e driver.NodeEvent) string {
	h := fnv.New64a()
	h.Write([]byte(e.Type + "\x00" + e.Reason + "\x00" + e.Message))
	return fmt.Sprintf("%s.sparecap-%016x", object, h.Sum64())
}

func (c *Cluster) postEvent(ctx context.Context, node string, ref corev1.ObjectReference, e driver.NodeEvent) error {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(ref.Name, e), Namespace: ref.Namespace},
		InvolvedObject:      ref,
		Type:                e.Type,
		Reason:              e.Reason,
		Message:             e.Message,
		Source:              corev1.EventSource{Component: "sparecap", Host: c.opts.Instance},
		ReportingController: "sparecap.dev/controller",
		ReportingInstance:   c.opts.Instance,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
	if ev.Namespace == "" {
		ev.Namespace = metav1.NamespaceDefault // where kubectl looks for node events
	}
	if !c.may(permEvents) {
		return refused(permEvents)
	}
	ctx, cancel := c.eventCall(ctx)
	defer cancel()
	_, err := c.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	switch {
	case err == nil || apierrors.IsAlreadyExists(err):
		c.granted(permEvents)
		return nil
	case c.refusal(permEvents, node, err):
		return fmt.Errorf("%w: %w", driver.ErrRefused, err)
	}
	return err
}

// PostEvent posts an Event involving the node.
func (c *Cluster) PostEvent(ctx context.Context, clusterID, nodeName string, e driver.NodeEvent) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	return c.postEvent(ctx, nodeName, corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeName, UID: types.UID(nodeName)}, e)
}

// PostPodEvent posts an Event involving the pod, in its namespace.
func (c *Cluster) PostPodEvent(ctx context.Context, clusterID, nodeName string, p driver.Pod, e driver.NodeEvent) error {
	if err := c.check(clusterID); err != nil {
		return err
	}
	return c.postEvent(ctx, nodeName, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: types.UID(p.UID)}, e)
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
		dp := driver.Pod{
			Namespace: p.Namespace, Name: p.Name, UID: string(p.UID),
			TerminationGracePeriod: time.Duration(grace) * time.Second,
			Terminating:            p.DeletionTimestamp != nil,
			DaemonSet:              isDaemon(p),
			ReadsDeadline:          readsDeadline(p),
		}
		if dp.Terminating {
			dp.KillAt = p.DeletionTimestamp.Time
		}
		out = append(out, dp)
	}
	return out, nil
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
	c.refusal(permDeleteNodes, nodeName, err)
	return err
}

var _ driver.ClusterDriver = (*Cluster)(nil)
