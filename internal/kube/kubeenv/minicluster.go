package kubeenv

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The mini cluster (Options.MiniCluster) adds to etcd and kube-apiserver
// what makes workloads run: kube-controller-manager (Jobs, Deployments,
// ReplicaSets, garbage collection, node lifecycle, namespaces, ...),
// kube-scheduler, and kwok, which plays the kubelet of every Node annotated
// KwokNodeAnnotation=KwokNodeValue: it reports the node Ready (renewing its
// Lease), starts the pods bound to it and, when one is deleted, lets its
// containers exit as the annotations below say. The stages it plays are in
// kwok-stages.yaml.
//
// Nodes without the annotation are left alone (no kubelet): the node
// lifecycle controller marks them NotReady once
// --node-monitor-grace-period (50 s) has passed, and evicts their pods 5
// minutes later, as in a real cluster.
//
// The ServiceAccount admission plugin stays off even though the
// serviceaccount controller now creates each namespace's "default"
// account: with it on, a pod created right after its namespace would be
// refused until that account exists, and no container reads a token.
const (
	// KwokNodeAnnotation (with value KwokNodeValue) on a Node makes kwok its
	// kubelet. The Node's creator writes its capacity into status.capacity
	// and/or status.allocatable (each defaults to the other, e.g.
	// nvidia.com/gpu: 8); cpu, memory and pods it leaves out default to 1k,
	// 1Ti and 1k. See FakeNode.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	KwokNodeValue      = "fake"

	// ExitAfterAnnotation on a pod is how long its containers take to exit
	// after SIGTERM, as a Go duration ("3s", "1500ms"). Without it (or if it
	// does not parse) they ignore SIGTERM and are killed at the end of the
	// grace period, i.e. at metadata.deletionTimestamp. Either way a pod
	// deleted gracefully is never gone at once.
	ExitAfterAnnotation = "sparecap.test/exit-after"
	// ExitCodeAnnotation is the code the containers exit with after SIGTERM
	// (default 143, a process ended by SIGTERM). 0 makes the pod Succeeded,
	// anything else Failed; killed at the deadline they exit with 137.
	ExitCodeAnnotation = "sparecap.test/exit-code"
	// SigtermAtAnnotation is written by kwok when it sees the deletion: the
	// time the containers got SIGTERM (UTC, milliseconds).
	SigtermAtAnnotation = "sparecap.test/sigterm-at"
	// ExitAtAnnotation is written with SigtermAtAnnotation when the pod has
	// ExitAfterAnnotation: when its containers exit unless the grace period
	// ends first.
	ExitAtAnnotation = "sparecap.test/exit-at"
	// RunForAnnotation on a pod is how long its work takes, as a Go
	// duration: that long after kwok started it, the pod Succeeds with exit
	// code 0 (as a batch job's pod does), unless it is deleted first.
	// Without it a pod runs until deleted.
	RunForAnnotation = "sparecap.test/run-for"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// FakeNode returns a Node for kwok to run: annotated for kwok, labelled as
// a kubelet labels its node, with capacity as both its capacity and its
// allocatable resources. Create it with the admin client; kwok reports it
// Ready within a second, and the scheduler uses it once kube-controller-
// manager has lifted the not-ready taint (up to 5 s later).
func FakeNode(name string, capacity corev1.ResourceList) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeValue},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity.DeepCopy(), Allocatable: capacity.DeepCopy()},
	}
}

// miniBinaries are the mini cluster's binaries, looked up before anything
// starts so that a missing one fails Start at once.
type miniBinaries struct{ controllerManager, scheduler, kwok string }

func findMiniBinaries() (b miniBinaries, err error) {
	var errs [3]error
	b.controllerManager, errs[0] = ControllerManagerPath()
	b.scheduler, errs[1] = SchedulerPath()
	b.kwok, errs[2] = KwokPath()
	return b, errors.Join(errs[:]...)
}

// component is one process of the mini cluster, started on a free port.
type component struct {
	name  string
	path  string
	args  func(port int) []string
	env   []string
	ready func(ctx context.Context, port int) error
}

// insecure probes the components' self-signed health endpoints.
var insecure = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

