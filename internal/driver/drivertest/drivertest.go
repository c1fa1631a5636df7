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
	Taints        []Taint
	Unschedulable bool
}

// Taint is a taint as the cluster shows it.
type Taint struct {
	Key, Value, Effect string
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
	// Now is the time on the driver's clock.
	Now() time.Time
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
	deadline := time.Date(2026, 11, 30, 12, 5, 0, 0, time.UTC)
	m := driver.Marks{Cause: "Reclaimed", Deadline: deadline}
	for range 2 { // every call is idempotent
		must(t, d.MarkDraining(ctx, id, "mark-1", m))
	}
	// Another cause: the taint (same key and effect) is updated in place.
	m.Cause = "FairShare"
	must(t, d.MarkDraining(ctx, id, "mark-1", m))
	taint := Taint{Key: domain.TaintPreempted, Value: "FairShare", Effect: "NoSchedule"}
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
	var ours []Taint
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
	if err := d.MarkDraining(ctx, id, "missing-1", m); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("MarkDraining on a missing node: %v", err)
	}
	must(t, d.Release(ctx, id, "mark-1"))
	must(t, d.Release(ctx, id, "mark-1"))
	h.Eventually(t, func() error {
		if _, ok := h.Node(t, "mark-1"); ok {
			return errors.New("node still there after Release")
		}
		return nil
	})
}

func testEvents(t *testing.T, h Harness) {
	ctx := context.Background()
	d, id := h.Driver(), h.ClusterID()
	addNode(t, h, "ev-1", domain.Preemptible)
	h.StartPod(t, "ev-1", PodSpec{Namespace: "tenant-a", Name: "trainer", Grace: 30 * time.Second, ExitAfter: -1})
	var pod driver.Work
	h.Eventually(t, func() error {
		pods, err := d.ListWork(ctx, id, "ev-1")
		if err != nil || len(pods) != 1 {
			return fmt.Errorf("pods %+v, %v", pods, err)
		}
		pod = pods[0]
		return nil
	})
	e := driver.Notice{Warning: true, Reason: "PreemptionNotified", Message: "node ev-1 is reclaimed; deadline 2026-11-30T12:05:00Z"}
	for range 2 { // posting again after a crash leaves one Event
		must(t, d.PostNotice(ctx, id, "ev-1", nil, e))
		must(t, d.PostNotice(ctx, id, "ev-1", &pod, e))
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
	pods := map[string]driver.Work{}
	h.Eventually(t, func() error {
		list, err := d.ListWork(ctx, id, "pods-1")
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
	if p := pods["quick"]; p.Namespace != "tenant-a" || p.Grace != 30*time.Second || p.Stopping || p.Support {
		t.Fatalf("quick %+v", p)
	}
	if p := pods["logs"]; !p.Support || p.Grace != 10*time.Second {
		t.Fatalf("logs %+v", p)
	}
	// SIGTERM: the pods are terminating, then go as their containers exit
	// or their grace (cut to the deadline) runs out.
	must(t, d.Notify(ctx, id, "pods-1", pods["quick"], h.Now().Add(time.Minute)))
	must(t, d.Notify(ctx, id, "pods-1", pods["stubborn"], h.Now().Add(2*time.Second)))
	h.Eventually(t, func() error {
		list, err := d.ListWork(ctx, id, "pods-1")
		if err != nil {
			return err
		}
		for _, p := range list {
			if p.Name == "stubborn" && !p.Stopping {
				return fmt.Errorf("stubborn not terminating: %+v", p)
			}
		}
		return nil
	})
	h.Pass(3 * time.Second)
	h.Eventually(t, func() error { return wantPods(ctx, d, id, "pods-1", "logs") })
	// Past the deadline: gone at once. Notifying a pod that is gone is
	// fine.
	must(t, d.Notify(ctx, id, "pods-1", pods["logs"], time.Time{}))
	h.Eventually(t, func() error { return wantPods(ctx, d, id, "pods-1") })
	must(t, d.Notify(ctx, id, "pods-1", pods["logs"], time.Time{}))
	must(t, d.Notify(ctx, id, "pods-1", pods["quick"], h.Now().Add(time.Minute)))
}

func testMissingNode(t *testing.T, h Harness) {
	ctx := context.Background()
	d, id := h.Driver(), h.ClusterID()
	if err := d.MarkDraining(ctx, id, "missing-1", driver.Marks{Cause: "Reclaimed", Deadline: h.Now()}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("MarkDraining on a missing node: %v, want domain.ErrNotFound", err)
	}
	if pods, err := d.ListWork(ctx, id, "missing-1"); err != nil || len(pods) != 0 {
		t.Errorf("ListWork on a missing node: %v, %v", pods, err)
	}
	must(t, d.Notify(ctx, id, "missing-1", driver.Work{Namespace: "default", Name: "nope"}, time.Time{}))
	must(t, d.Release(ctx, id, "missing-1"))
}

func wantPods(ctx context.Context, d driver.ClusterDriver, clusterID, node string, names ...string) error {
	list, err := d.ListWork(ctx, clusterID, node)
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
