// Package drivertest is the behaviour suite every driver.ClusterDriver
// passes: the simulated one (internal/sim), the Kubernetes one
// (internal/kube, against a real kube-apiserver) and the Slurm one
// (internal/slurm, against a real slurmctld). What the controller relies
// on is written here once, so the simulation cannot drift from what a real
// cluster does. The checks of what a platform shows (taints and
// annotations, drain reasons) run for the platforms that have them
// (Harness.Platform).
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

// Platforms a Harness can be.
const (
	Kubernetes = "kubernetes" // the simulation shows what Kubernetes does
	Slurm      = "slurm"
)

// PodSpec is a unit of work (a pod, a job) a test starts on a node.
type PodSpec struct {
	Namespace string
	Name      string
	Grace     time.Duration
	// ExitAfter is how long after SIGTERM its containers exit; negative:
	// they ignore SIGTERM and are killed when the grace period ends.
	ExitAfter time.Duration
	// DaemonSet: support work (Kubernetes only).
	DaemonSet bool
	// GPUs it requests (Kubernetes only: a Slurm job asks for one) and
	// its labels (Kubernetes only).
	GPUs   int
	Labels map[string]string
}

// NodeState is what the cluster shows of a node: what every platform
// shows (Class, Draining, Deadline, Cause), and Kubernetes' own fields.
type NodeState struct {
	// Class is the node's compute class as its cluster shows it (a
	// label, a feature).
	Class string
	// Draining: nothing new is placed on it (cordoned, drained).
	Draining bool
	// Deadline (RFC 3339) and Cause, as the node carries them; Cause is
	// "" if it carries none and "several" if more than one.
	Deadline, Cause string

	Labels        map[string]string
	Annotations   map[string]string
	Taints        []Taint
	Unschedulable bool
}

// KubeNode is the NodeState of a Kubernetes node.
func KubeNode(labels, annotations map[string]string, taints []Taint, unschedulable bool) NodeState {
	s := NodeState{Class: labels[domain.LabelComputeClass], Draining: unschedulable,
		Deadline: annotations[domain.AnnotationDeadline], Labels: labels, Annotations: annotations,
		Taints: taints, Unschedulable: unschedulable}
	for _, t := range taints {
		if t.Key == domain.TaintPreempted {
			if s.Cause != "" {
				s.Cause = "several"
			} else {
				s.Cause = t.Value
			}
		}
	}
	return s
}

// Taint is a taint as the cluster shows it.
type Taint struct {
	Key, Value, Effect string
}

// Event is a notice the tenant sees about a node ("Node/<name>") or a
// unit of work ("Work/<namespace>/<name>"): a Kubernetes Event, a Slurm
// node's Extra or job's AdminComment.
type Event struct {
	Object string
	Type   string
	Reason string
}

// Harness is one cluster and its stand-in kubelets or slurmds.
type Harness interface {
	// Platform is Kubernetes or Slurm.
	Platform() string
	Driver() driver.ClusterDriver
	ClusterID() string
	// Join does what the node's kubelet (or slurmd) does when it joins:
	// the node is registered and Ready.
	Join(t *testing.T, spec driver.NodeSpec)
	// StartPod runs a unit of work on the node.
	StartPod(t *testing.T, node string, p PodSpec)
	// Node returns the node as the cluster shows it; false if it has none.
	Node(t *testing.T, node string) (NodeState, bool)
	// Events lists the notices about the node and its work.
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
	t.Run("SetClass", func(t *testing.T) { testSetClass(t, h) })
	t.Run("Running", func(t *testing.T) { testRunning(t, h) })
}

func spec(h Harness, node string, class domain.ComputeClass) driver.NodeSpec {
	return driver.NodeSpec{ClusterID: h.ClusterID(), NodeName: node, MachineID: "m-" + node, Class: class, GPUs: 8,
		Labels: map[string]string{domain.LabelComputeClass: string(class), "example.com/rack": "r-" + node}}
}

