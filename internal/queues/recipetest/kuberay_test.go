package recipetest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
)

// The RayCluster's pods, by the labels KubeRay v1.6.0 gives them.
const (
	rayHeads   = "ray.io/cluster=train,ray.io/node-type=head"
	rayWorkers = "ray.io/cluster=train,ray.io/node-type=worker"
)

// drainTimeoutEnv is Ray's drain deadline after SIGTERM, in seconds.
const drainTimeoutEnv = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"

// TestRayWorkerReclaimedHeadKept: docs/queues.md's RayCluster, applied
// to KubeRay's operator, gets its head on a standard node and its
// workers on preemptible ones, with the grace period and Ray's drain
// timeout as written; a reclaim of a worker's node gives that worker its
// notice and leaves the head alone; KubeRay recreates the worker, which
// runs once the target is refilled. kwok runs no Ray: Ray's own drain is
// not tested here.
func TestRayWorkerReclaimedHeadKept(t *testing.T) {
	w := newWorld(t, 3)
	w.Start()
	w.Create("tenant", "p", 8, 16, 0)
	w.WaitReady("tenant", 2, 60*time.Second)
	h := record(t)

	rc := decodeSnippet(t, "raycluster")
	annotate(t, field(t, rc.Object, "spec", "headGroupSpec", "template"), map[string]string{kubeenv.ExitAfterAnnotation: "2s"})
	for _, g := range field(t, rc.Object, "spec", "workerGroupSpecs").([]any) {
		// A worker exits two seconds after its SIGTERM, as a Ray node
		// drained at once would.
		annotate(t, field(t, g.(map[string]any), "template"), map[string]string{kubeenv.ExitAfterAnnotation: "2s"})
	}
	create(t, rayClustersGVR, rc)

	c := env.Client()
	head := kubeenv.WaitRunning(t, c, ns, rayHeads, 1, nil, 60*time.Second)[0]
	workers := kubeenv.WaitRunning(t, c, ns, rayWorkers, 2, nil, 60*time.Second)
	if class := nodeClass(t, head.Spec.NodeName); class != string(domain.Standard) {
		t.Fatalf("head %s on %s, a %q node, want a standard node", head.Name, head.Spec.NodeName, class)
	}
	for _, p := range workers {
		if class := nodeClass(t, p.Spec.NodeName); class != string(domain.Preemptible) {
			t.Fatalf("worker %s on %s, a %q node, want a preemptible node", p.Name, p.Spec.NodeName, class)
		}
		checkWorkerSpec(t, &p)
	}

	// Another tenant takes one machine as standard capacity: it can only
	// be one of the workers' nodes.
	w.Create("other", "q", 8, 0, 0)
	drained := w.WaitDraining("tenant", 30*time.Second)
	var reclaimed, kept corev1.Pod
	for _, p := range workers {
		if p.Spec.NodeName == drained.Name {
			reclaimed = p
		} else {
			kept = p
		}
	}
	if reclaimed.Name == "" {
		t.Fatalf("node %s draining, which runs no worker (workers on %s and %s)", drained.Name, workers[0].Spec.NodeName, workers[1].Spec.NodeName)
	}
	var grace int64
	kubeenv.Eventually(t, 10*time.Second, func() error {
		states := h.pod(reclaimed.UID)
		cond, ok := disruption(states)
		if !ok {
			return fmt.Errorf("worker %s on the reclaimed node has no DisruptionTarget condition", reclaimed.Name)
		}
		if grace, ok = deletionGrace(states); !ok {
			return fmt.Errorf("worker %s has its DisruptionTarget condition (%s) but no SIGTERM yet", reclaimed.Name, cond.Reason)
		}
		return nil
	})
	// Its grace: min(terminationGracePeriodSeconds, seconds left), the
	// test's window being a minute.
	if window := int64(w.Window / time.Second); grace > window || grace < window-10 {
		t.Fatalf("worker %s deleted with a grace of %d s, want min(300, the seconds left of a %d s window)", reclaimed.Name, grace, window)
	}
	waitGone(t, w, drained.Name, 30*time.Second)
	t.Logf("worker %s on %s got its notice (grace %d s) and the node was released when it exited", reclaimed.Name, drained.Name, grace)

	// The head and the other worker are untouched.
	checkUntouched := func(p corev1.Pod) {
		t.Helper()
		got, err := c.CoreV1().Pods(ns).Get(t.Context(), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		if got.UID != p.UID || got.DeletionTimestamp != nil || got.Status.Phase != corev1.PodRunning {
			t.Fatalf("pod %s is %s (deleting: %v, uid %s), want the same pod running", p.Name, got.Status.Phase, got.DeletionTimestamp != nil, got.UID)
		}
		if _, ok := disruption(h.pod(p.UID)); ok {
			t.Fatalf("pod %s got a DisruptionTarget condition", p.Name)
		}
	}
	checkUntouched(head)
	checkUntouched(kept)
	for _, st := range []domain.NodeState{domain.NodeDraining, domain.NodeRemoving} {
		if n := w.Nodes("tenant", domain.Standard, st); len(n) > 0 {
			t.Fatalf("the tenant's standard node %s is %s", n[0].Name, st)
		}
	}

	// KubeRay replaces the worker; it waits for a preemptible node.
	var replacement types.UID
	kubeenv.Eventually(t, 30*time.Second, func() error {
		list, err := c.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: rayWorkers})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if p.UID != reclaimed.UID && p.UID != kept.UID {
				if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
					return fmt.Errorf("replacement worker %s is %s on %q, want Pending while there is no preemptible node for it", p.Name, p.Status.Phase, p.Spec.NodeName)
				}
				replacement = p.UID
				return nil
			}
		}
		return fmt.Errorf("no replacement worker yet")
	})

	// The other tenant lets the machine go: the target is refilled and the
	// replacement runs there.
	zero := 0
	w.Update("other", controller.Change{NumGPUs: &zero})
	w.WaitReady("tenant", 2, 60*time.Second)
	now := kubeenv.WaitRunning(t, c, ns, rayWorkers, 2, nil, 60*time.Second)
	for _, p := range now {
		if p.UID != replacement && p.UID != kept.UID {
			t.Fatalf("worker %s running, want the replacement and the worker kept", p.Name)
		}
		if class := nodeClass(t, p.Spec.NodeName); class != string(domain.Preemptible) {
			t.Fatalf("worker %s on a %q node, want preemptible", p.Name, class)
		}
		checkWorkerSpec(t, &p)
	}
	checkUntouched(head)
}

func formatOpt(v *int64) string {
	if v == nil {
		return "unset"
	}
	return strconv.FormatInt(*v, 10)
}

// checkWorkerSpec checks a worker pod as KubeRay built it from the docs'
// template: the whole window as its grace period, and Ray's drain
// deadline below it.
func checkWorkerSpec(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if g := p.Spec.TerminationGracePeriodSeconds; g == nil || *g != 300 {
		t.Fatalf("worker %s has terminationGracePeriodSeconds %s, want 300", p.Name, formatOpt(g))
	}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name != drainTimeoutEnv {
				continue
			}
			v, err := strconv.Atoi(e.Value)
			if err != nil || v <= 0 || v >= 300 {
				t.Fatalf("worker %s: %s=%q, want a number of seconds below the grace period, 300", p.Name, drainTimeoutEnv, e.Value)
			}
			return
		}
	}
	t.Fatalf("worker %s has no %s", p.Name, drainTimeoutEnv)
}
