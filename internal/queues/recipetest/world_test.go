package recipetest

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/testworld"
)

// env is the mini cluster with JobSet's controller and KubeRay's
// operator that the package's tests share, one at a time: each starts
// from a cluster with no nodes and none of the objects a test creates
// (reset).
var env *kubeenv.Env

func TestMain(m *testing.M) {
	start := time.Now()
	var err error
	env, err = kubeenv.Start(kubeenv.Options{MiniCluster: true, JobSet: true, KubeRay: true})
	if err != nil {
		// Fail loudly: these tests never skip.
		fmt.Fprintln(os.Stderr, "cannot start the mini cluster with JobSet and KubeRay:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "mini cluster with JobSet and KubeRay started in %s\n", time.Since(start).Round(100*time.Millisecond))
	code := m.Run()
	if err := env.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

const ns = "team-ml" // the docs' namespace

var (
	jobSetsGVR     = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	rayClustersGVR = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
)

// newWorld resets the mini cluster and builds a sparecap world with
// machines 8-GPU machines and the mini cluster attached as cluster
// "tenant" (testworld.New), its drain window short: the tests' pods exit
// seconds after their SIGTERM. w.Start runs it.
func newWorld(t *testing.T, machines int) *testworld.World {
	t.Helper()
	reset(t)
	env.LogOnFailure(t)
	w := testworld.New(t, machines, map[string]testworld.Cluster{"tenant": testworld.MiniCluster(env)})
	w.Window = 60 * time.Second
	return w
}

// decodeSnippet decodes docs/queues.md's snippet name, a single object.
func decodeSnippet(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	return decodePageSnippet(t, "queues.md", name)
}

// decodePageSnippet decodes the snippet name of docs/page, a single
// object.
func decodePageSnippet(t *testing.T, page, name string) *unstructured.Unstructured {
	t.Helper()
	text, err := docs.Snippet(page, name)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("docs/%s's %s: %v", page, name, err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// create creates obj as it is, with strict field validation: a field the
// component's schema does not know fails the test instead of being
// dropped.
func create(t *testing.T, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := env.Dynamic().Resource(gvr).Namespace(obj.GetNamespace()).Create(t.Context(), obj,
		metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		t.Fatalf("create the docs' %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return got
}

// annotate adds annotations to a pod template (a map of an
// unstructured object, changed in place): kwok's stand-ins for the
// workload.
func annotate(t *testing.T, tmpl any, ann map[string]string) {
	t.Helper()
	m, ok := tmpl.(map[string]any)
	if !ok {
		t.Fatalf("pod template %v is not an object", tmpl)
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	a, _ := meta["annotations"].(map[string]any)
	if a == nil {
		a = map[string]any{}
		meta["annotations"] = a
	}
	for k, v := range ann {
		a[k] = v
	}
}

// field returns the field of obj at path, not a copy, failing the test
// if it is missing.
func field(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !found {
		t.Fatalf("no %v: %v", path, err)
	}
	return v
}

// reset empties the mini cluster of what a test left: JobSets,
// RayClusters, Jobs, pods, and every Node.
func reset(t *testing.T) {
	t.Helper()
	testworld.Reset(t, env, ns, testworld.Resource{GVR: jobSetsGVR, Namespaced: true},
		testworld.Resource{GVR: rayClustersGVR, Namespaced: true})
}

// history records every state the API server reported of the pods and
// Jobs of the namespace since it started, so that a test can look at a
// pod or a Job that is gone by the time it asks (a reclaimed pod is
// deleted a second after it exits, a failed Job once JobSet restarts).
type history struct {
	mu   sync.Mutex
	pods map[types.UID][]*corev1.Pod
	jobs map[types.UID][]*batchv1.Job
	// podEvents are the pods' creations and deletions in the order the
	// API server's watch reported them.
	podEvents []podEvent
}

// podEvent is a pod created (first seen) or deleted (gone from the API).
type podEvent struct {
	pod     *corev1.Pod
	deleted bool
}

// record starts a history of the namespace; it stops when t ends.
func record(t *testing.T) *history {
	t.Helper()
	h := &history{pods: map[types.UID][]*corev1.Pod{}, jobs: map[types.UID][]*batchv1.Job{}}
	f := informers.NewSharedInformerFactoryWithOptions(env.Client(), 0, informers.WithNamespace(ns))
	add := func(obj any) {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch o := obj.(type) {
		case *corev1.Pod:
			if len(h.pods[o.UID]) == 0 {
				h.podEvents = append(h.podEvents, podEvent{pod: o.DeepCopy()})
			}
			h.pods[o.UID] = append(h.pods[o.UID], o.DeepCopy())
		case *batchv1.Job:
			h.jobs[o.UID] = append(h.jobs[o.UID], o.DeepCopy())
		}
	}
	del := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.podEvents = append(h.podEvents, podEvent{pod: p.DeepCopy(), deleted: true})
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }, DeleteFunc: del}
	for _, inf := range []cache.SharedIndexInformer{f.Core().V1().Pods().Informer(), f.Batch().V1().Jobs().Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	for typ, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("informer of %v did not sync", typ)
		}
	}
	return h
}

// pod returns every state seen of the pod uid, oldest first.
func (h *history) pod(uid types.UID) []*corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*corev1.Pod(nil), h.pods[uid]...)
}

// events returns the pods' creations and deletions so far, in order.
func (h *history) events() []podEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]podEvent(nil), h.podEvents...)
}