func (e *Env) startMiniCluster(bins miniBinaries) error {
	kubeconfig := filepath.Join(e.dir, "admin.kubeconfig")
	schedConfig := filepath.Join(e.dir, "kube-scheduler.yaml")
	stages := filepath.Join(e.dir, "kwok-stages.yaml")
	files := map[string][]byte{
		kubeconfig: e.Kubeconfig(),
		// The flags --kube-api-qps and --kubeconfig are gone from
		// kube-scheduler; the client's limits are set here instead. Tests
		// create pods in bulk: the default 50 QPS would measure the client.
		schedConfig: []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: ` + strconv.Quote(kubeconfig) + `
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
`),
		stages: kwokStages,
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return err
		}
	}
	healthz := func(scheme, path string, c *http.Client) func(context.Context, int) error {
		return func(ctx context.Context, port int) error {
			return expect(ctx, c, scheme+"://127.0.0.1:"+strconv.Itoa(port)+path, "ok")
		}
	}
	delegated := []string{
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--profiling=false",
	}
	comps := []component{{
		name: "kube-controller-manager",
		path: bins.controllerManager,
		args: func(port int) []string {
			args := append([]string{
				"--kubeconfig=" + kubeconfig,
				"--secure-port=" + strconv.Itoa(port),
				"--leader-elect=false",
				// The default set: job, deployment, replicaset,
				// garbagecollector, podgc, nodelifecycle,
				// taint-eviction-controller, namespace, serviceaccount,
				// serviceaccount-token, ...
				"--controllers=*",
				"--service-account-private-key-file=" + e.sec.saKey,
				"--root-ca-file=" + filepath.Join(e.dir, "ca.crt"),
				"--use-service-account-credentials=false",
				"--kube-api-qps=1000",
				"--kube-api-burst=2000",
			}, delegated...)
			return append(args, e.opts.ControllerManagerArgs...)
		},
		ready: healthz("https", "/healthz", insecure),
	}, {
		name: "kube-scheduler",
		path: bins.scheduler,
		args: func(port int) []string {
			args := append([]string{
				"--config=" + schedConfig,
				"--secure-port=" + strconv.Itoa(port),
			}, delegated...)
			return append(args, e.opts.SchedulerArgs...)
		},
		// /readyz waits for the scheduler's informers to sync.
		ready: healthz("https", "/readyz", insecure),
	}, {
		name: "kwok",
		path: bins.kwok,
		args: func(port int) []string {
			return append([]string{
				"--kubeconfig=" + kubeconfig,
				"--config=" + stages,
				"--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeValue,
				"--server-address=127.0.0.1:" + strconv.Itoa(port),
				// The node lifecycle controller reads the Leases; kwok renews
				// them every quarter of this.
				"--node-lease-duration-seconds=40",
				// kwok's default /24 would run out of pod IPs at 254 pods.
				"--cidr=10.244.0.0/16",
				"--node-ip=10.243.0.1",
			}, e.opts.KwokArgs...)
		},
		// Not ~/.kwok/kwok.yaml, which kwok would load besides --config.
		env:   []string{"KWOK_WORKDIR=" + filepath.Join(e.dir, "kwok")},
		ready: healthz("http", "/healthz", http.DefaultClient),
	}}

	// All at once: each spends its first seconds on its own start-up.
	errs := make([]error, len(comps))
	var wg sync.WaitGroup
	for i, c := range comps {
		wg.Go(func() { errs[i] = e.startComponent(c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startComponent starts c on a free port and waits until it is ready,
// retrying with another port if the one picked was taken meanwhile.
func (e *Env) startComponent(c component) error {
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		out, closer, err := e.output(c.name)
		if err != nil {
			return err
		}
		p, err := startProcEnv(c.name, c.path, c.args(port), c.env, out, closer)
		if err != nil {
			return err
		}
		err = p.waitReady(ReadyTimeout, func(ctx context.Context) error { return c.ready(ctx, port) })
		if err == nil {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.closed {
				p.stop()
				return errors.New("kubeenv: Env is closed")
			}
			e.mini = append(e.mini, p)
			return nil
		}
		p.stop()
		if attempt >= 3 || !p.addrInUse() {
			return err
		}
	}
}

// stopMiniLocked stops the mini cluster's components, all at once.
func (e *Env) stopMiniLocked() error {
	errs := make([]error, len(e.mini))
	var wg sync.WaitGroup
	for i, p := range e.mini {
		wg.Go(func() { errs[i] = p.stop() })
	}
	wg.Wait()
	e.mini = nil
	return errors.Join(errs...)
}
