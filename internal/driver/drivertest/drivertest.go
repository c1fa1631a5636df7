// Package drivertest is the behaviour suite every driver.ClusterDriver
// passes: the simulated one (internal/sim) and the Kubernetes one
// (internal/kube, against a real kube-apiserver). What the controller
// relies on is written here once, so the simulation cannot drift from
// what a real cluster does.
package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// PodSpec is a pod a test starts on a node.
type PodSpec struct {
	Namespace string
	Name      string
	Grace     time.Duration
	// ExitAfter is how long after SIGTERM its containers exit; negative:
	// they ignore SIGTERM and are killed when the grace period ends.
	ExitAfter time.Duration
	DaemonSet bool
}

// NodeState is what the cluster shows of a node.
type NodeState struct {
	Labels        map[string]string
	Annotations   map[string]string
	Taints        []driver.Taint
	Unschedulable bool
}

// Event is a Kubernetes Event about a node ("Node/<name>") or a pod
// ("Pod/<namespace>/<name>").
type Event struct {
	Object string
	Type   string
	Reason string
}

// Harness is one cluster and its stand-in kubelets.
type Harness interface {
	Driver() driver.ClusterDriver
	ClusterID() string
	// Join does what the node's kubelet does when it joins: the node is
	// registered and Ready.
	Join(t *testing.T, node string)
	// StartPod runs a pod on the node.
	StartPod(t *testing.T, node string, p PodSpec)
	// Node returns the node as the cluster shows it; false if it has none.
	Node(t *testing.T, node string) (NodeState, bool)
	// Events lists the Events about the node and its pods.
	Events(t *testing.T, node string) []Event
	// Pass lets d go by (a fake clock advances; a real cluster waits).
	Pass(d time.Duration)
	// Eventually retries check until it passes (a real cluster's watches
	// lag a little); a simulated cluster checks once.
	Eventually(t *testing.T, check func() error)
}

// Run runs the suite. Every test uses its own node names, so one cluster
// serves them all.
func Run(t *testing.T, h Harness) {
	t.Run("AddNode", func(t *testing.T) { testAddNode(t, h) })
	t.Run("MarkNode", func(t *testing.T) { testMarkNode(t, h) })
	t.Run("Events", func(t *testing.T) { testEvents(t, h) })
	t.Run("Pods", func(t *testing.T) { testPods(t, h) })
	t.Run("MissingNode", func(t *testing.T) { testMissingNode(t, h) })
}

func spec(h Harness, node string, class domain.ComputeClass) driver.NodeSpec {
	return driver.NodeSpec{ClusterID: h.ClusterID(), NodeName: node, MachineID: "m-" + node, Class: class, GPUs: 8,
		Labels: map[string]string{domain.LabelComputeClass: string(class), "sparecap.dev/machine": "m-" + node}}
}

// addNode adds the node as the controller does: AddNode, the kubelet
// joins, AddNode again until it is Ready.
func addNode(t *testing.T, h Harness, node string, class domain.ComputeClass) {
	t.Helper()
	ctx := context.Background()
	err := h.Driver().AddNode(ctx, spec(h, node, class))
	if errors.Is(err, driver.ErrNotReady) {
		h.Join(t, node)
		h.Eventually(t, func() error { return h.Driver().AddNode(ctx, spec(h, node, class)) })
		return
	}
	if err != nil {
		t.Fatalf("add node %s: %v", node, err)
	}
}

func testAddNode(t *testing.T, h Harness) {
	ctx := context.Background()
	addNode(t, h, "add-1", domain.Preemptible)
	// Again: nothing changes, no error.
	if err := h.Driver().AddNode(ctx, spec(h, "add-1", domain.Preemptible)); err != nil {
		t.Fatalf("second AddNode: %v", err)
	}
	n, ok := h.Node(t, "add-1")
	if !ok {
		t.Fatal("node not registered")
	}
	if n.Labels[domain.LabelComputeClass] != "preemptible" || n.Labels["sparecap.dev/machine"] != "m-add-1" {
		t.Fatalf("labels %v", n.Labels)
	}
	if n.Unschedulable {
		t.Fatal("a new node is schedulable")
	}
	addNode(t, h, "add-2", domain.Standard)
	if n, _ := h.Node(t, "add-2"); n.Labels[domain.LabelComputeClass] != "standard" {
		t.Fatalf("labels %v", n.Labels)
	}
}