// podsOn returns the last state seen of every pod that ran on node.
func (h *history) podsOn(node string) []*corev1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*corev1.Pod
	for _, states := range h.pods {
		if last := states[len(states)-1]; last.Spec.NodeName == node {
			out = append(out, last)
		}
	}
	return out
}

// failedJob is a Job seen failed, with its Failed condition.
type failedJob struct {
	Name string
	UID  types.UID
	Cond batchv1.JobCondition
}

// failedJob returns the Job uid's Failed condition, if it was seen
// failed.
func (h *history) failedJob(uid types.UID) (failedJob, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, j := range h.jobs[uid] {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return failedJob{Name: j.Name, UID: uid, Cond: c}, true
			}
		}
	}
	return failedJob{}, false
}

// jobOf returns the UID of the Job that owns pod p.
func jobOf(p *corev1.Pod) types.UID {
	for _, o := range p.OwnerReferences {
		if o.Kind == "Job" && o.Controller != nil && *o.Controller {
			return o.UID
		}
	}
	return ""
}

// disruption returns the pod's DisruptionTarget condition, if it had one.
func disruption(states []*corev1.Pod) (corev1.PodCondition, bool) {
	for _, p := range states {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
				return c, true
			}
		}
	}
	return corev1.PodCondition{}, false
}

// deletionGrace returns the grace period the pod was deleted with, if it
// was.
func deletionGrace(states []*corev1.Pod) (int64, bool) {
	for _, p := range states {
		if p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds > 0 {
			return *p.DeletionGracePeriodSeconds, true
		}
	}
	return 0, false
}

// waitGone waits until node is no longer a node of the tenant in the
// store (released, its machine handed on).
func waitGone(t *testing.T, w *testworld.World, node string, within time.Duration) {
	t.Helper()
	kubeenv.Eventually(t, within, func() error {
		for _, st := range []domain.NodeState{domain.NodeDraining, domain.NodeRemoving, domain.NodeReady} {
			for _, n := range w.Nodes("tenant", domain.Preemptible, st) {
				if n.Name == node {
					return fmt.Errorf("node %s still %s", node, st)
				}
			}
		}
		return nil
	})
}

// nodeClass reads the compute-class label of a Node object.
func nodeClass(t *testing.T, name string) string {
	t.Helper()
	n, err := env.Client().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[domain.LabelComputeClass]
}
