package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// env is one etcd and kube-apiserver for the whole package. Tests use it
// one at a time: node names are per sparecap cluster, and each test starts
// from an empty set of nodes (reset).
var env *kubeenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = kubeenv.Start(kubeenv.Options{})
	if err != nil {
		// Fail loudly: these tests never skip.
		fmt.Fprintln(os.Stderr, "cannot start the Kubernetes test environment:", err)
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	os.Exit(code)
}

const (
	region = "us-central-2"
	gpu    = "RTX_6000_PCI"
)

// fixture is a sparecap controller on SQLite, driving the test API server
// for the clusters attached to it and the simulation for the others, with
// the register provider (nothing boots; nodes join at once).
type fixture struct {
	t      testing.TB
	ctx    context.Context
	st     store.Store
	ctrl   *controller.Controller
	router *driver.Router
	kube   *kube.Platform
	sim    *sim.Fleet
}

type fixtureConfig struct {
	machines int
	window   time.Duration
	attached []string // cluster IDs on the test API server
	// kubeconfig they are attached with (default: the admin's).
	kubeconfig []byte
	opts       kube.Options
	// nodeLostAfter and registerTimeout: see controller.Config (zero:
	// its defaults).
	nodeLostAfter, registerTimeout time.Duration
	// provider, if set, replaces the register provider the controller
	// gets (it may wrap it).
	provider func(register driver.MachineProvider) driver.MachineProvider
}

func newFixture(t testing.TB, cfg fixtureConfig) *fixture {
	t.Helper()
	reset(t)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.Real{}
	fl, err := sim.New(sim.Config{Clock: clk, ProvisionTime: -1, WipeTime: -1,
		Pods: []sim.PodTemplate{{Name: "worker", TerminationGracePeriod: 30 * time.Second, ExitAfter: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	kc := cfg.kubeconfig
	if kc == nil {
		kc = env.Kubeconfig()
	}
	kubes := kube.NewPlatform(func(_ context.Context, id string) ([]byte, error) {
		if slices.Contains(cfg.attached, id) {
			return kc, nil
		}
		return nil, nil
	}, cfg.opts)
	router := kubeRouter(kubes, fl)
	var machines driver.MachineProvider = kube.NewRegistrar(kubes, fl)
	if cfg.provider != nil {
		machines = cfg.provider(machines)
	}
	ctrl := controller.New(st, router, machines, clk, controller.Config{
		DrainWindow: cfg.window, Cooldown: -1, Interval: time.Second,
		NodeLostAfter: cfg.nodeLostAfter, RegisterTimeout: cfg.registerTimeout, ConvertEvery: time.Second,
	}, nil)
	f := &fixture{t: t, ctx: ctx, st: st, ctrl: ctrl, router: router, kube: kubes, sim: fl}
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: time.Now()}); err != nil {
			return err
		}
		for i := range cfg.machines {
			if err := tx.CreateMachine(ctx, domain.Machine{ID: fmt.Sprintf("m%03d", i), Region: region, GPUType: gpu, GPUs: 8, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { ctrl.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		router.Close()
		st.Close()
	})
	return f
}

// kubeRouter is the fleet's driver of a server whose clusters are all
// Kubernetes ones: the platform's driver for a cluster with a kubeconfig,
// the simulation for the others.
func kubeRouter(p *kube.Platform, fallback driver.ClusterDriver) *driver.Router {
	return driver.NewRouter(func(context.Context, string) (domain.ClusterType, error) { return domain.ClusterKubernetes, nil },
		map[domain.ClusterType]driver.Drivers{domain.ClusterKubernetes: p}, fallback)
}

// createCluster creates a cluster with standard and preemptible GPUs.
func (f *fixture) createCluster(id string, standard, preemptible int) {
	f.t.Helper()
	_, err := f.ctrl.CreateCluster(f.ctx, domain.Cluster{ID: id, Name: id, ProjectID: "p", Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: standard, DesiredPreemptibleGPUs: preemptible})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) update(id string, standard, preemptible *int) {
	f.t.Helper()
	if _, err := f.ctrl.UpdateCluster(f.ctx, id, controller.Change{NumGPUs: standard, PreemptibleGPUs: preemptible}); err != nil {
		f.t.Fatal(err)
	}
}

// nodes are the cluster's nodes in the store in these states.
func (f *fixture) nodes(cluster string, states ...domain.NodeState) []domain.Node {
	f.t.Helper()
	ns, err := f.st.ListNodes(f.ctx, store.NodeFilter{ClusterID: cluster, States: states})
	if err != nil {
		f.t.Fatal(err)
	}
	return ns
}

// waitNodes waits until the cluster has n nodes of the class in state.
func (f *fixture) waitNodes(cluster string, class domain.ComputeClass, state domain.NodeState, n int, within time.Duration) []domain.Node {
	f.t.Helper()
	var got []domain.Node
	eventually(f.t, within, func() error {
		got = got[:0]
		for _, nd := range f.nodes(cluster, state) {
			if nd.Class == class {
				got = append(got, nd)
			}
		}
		if len(got) != n {
			return fmt.Errorf("cluster %s has %d %s nodes %s, want %d", cluster, len(got), class, state, n)
		}
		return nil
	})
	return got
}

func (f *fixture) events(cluster string) []domain.Event {
	f.t.Helper()
	evs, err := f.st.ListEvents(f.ctx, store.EventFilter{ClusterID: cluster})
	if err != nil {
		f.t.Fatal(err)
	}
	return evs
}

// eventually retries check every 100ms until it passes or within ends.
func eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reset removes every node and every pod outside the system namespaces,
// so a test starts from an empty cluster.
func reset(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	c := env.Client()
	zero := int64(0)
	eventually(t, 30*time.Second, func() error {
		nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ns := range nss.Items {
			if err := c.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
				return err
			}
			if err := c.CoreV1().Events(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				return err
			}
		}
		if err := c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
		pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("pods left: %v", err)
		}
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) > 0 {
			return fmt.Errorf("nodes left: %v", err)
		}
		return nil
	})
}

// node returns the Node object, nil if there is none.
func node(t testing.TB, name string) *corev1.Node {
	t.Helper()
	n, err := env.Client().CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return n
}
