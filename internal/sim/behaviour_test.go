package sim

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/driver/drivertest"
)

// TestBehaviour runs the driver behaviour suite that the Kubernetes
// driver passes against a real API server.
func TestBehaviour(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	f, err := New(Config{Clock: clk, Pods: []PodTemplate{}})
	if err != nil {
		t.Fatal(err)
	}
	drivertest.Run(t, &harness{f: f, clk: clk})
}

type harness struct {
	f   *Fleet
	clk *clock.Fake
}

func (h *harness) Platform() string             { return drivertest.Kubernetes }
func (h *harness) Driver() driver.ClusterDriver { return h.f }
func (h *harness) ClusterID() string            { return "c-behaviour" }

// Join: the simulated AddNode registers the node Ready itself.
func (h *harness) Join(t *testing.T, spec driver.NodeSpec) {}

func (h *harness) StartPod(t *testing.T, node string, p drivertest.PodSpec) {
	t.Helper()
	err := h.f.AddPod(h.ClusterID(), node, PodTemplate{Namespace: p.Namespace, Name: p.Name,
		TerminationGracePeriod: p.Grace, ExitAfter: p.ExitAfter, DaemonSet: p.DaemonSet, GPUs: p.GPUs, Labels: p.Labels})
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) Node(t *testing.T, node string) (drivertest.NodeState, bool) {
	v, ok := h.f.Node(h.ClusterID(), node)
	var taints []drivertest.Taint
	for _, t := range v.Taints {
		taints = append(taints, drivertest.Taint(t))
	}
	return drivertest.KubeNode(v.Labels, v.Annotations, taints, v.Unschedulable), ok
}

func (h *harness) Events(t *testing.T, node string) []drivertest.Event {
	v, _ := h.f.Node(h.ClusterID(), node)
	var out []drivertest.Event
	for _, e := range v.Events {
		obj := "Node/" + node
		if e.Pod != "" {
			obj = "Work/" + e.Pod
		}
		out = append(out, drivertest.Event{Object: obj, Type: e.Type, Reason: e.Reason})
	}
	return out
}

func (h *harness) Pass(d time.Duration) { h.clk.Step(d) }

func (h *harness) Now() time.Time { return h.clk.Now() }

func (h *harness) Eventually(t *testing.T, check func() error) {
	t.Helper()
	if err := check(); err != nil {
		t.Fatal(err)
	}
}
