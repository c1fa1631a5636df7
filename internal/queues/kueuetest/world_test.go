package kueuetest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/manager"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// env is the mini cluster with Kueue the package's tests share, one at a
// time: each starts from a cluster with no nodes and none of the docs'
// objects (reset).
var env *kubeenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = kubeenv.Start(kubeenv.Options{MiniCluster: true, Kueue: &kubeenv.KueueOptions{Frameworks: []string{"batch/job"}}})
	if err != nil {
		// Fail loudly: these tests never skip.
		fmt.Fprintln(os.Stderr, "cannot start the mini cluster with Kueue:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

const (
	region = "us-central-2"
	gpu    = "RTX_6000_PCI"
	ns     = "team-ml" // the docs' namespace
)

// world is a sparecap server's insides (controller, Kubernetes router,
// queue manager) on one SQLite store, driving the clusters attached to it,
// and the simulation for the others. Machines of attached clusters boot
// as kwok nodes of the mini cluster (kwokProvider), or, for a cluster on
// an API server without kwok, are registered Ready by the register
// provider.
type world struct {
	t        *testing.T
	ctx      context.Context
	st       store.Store
	sim      *sim.Fleet
	attached map[string]cluster
	// window is the drain window (default 2 minutes).
	window time.Duration

	mu      sync.Mutex
	ctrl    *controller.Controller
	router  *kube.Router
	stopRun func()
}

// cluster is an attached cluster: its kubeconfig, and whether kwok plays
// its kubelets (the mini cluster) or the register provider does.
type cluster struct {
	kubeconfig []byte
	client     kubernetes.Interface
	kwok       bool
}

// newWorld resets the mini cluster and builds a world with machines
// 8-GPU machines; start runs it.
func newWorld(t *testing.T, machines int, attached map[string]cluster) *world {
	t.Helper()
	reset(t)
	env.LogOnFailure(t)
	ctx := t.Context()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The other tenants' clusters are simulated; their pods exit half a
	// second after SIGTERM, so a machine they give back is free at once.
	fl, err := sim.New(sim.Config{Clock: clock.Real{}, ProvisionTime: -1, WipeTime: -1,
		Pods: []sim.PodTemplate{{Name: "worker", TerminationGracePeriod: 30 * time.Second, ExitAfter: 500 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, st: st, sim: fl, attached: attached}
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, p := range []string{"p", "q"} {
			if err := tx.CreateProject(ctx, domain.Project{ID: p, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		for i := range machines {
			if err := tx.CreateMachine(ctx, domain.Machine{ID: fmt.Sprintf("m%02d", i), Region: region, GPUType: gpu, GPUs: 8, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stop)
	return w
}

// addMachines adds n machines to the fleet, as an operator does.
func (w *world) addMachines(n int) {
	w.t.Helper()
	err := w.st.Update(w.ctx, func(tx store.Tx) error {
		ms, err := tx.ListMachines(w.ctx)
		if err != nil {
			return err
		}
		for i := range n {
			if err := tx.CreateMachine(w.ctx, domain.Machine{ID: fmt.Sprintf("m%02d", len(ms)+i), Region: region, GPUType: gpu, GPUs: 8, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.controller().Kick()
}

// miniCluster is the mini cluster, attached with its admin kubeconfig.
func miniCluster() cluster {
	return cluster{kubeconfig: env.Kubeconfig(), client: env.Client(), kwok: true}
}

// start runs the controller and the queue manager, as a server's term
// does.
func (w *world) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	router := kube.NewRouter(func(_ context.Context, id string) ([]byte, error) {
		if c, ok := w.attached[id]; ok {
			return c.kubeconfig, nil
		}
		return nil, nil
	}, w.sim, kube.Options{Instance: "kueuetest"})
	ctrl := controller.New(w.st, router, &machines{w: w, register: kube.NewRegistrar(router, w.sim)}, clock.Real{},
		controller.Config{DrainWindow: cmp.Or(w.window, 2*time.Minute), Cooldown: -1, Interval: time.Second}, nil)
	qm := &manager.Manager{Fleet: &manager.StoreFleet{Store: w.st, Controller: ctrl}, Drivers: router,
		Options: manager.Options{Resync: time.Second, Rediscover: 2 * time.Second, Refused: ctrl.RecordAccess, Note: ctrl.RecordNote}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx) })
	wg.Go(func() { qm.Run(ctx) })
	w.ctrl, w.router = ctrl, router
	w.stopRun = func() { cancel(); wg.Wait(); router.Close() }
}

// stop stops what start runs (the store stays): a server going down.
func (w *world) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopRun != nil {
		w.stopRun()
		w.stopRun = nil
	}
}

func (w *world) controller() *controller.Controller {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctrl
}

// create makes a cluster of project p with its standard and preemptible
// GPUs and the queue's maximum.
func (w *world) create(id, project string, standard, preemptible, max int) {
	w.t.Helper()
	_, err := w.controller().CreateCluster(w.ctx, domain.Cluster{ID: id, Name: id, ProjectID: project, Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: standard, DesiredPreemptibleGPUs: preemptible,
		MaxPreemptibleGPUs: max})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, ok := w.attached[id]; ok {
		if err := w.st.Update(w.ctx, func(tx store.Tx) error { return tx.SetKubeconfig(w.ctx, id, []byte("sealed"), time.Now()) }); err != nil {
			w.t.Fatal(err)
		}
	}
}

// update changes a cluster as PATCH /v1/clusters/{id} does.
func (w *world) update(id string, ch controller.Change) {
	w.t.Helper()
	if _, err := w.controller().UpdateCluster(w.ctx, id, ch); err != nil {
		w.t.Fatal(err)
	}
}

// nodes lists a cluster's nodes of a class in a state, from the store.
func (w *world) nodes(id string, class domain.ComputeClass, state domain.NodeState) []domain.Node {
	w.t.Helper()
	all, err := w.st.ListNodes(w.ctx, store.NodeFilter{ClusterID: id, States: []domain.NodeState{state}})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []domain.Node
	for _, n := range all {
		if n.Class == class {
			out = append(out, n)
		}
	}
	return out
}

// waitReady waits until the cluster has n ready preemptible nodes whose
// Node objects are schedulable (the not-ready taint lifted).
func (w *world) waitReady(id string, n int, within time.Duration) []domain.Node {
	w.t.Helper()
	var got []domain.Node
	kubeenv.Eventually(w.t, within, func() error {
		got = w.nodes(id, domain.Preemptible, domain.NodeReady)
		if len(got) != n {
			return fmt.Errorf("cluster %s has %d ready preemptible nodes, want %d", id, len(got), n)
		}
		c := w.attached[id].client
		for _, nd := range got {
			node, err := c.CoreV1().Nodes().Get(w.ctx, nd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, tn := range node.Spec.Taints {
				if tn.Key == corev1.TaintNodeNotReady {
					return fmt.Errorf("node %s still has taint %s", node.Name, tn.Key)
				}
			}
		}
		return nil
	})
	return got
}

// cluster reads a cluster from the store.
func (w *world) cluster(id string) domain.Cluster {
	w.t.Helper()
	c, err := w.st.GetCluster(w.ctx, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// events lists a cluster's lifecycle events of a reason.
func (w *world) events(id string, reason domain.EventReason) []domain.Event {
	w.t.Helper()
	evs, err := w.st.ListEvents(w.ctx, store.EventFilter{ClusterID: id})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []domain.Event
	for _, e := range evs {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// machines boots the machines of a cluster on the mini cluster as kwok
// nodes (a kubelet registers its Node; sparecap adopts it), registers
// those of a cluster on another API server with the register provider,
// and simulates the rest.
type machines struct {
	w        *world
	register driver.MachineProvider
}

func (m *machines) Prepare(ctx context.Context, mc domain.Machine, spec driver.NodeSpec) (bool, error) {
	c, ok := m.w.attached[spec.ClusterID]
	switch {
	case !ok:
		return m.w.sim.Prepare(ctx, mc, spec)
	case !c.kwok:
		return m.register.Prepare(ctx, mc, spec)
	}
	n := kubeenv.FakeNode(spec.NodeName, kube.Capacity(mc.GPUs))
	if _, err := c.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	return true, nil
}

func (m *machines) Wipe(ctx context.Context, mc domain.Machine, clusterID, nodeName string) (bool, error) {
	if _, ok := m.w.attached[clusterID]; ok {
		return true, nil // sparecap deletes the Node object
	}
	return m.w.sim.Wipe(ctx, mc, clusterID, nodeName)
}

// apply applies a snippet of docs/queues.md to the mini cluster.
func apply(t *testing.T, snippet string) {
	t.Helper()
	text, err := docs.Snippet("queues.md", snippet)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Apply(t.Context(), []byte(text)); err != nil {
		t.Fatalf("apply docs/queues.md's %s: %v", snippet, err)
	}
}

// The Kueue and autoscaler resources the tests read and reset.
var (
	kueue = func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: r}
	}
	workloadsGVR    = kueue("workloads")
	provisioningGVR = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1", Resource: "provisioningrequests"}
)

// reset empties the mini cluster of what a test left: Jobs and their
// pods, the docs' Kueue objects, ProvisioningRequests, pod templates, and
// every Node.
func reset(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := env.Client()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bg := metav1.DeletePropagationBackground
	if err := c.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().PodTemplates(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := env.Dynamic()
	for _, r := range []struct {
		gvr        schema.GroupVersionResource
		namespaced bool
	}{
		{provisioningGVR, true}, {workloadsGVR, true}, {kueue("localqueues"), true}, {kueue("clusterqueues"), false},
		{kueue("admissionchecks"), false}, {kueue("provisioningrequestconfigs"), false}, {kueue("resourceflavors"), false},
	} {
		ri := dyn.Resource(r.gvr)
		var err error
		if r.namespaced {
			err = ri.Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		} else {
			err = ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		if err != nil {
			t.Fatalf("delete %s: %v", r.gvr.Resource, err)
		}
	}
	if err := c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// Kueue's finalizers hold a queue while anything uses it.
	kubeenv.Eventually(t, 60*time.Second, func() error {
		for _, gvr := range []schema.GroupVersionResource{workloadsGVR, kueue("clusterqueues"), kueue("resourceflavors")} {
			list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d %s left", len(list.Items), gvr.Resource)
			}
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
}