func testMarkNode(t *testing.T, h Harness) {
	ctx := context.Background()
	d, id := h.Driver(), h.ClusterID()
	addNode(t, h, "mark-1", domain.Preemptible)
	taint := driver.Taint{Key: domain.TaintPreempted, Value: "Reclaimed", Effect: "NoSchedule"}
	for range 2 { // every call is idempotent
		must(t, d.Cordon(ctx, id, "mark-1"))
		must(t, d.Taint(ctx, id, "mark-1", taint))
		must(t, d.Annotate(ctx, id, "mark-1", domain.AnnotationDeadline, "2026-11-30T12:05:00Z"))
	}
	// Same key and effect with another value: updated in place.
	taint.Value = "FairShare"
	must(t, d.Taint(ctx, id, "mark-1", taint))
	n, ok := h.Node(t, "mark-1")
	if !ok {
		t.Fatal("node gone")
	}
	if !n.Unschedulable {
		t.Fatal("not cordoned")
	}
	if n.Annotations[domain.AnnotationDeadline] != "2026-11-30T12:05:00Z" {
		t.Fatalf("annotations %v", n.Annotations)
	}
	var ours []driver.Taint
	for _, tt := range n.Taints {
		if tt.Key == domain.TaintPreempted {
			ours = append(ours, tt)
		}
	}
	if len(ours) != 1 || ours[0] != taint {
		t.Fatalf("taints %+v, want one %+v", n.Taints, taint)
	}
	// Labels survive the marking.
	if n.Labels[domain.LabelComputeClass] != "preemptible" {
		t.Fatalf("labels %v", n.Labels)
	}
	// A driver that marks in one write ends with the same node.
	if m, ok := d.(driver.Marker); ok {
		addNode(t, h, "mark-2", domain.Preemptible)
		for range 2 {
			must(t, m.MarkDraining(ctx, id, "mark-2", taint, map[string]string{domain.AnnotationDeadline: "2026-11-30T12:05:00Z"}))
		}
		n2, _ := h.Node(t, "mark-2")
		if !n2.Unschedulable || n2.Annotations[domain.AnnotationDeadline] != "2026-11-30T12:05:00Z" ||
			!slices.Contains(n2.Taints, taint) || n2.Labels[domain.LabelComputeClass] != "preemptible" {
			t.Fatalf("after MarkDraining: %+v", n2)
		}
		if err := m.MarkDraining(ctx, id, "missing-1", taint, nil); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("MarkDraining on a missing node: %v", err)
		}
	}
	must(t, d.DeleteNode(ctx, id, "mark-1"))
	must(t, d.DeleteNode(ctx, id, "mark-1"))
	h.Eventually(t, func() error {
		if _, ok := h.Node(t, "mark-1"); ok {
			return errors.New("node still there after DeleteNode")
		}
		return nil
	})
}

func testEvents(t *testing.T, h Harness) {
	ctx := context.Background()
	d, id := h.Driver(), h.ClusterID()
	addNode(t, h, "ev-1", domain.Preemptible)
	h.StartPod(t, "ev-1", PodSpec{Namespace: "tenant-a", Name: "trainer", Grace: 30 * time.Second, ExitAfter: -1})
	var pod driver.Pod
	h.Eventually(t, func() error {
		pods, err := d.ListPods(ctx, id, "ev-1")
		if err != nil || len(pods) != 1 {
			return fmt.Errorf("pods %+v, %v", pods, err)
		}
		pod = pods[0]
		return nil
	})
	e := driver.NodeEvent{Type: "Warning", Reason: "PreemptionNotified", Message: "node ev-1 is reclaimed; deadline 2026-11-30T12:05:00Z"}
	for range 2 { // posting again after a crash leaves one Event
		must(t, d.PostEvent(ctx, id, "ev-1", e))
		must(t, d.PostPodEvent(ctx, id, "ev-1", pod, e))
	}
	h.Eventually(t, func() error {
		got := h.Events(t, "ev-1")
		want := []Event{
			{Object: "Node/ev-1", Type: "Warning", Reason: "PreemptionNotified"},
			{Object: "Pod/tenant-a/trainer", Type: "Warning", Reason: "PreemptionNotified"},
		}
		slices.SortFunc(got, func(a, b Event) int { return strings.Compare(a.Object, b.Object) })
		if !slices.Equal(got, want) {
			return fmt.Errorf("events %+v, want %+v", got, want)
		}
		return nil
	})
}