// addNode adds the node as the controller does: AddNode, the kubelet
// joins, AddNode again until it is Ready.
func addNode(t *testing.T, h Harness, node string, class domain.ComputeClass) {
	t.Helper()
	ctx := context.Background()
	err := h.Driver().AddNode(ctx, spec(h, node, class))
	if errors.Is(err, driver.ErrNotReady) {
		h.Join(t, spec(h, node, class))
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
	if n.Class != "preemptible" {
		t.Fatalf("class %q", n.Class)
	}
	if h.Platform() == Kubernetes && (n.Labels[domain.LabelComputeClass] != "preemptible" || n.Labels["example.com/rack"] != "r-add-1") {
		t.Fatalf("labels %v", n.Labels)
	}
	if n.Draining {
		t.Fatal("a new node is draining")
	}
	addNode(t, h, "add-2", domain.Standard)
	if n, _ := h.Node(t, "add-2"); n.Class != "standard" {
		t.Fatalf("class %q", n.Class)
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
	n, ok := h.Node(t, "mark-1")
	if !ok {
		t.Fatal("node gone")
	}
	if !n.Draining {
		t.Fatal("not draining")
	}
	if n.Deadline != "2026-11-30T12:05:00Z" || n.Cause != "FairShare" {
		t.Fatalf("deadline %q, cause %q; want the deadline and the last cause", n.Deadline, n.Cause)
	}
	if n.Class != "preemptible" {
		t.Fatalf("class %q after the marks", n.Class)
	}
	if h.Platform() == Kubernetes {
		// The taint (same key and effect) is updated in place; labels
		// survive the marking.
		taint := Taint{Key: domain.TaintPreempted, Value: "FairShare", Effect: "NoSchedule"}
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
		if n.Labels[domain.LabelComputeClass] != "preemptible" {
			t.Fatalf("labels %v", n.Labels)
		}
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
			{Object: "Work/tenant-a/trainer", Type: "Warning", Reason: "PreemptionNotified"},
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
	support := h.Platform() == Kubernetes // Slurm has no support work
	want := 2
	if support {
		h.StartPod(t, "pods-1", PodSpec{Namespace: "kube-system", Name: "logs", Grace: 10 * time.Second, ExitAfter: -1, DaemonSet: true})
		want = 3
	}
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
		if len(pods) != want {
			return fmt.Errorf("pods %+v", list)
		}
		return nil
	})
	if p := pods["quick"]; p.Namespace != "tenant-a" || p.Stopping || p.Support {
		t.Fatalf("quick %+v", p)
	}
	// A pod asks for its grace; a Slurm job asks for none, and so has
	// until the deadline.
	if p := pods["quick"]; (h.Platform() == Kubernetes && p.Grace != 30*time.Second) || p.Grace < 30*time.Second {
		t.Fatalf("quick %+v", p)
	}
	if p := pods["logs"]; support && (!p.Support || p.Grace != 10*time.Second) {
		t.Fatalf("logs %+v", p)
	}
	// SIGTERM, on a node marked draining as a reclaim marks it first (a
	// Slurm job that exits after its notice is requeued, and must not come
	// back to the node): the pods are terminating, then go as their
	// containers exit or their grace (cut to the deadline) runs out.
	must(t, d.MarkDraining(ctx, id, "pods-1", driver.Marks{Cause: "Reclaimed", Deadline: h.Now().Add(time.Minute)}))
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
	if !support {
		h.Eventually(t, func() error { return wantPods(ctx, d, id, "pods-1") })
		must(t, d.Notify(ctx, id, "pods-1", pods["quick"], h.Now().Add(time.Minute)))
		return
	}
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

// testSetClass: a node converted in place is marked with its new class,
// and nothing else happens to it: its work runs on without a notice, it
// is not drained. Health tells the class the cluster shows.
func testSetClass(t *testing.T, h Harness) {
	ctx := context.Background()
	d, id := h.Driver(), h.ClusterID()
	addNode(t, h, "conv-1", domain.Preemptible)
	h.StartPod(t, "conv-1", PodSpec{Namespace: "tenant-a", Name: "conv-trainer", Grace: 30 * time.Second, ExitAfter: -1})
	h.Eventually(t, func() error { return wantPods(ctx, d, id, "conv-1", "conv-trainer") })
	for _, class := range []domain.ComputeClass{domain.Standard, domain.Preemptible} {
		for range 2 { // idempotent
			must(t, d.SetClass(ctx, spec(h, "conv-1", class)))
		}
		h.Eventually(t, func() error {
			n, ok := h.Node(t, "conv-1")
			if !ok || n.Class != string(class) || n.Draining {
				return fmt.Errorf("node after SetClass(%s): %+v (found %v)", class, n, ok)
			}
			if hl, err := d.Health(ctx, id, "conv-1"); err != nil || hl.Class != class || hl.Gone || !hl.NotReadySince.IsZero() {
				return fmt.Errorf("health after SetClass(%s): %+v, %v", class, hl, err)
			}
			return nil
		})
		work, err := d.ListWork(ctx, id, "conv-1")
		if err != nil || len(work) != 1 || work[0].Stopping {
			t.Fatalf("work after SetClass(%s): %+v, %v; want the trainer running, not stopping", class, work, err)
		}
		if evs := h.Events(t, "conv-1"); len(evs) != 0 {
			t.Fatalf("notices after SetClass(%s): %+v, want none", class, evs)
		}
	}
	if err := d.SetClass(ctx, spec(h, "missing-1", domain.Standard)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("SetClass on a missing node: %v, want domain.ErrNotFound", err)
	}
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

// testRunning: Running lists the tenant's work on a node for cost
// allocation, with what groups it (namespace or account, labels), its
// GPUs and start; support work and (on Kubernetes) pods holding no GPU
// are not listed; work that ended is gone from it.
func testRunning(t *testing.T, h Harness) {
	ctx := context.Background()
	d, id := h.Driver(), h.ClusterID()
	addNode(t, h, "running-1", domain.Preemptible)
	before := h.Now().Add(-time.Second)
	h.StartPod(t, "running-1", PodSpec{Namespace: "vision", Name: "train", Grace: time.Second, ExitAfter: 0, GPUs: 2,
		Labels: map[string]string{"team": "vision"}})
	kube := h.Platform() == Kubernetes
	if kube {
		h.StartPod(t, "running-1", PodSpec{Namespace: "vision", Name: "cpu-only", Grace: time.Second, ExitAfter: 0})
		h.StartPod(t, "running-1", PodSpec{Namespace: "kube-system", Name: "logs-r", Grace: time.Second, ExitAfter: 0,
			DaemonSet: true, GPUs: 1})
	}
	var got []domain.Running
	h.Eventually(t, func() error {
		var ok bool
		if got, ok = d.Running(id, "running-1"); !ok || len(got) != 1 {
			return fmt.Errorf("running (%v): %+v", ok, got)
		}
		return nil
	})
	r := got[0]
	// A pod is listed once bound, its start once its kubelet reports it
	// (zero until then: the recorder counts from when it first saw it).
	if r.Key == "" || r.Name != "train" || !r.Start.IsZero() && (r.Start.Before(before) || r.Start.After(h.Now().Add(time.Second))) {
		t.Fatalf("train: %+v (started after %v)", r, before)
	}
	if kube && (r.Namespace != "vision" || r.GPUs != 2 || r.Labels["team"] != "vision" || r.Job != "pod/vision/train") {
		t.Fatalf("train on Kubernetes: %+v", r)
	}
	if !kube && (r.Account != "vision" || r.GPUs != 1 || r.Job == "" || r.Labels["user"] == "") {
		t.Fatalf("train on Slurm: %+v", r)
	}
	if _, ok := d.Running(id, "no-such-node"); ok && !kube {
		t.Error("a node the cluster does not have is known")
	}
	work, err := d.ListWork(ctx, id, "running-1")
	must(t, err)
	for _, w := range work {
		must(t, d.Notify(ctx, id, "running-1", w, time.Time{}))
	}
	h.Eventually(t, func() error {
		if got, ok := d.Running(id, "running-1"); !ok || len(got) != 0 {
			return fmt.Errorf("after its end (%v): %+v", ok, got)
		}
		return nil
	})
}
