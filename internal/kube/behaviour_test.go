package kube_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/driver/drivertest"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// exitAfterKey is the annotation the stand-in kubelet reads to know how
// long a test pod takes to exit after SIGTERM ("never": it ignores it).
const exitAfterKey = "test.sparecap.dev/exit-after"

// exitAfter is the stand-in kubelet's ExitAfter for test pods.
func exitAfter(p *corev1.Pod) (time.Duration, bool) {
	v := p.Annotations[exitAfterKey]
	if v == "never" {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, true
	}
	return d, true
}

// podOptions name a test pod and give it its behaviour.
func podOptions(name string, exit time.Duration, daemon bool) kubelet.PodOption {
	return func(p *corev1.Pod) {
		p.GenerateName, p.Name = "", name
		v := "never"
		if exit >= 0 {
			v = exit.String()
		}
		p.Annotations = map[string]string{exitAfterKey: v}
		if daemon {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "logs",
				UID: types.UID("ds-" + name), Controller: &yes}}
		}
	}
}

func startPod(t testing.TB, node, namespace, name string, grace time.Duration, exit time.Duration, daemon bool) {
	t.Helper()
	_, err := kubelet.CreatePods(context.Background(), env.Client(), namespace, node, 1, int64(grace/time.Second), podOptions(name, exit, daemon))
	if err != nil {
		t.Fatal(err)
	}
}

// TestBehaviour runs the driver behaviour suite that the simulated driver
// passes, against the real API server.
func TestBehaviour(t *testing.T) {
	reset(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	c, err := kube.NewCluster("c-behaviour", env.RESTConfig(), kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	drivertest.Run(t, &harness{c: c})
}

type harness struct {
	c    *kube.Cluster
	mu   sync.Mutex
	pods map[string][]string // node -> "namespace/name"
}

func (h *harness) Platform() string             { return drivertest.Kubernetes }
func (h *harness) Driver() driver.ClusterDriver { return h.c }
func (h *harness) ClusterID() string            { return "c-behaviour" }

func (h *harness) Join(t *testing.T, spec driver.NodeSpec) {
	t.Helper()
	if err := kubelet.RegisterNode(context.Background(), env.Client(), spec.NodeName, nil); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) StartPod(t *testing.T, node string, p drivertest.PodSpec) {
	t.Helper()
	_, err := kubelet.CreatePods(context.Background(), env.Client(), p.Namespace, node, 1, int64(p.Grace/time.Second),
		podOptions(p.Name, p.ExitAfter, p.DaemonSet), func(pod *corev1.Pod) {
			if len(p.Labels) > 0 {
				pod.Labels = maps.Clone(p.Labels)
			}
			if p.GPUs > 0 {
				c := &pod.Spec.Containers[0]
				if c.Resources.Requests == nil {
					c.Resources.Requests = corev1.ResourceList{}
				}
				c.Resources.Requests[kube.ResourceGPU] = *resource.NewQuantity(int64(p.GPUs), resource.DecimalSI)
				c.Resources.Limits = c.Resources.Requests
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pods == nil {
		h.pods = map[string][]string{}
	}
	h.pods[node] = append(h.pods[node], p.Namespace+"/"+p.Name)
}

func (h *harness) Node(t *testing.T, name string) (drivertest.NodeState, bool) {
	t.Helper()
	n := node(t, name)
	if n == nil {
		return drivertest.NodeState{}, false
	}
	var taints []drivertest.Taint
	for _, tt := range n.Spec.Taints {
		taints = append(taints, drivertest.Taint{Key: tt.Key, Value: tt.Value, Effect: string(tt.Effect)})
	}
	return drivertest.KubeNode(n.Labels, n.Annotations, taints, n.Spec.Unschedulable), true
}

func (h *harness) Events(t *testing.T, name string) []drivertest.Event {
	t.Helper()
	evs, err := env.Client().CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	pods := h.pods[name]
	h.mu.Unlock()
	var out []drivertest.Event
	for _, e := range evs.Items {
		o := e.InvolvedObject
		switch {
		case o.Kind == "Node" && o.Name == name:
			out = append(out, drivertest.Event{Object: "Node/" + name, Type: e.Type, Reason: e.Reason})
		case o.Kind == "Pod" && containsPod(pods, o.Namespace+"/"+o.Name):
			if e.Namespace != o.Namespace {
				t.Errorf("event on pod %s/%s posted in namespace %s", o.Namespace, o.Name, e.Namespace)
			}
			out = append(out, drivertest.Event{Object: "Work/" + o.Namespace + "/" + o.Name, Type: e.Type, Reason: e.Reason})
		}
	}
	return out
}

func containsPod(pods []string, key string) bool {
	for _, p := range pods {
		if p == key {
			return true
		}
	}
	return false
}

func (h *harness) Pass(d time.Duration) { time.Sleep(d) }

func (h *harness) Now() time.Time { return time.Now() }

func (h *harness) Eventually(t *testing.T, check func() error) {
	t.Helper()
	eventually(t, 15*time.Second, check)
}

// TestRESTConfig: a kubeconfig that cannot be used is refused clearly.
func TestRESTConfig(t *testing.T) {
	if _, err := kube.RESTConfig(env.Kubeconfig()); err != nil {
		t.Fatalf("the test environment's kubeconfig: %v", err)
	}
	for name, kc := range map[string]string{
		"not YAML":  "{{{",
		"no server": "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n",
	} {
		_, err := kube.RESTConfig([]byte(kc))
		if err == nil || !strings.Contains(err.Error(), "kubeconfig") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}