func testPods(t *testing.T, h Harness) {
	ctx := context.Background()
	d, id := h.Driver(), h.ClusterID()
	addNode(t, h, "pods-1", domain.Preemptible)
	h.StartPod(t, "pods-1", PodSpec{Namespace: "tenant-a", Name: "quick", Grace: 30 * time.Second, ExitAfter: time.Second})
	h.StartPod(t, "pods-1", PodSpec{Namespace: "tenant-a", Name: "stubborn", Grace: 60 * time.Second, ExitAfter: -1})
	h.StartPod(t, "pods-1", PodSpec{Namespace: "kube-system", Name: "logs", Grace: 10 * time.Second, ExitAfter: -1, DaemonSet: true})
	pods := map[string]driver.Pod{}
	h.Eventually(t, func() error {
		list, err := d.ListPods(ctx, id, "pods-1")
		if err != nil {
			return err
		}
		clear(pods)
		for _, p := range list {
			pods[p.Name] = p
		}
		if len(pods) != 3 {
			return fmt.Errorf("pods %+v", list)
		}
		return nil
	})
	if p := pods["quick"]; p.Namespace != "tenant-a" || p.TerminationGracePeriod != 30*time.Second || p.Terminating || p.DaemonSet {
		t.Fatalf("quick %+v", p)
	}
	if p := pods["logs"]; !p.DaemonSet || p.TerminationGracePeriod != 10*time.Second {
		t.Fatalf("logs %+v", p)
	}
	// SIGTERM: the pods are terminating, then go as their containers exit
	// or their grace runs out.
	must(t, d.DeletePod(ctx, id, "pods-1", pods["quick"], 30*time.Second))
	must(t, d.DeletePod(ctx, id, "pods-1", pods["stubborn"], 2*time.Second))
	h.Eventually(t, func() error {
		list, err := d.ListPods(ctx, id, "pods-1")
		if err != nil {
			return err
		}
		for _, p := range list {
			if p.Name == "stubborn" && !p.Terminating {
				return fmt.Errorf("stubborn not terminating: %+v", p)
			}
		}
		return nil
	})
	h.Pass(3 * time.Second)
	h.Eventually(t, func() error { return wantPods(ctx, d, id, "pods-1", "logs") })
	// Force deletion: gone at once. Deleting a pod that is gone is fine.
	must(t, d.DeletePod(ctx, id, "pods-1", pods["logs"], 0))
	h.Eventually(t, func() error { return wantPods(ctx, d, id, "pods-1") })
	must(t, d.DeletePod(ctx, id, "pods-1", pods["logs"], 0))
	must(t, d.DeletePod(ctx, id, "pods-1", pods["quick"], 30*time.Second))
}

func testMissingNode(t *testing.T, h Harness) {
	ctx := context.Background()
	d, id := h.Driver(), h.ClusterID()
	for name, err := range map[string]error{
		"Cordon":   d.Cordon(ctx, id, "missing-1"),
		"Taint":    d.Taint(ctx, id, "missing-1", driver.Taint{Key: domain.TaintPreempted, Effect: "NoSchedule"}),
		"Annotate": d.Annotate(ctx, id, "missing-1", domain.AnnotationDeadline, "x"),
	} {
		if !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%s on a missing node: %v, want domain.ErrNotFound", name, err)
		}
	}
	if pods, err := d.ListPods(ctx, id, "missing-1"); err != nil || len(pods) != 0 {
		t.Errorf("ListPods on a missing node: %v, %v", pods, err)
	}
	must(t, d.DeletePod(ctx, id, "missing-1", driver.Pod{Namespace: "default", Name: "nope"}, 0))
	must(t, d.DeleteNode(ctx, id, "missing-1"))
}

func wantPods(ctx context.Context, d driver.ClusterDriver, clusterID, node string, names ...string) error {
	list, err := d.ListPods(ctx, clusterID, node)
	if err != nil {
		return err
	}
	var got []string
	for _, p := range list {
		got = append(got, p.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		return fmt.Errorf("pods on %s: %v, want %v", node, got, names)
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
