// Package testworld runs a sparecap server's insides in a test: the
// controller, the fleet's driver and the queue manager on one SQLite
// store, driving the clusters attached to it (a mini cluster, whose
// kubelets kwok plays, or a plain API server, whose nodes the register
// provider creates) and the simulation for the others. The queue
// integrations' tests and the docs' recipe tests share it.
package testworld

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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

// The fleet's region and GPU type.
const (
	Region = "us-central-2"
	GPU    = "RTX_6000_PCI"
)

// world is a sparecap server's insides (controller, the fleet's driver,
// queue manager) on one SQLite store, driving the clusters attached to it,
// and the simulation for the others. Machines of attached clusters boot
// as kwok nodes of the mini cluster (kwokProvider), or, for a cluster on
// an API server without kwok, are registered Ready by the register
// provider.
type World struct {
	t        testing.TB
	ctx      context.Context
	st       store.Store
	sim      *sim.Fleet
	attached map[string]Cluster
	// window is the drain window (default 2 minutes).
	Window time.Duration

	mu      sync.Mutex
	ctrl    *controller.Controller
	stopRun func()
}

// cluster is an attached cluster: its kubeconfig, and whether kwok plays
// its kubelets (the mini cluster) or the register provider does.
type Cluster struct {
	Kubeconfig []byte
	Client     kubernetes.Interface
	Kwok       bool
}

// New builds a world with machines 8-GPU machines in Region and GPU,
// and the projects p and q; Start runs it. Stop runs when t ends.
func New(t testing.TB, machines int, attached map[string]Cluster) *World {
	t.Helper()
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
	w := &World{t: t, ctx: ctx, st: st, sim: fl, attached: attached}
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, p := range []string{"p", "q"} {
			if err := tx.CreateProject(ctx, domain.Project{ID: p, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		for i := range machines {
			if err := tx.CreateMachine(ctx, domain.Machine{ID: fmt.Sprintf("m%02d", i), Region: Region, GPUType: GPU, GPUs: 8, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// addMachines adds n machines to the fleet, as an operator does.
func (w *World) AddMachines(n int) {
	w.t.Helper()
	err := w.st.Update(w.ctx, func(tx store.Tx) error {
		ms, err := tx.ListMachines(w.ctx)
		if err != nil {
			return err
		}
		for i := range n {
			if err := tx.CreateMachine(w.ctx, domain.Machine{ID: fmt.Sprintf("m%02d", len(ms)+i), Region: Region, GPUType: GPU, GPUs: 8, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.Controller().Kick()
}

// MiniCluster is a mini cluster (kwok plays its kubelets), attached with
// its admin kubeconfig.
func MiniCluster(env *kubeenv.Env) Cluster {
	return Cluster{Kubeconfig: env.Kubeconfig(), Client: env.Client(), Kwok: true}
}

// start runs the controller and the queue manager, as a server's term
// does.
func (w *World) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	kubes := kube.NewPlatform(func(_ context.Context, id string) ([]byte, error) {
		if c, ok := w.attached[id]; ok {
			return c.Kubeconfig, nil
		}
		return nil, nil
	}, kube.Options{Instance: "kueuetest"})
	router := driver.NewRouter(func(context.Context, string) (domain.ClusterType, error) { return domain.ClusterKubernetes, nil },
		map[domain.ClusterType]driver.Drivers{domain.ClusterKubernetes: kubes}, w.sim)
	ctrl := controller.New(w.st, router, &machines{w: w, register: kube.NewRegistrar(kubes, w.sim)}, clock.Real{},
		controller.Config{DrainWindow: cmp.Or(w.Window, 2*time.Minute), Cooldown: -1, Interval: time.Second}, nil)
	qm := &manager.Manager{Fleet: &manager.StoreFleet{Store: w.st, Controller: ctrl}, Drivers: kubes,
		Options: manager.Options{Resync: time.Second, Rediscover: 2 * time.Second, Refused: ctrl.RecordAccess, Note: ctrl.RecordNote}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { ctrl.Run(ctx) })
	wg.Go(func() { qm.Run(ctx) })
	w.ctrl = ctrl
	w.stopRun = func() { cancel(); wg.Wait(); router.Close() }
}

// stop stops what start runs (the store stays): a server going down.
func (w *World) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopRun != nil {
		w.stopRun()
		w.stopRun = nil
	}
}

func (w *World) Controller() *controller.Controller {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctrl
}

// create makes a cluster of project p with its standard and preemptible
// GPUs and the queue's maximum.
func (w *World) Create(id, project string, standard, preemptible, max int) {
	w.t.Helper()
	_, err := w.Controller().CreateCluster(w.ctx, domain.Cluster{ID: id, Name: id, ProjectID: project, Region: Region, GPUType: GPU,
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
func (w *World) Update(id string, ch controller.Change) {
	w.t.Helper()
	if _, err := w.Controller().UpdateCluster(w.ctx, id, ch); err != nil {
		w.t.Fatal(err)
	}
}

// nodes lists a cluster's nodes of a class in a state, from the store.
func (w *World) Nodes(id string, class domain.ComputeClass, state domain.NodeState) []domain.Node {
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
func (w *World) WaitReady(id string, n int, within time.Duration) []domain.Node {
	w.t.Helper()
	var got []domain.Node
	kubeenv.Eventually(w.t, within, func() error {
		got = w.Nodes(id, domain.Preemptible, domain.NodeReady)
		if len(got) != n {
			return fmt.Errorf("cluster %s has %d ready preemptible nodes, want %d", id, len(got), n)
		}
		c := w.attached[id].Client
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
func (w *World) Cluster(id string) domain.Cluster {
	w.t.Helper()
	c, err := w.st.GetCluster(w.ctx, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// events lists a cluster's lifecycle events of a reason.
func (w *World) Events(id string, reason domain.EventReason) []domain.Event {
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
	w        *World
	register driver.MachineProvider
}

func (m *machines) Prepare(ctx context.Context, mc domain.Machine, spec driver.NodeSpec) (bool, error) {
	c, ok := m.w.attached[spec.ClusterID]
	switch {
	case !ok:
		return m.w.sim.Prepare(ctx, mc, spec)
	case !c.Kwok:
		return m.register.Prepare(ctx, mc, spec)
	}
	n := kubeenv.FakeNode(spec.NodeName, kube.Capacity(mc.GPUs))
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
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

// Store is the world's store.
func (w *World) Store() store.Store { return w.st }

// WaitDraining waits until one of cluster id's preemptible nodes is
// draining (reclaimed) and returns it.
func (w *World) WaitDraining(id string, within time.Duration) domain.Node {
	w.t.Helper()
	var got domain.Node
	kubeenv.Eventually(w.t, within, func() error {
		for _, n := range w.Nodes(id, domain.Preemptible, domain.NodeDraining) {
			got = n
			return nil
		}
		return fmt.Errorf("no preemptible node of cluster %s draining", id)
	})
	return got
}
