package recipetest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/testworld"
)

// JobSet's labels on the pods of a set, as of v0.11.1.
const (
	jobSetNameLabel     = "jobset.sigs.k8s.io/jobset-name"
	restartAttemptLabel = "jobset.sigs.k8s.io/restart-attempt"
)

// jobSetState is what the tests read of a JobSet's status.
type jobSetState struct {
	restarts, towardsMax int64
	// conditions by type: "True" conditions only, with their reason.
	conditions map[string]string
}

func (s jobSetState) String() string {
	return fmt.Sprintf("restarts %d, restartsCountTowardsMax %d, conditions %v", s.restarts, s.towardsMax, s.conditions)
}

func readJobSet(t *testing.T, name string) (jobSetState, error) {
	t.Helper()
	u, err := env.Dynamic().Resource(jobSetsGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return jobSetState{}, err
	}
	var s jobSetState
	s.restarts, _, _ = unstructured.NestedInt64(u.Object, "status", "restarts")
	s.towardsMax, _, _ = unstructured.NestedInt64(u.Object, "status", "restartsCountTowardsMax")
	s.conditions = map[string]string{}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] == "True" {
			s.conditions[fmt.Sprint(m["type"])] = fmt.Sprint(m["reason"])
		}
	}
	return s, nil
}

// waitJobSet waits until cond holds of the JobSet and returns its state.
// A JobSet that fails while cond does not hold fails the test at once.
func waitJobSet(t *testing.T, name string, within time.Duration, what string, cond func(jobSetState) bool) jobSetState {
	t.Helper()
	var got jobSetState
	kubeenv.Eventually(t, within, func() error {
		s, err := readJobSet(t, name)
		if err != nil {
			return err
		}
		if cond(s) {
			got = s
			return nil
		}
		if reason, failed := s.conditions["Failed"]; failed {
			t.Fatalf("JobSet %s failed (%s) while waiting until %s: %s; events: %s", name, reason, what, s, kubeenv.Events(t.Context(), env.Client(), ns))
		}
		return fmt.Errorf("JobSet %s is not %s: %s", name, what, s)
	})
	return got
}

// submitJobSet creates docs/queues.md's JobSet (snippet jobset), its
// workers doing work of runFor and exiting a second after their SIGTERM,
// as kwok plays them.
func submitJobSet(t *testing.T, runFor string) string {
	t.Helper()
	js := decodeSnippet(t, "jobset")
	for _, rj := range field(t, js.Object, "spec", "replicatedJobs").([]any) {
		annotate(t, field(t, rj.(map[string]any), "template", "spec", "template"), map[string]string{
			kubeenv.RunForAnnotation: runFor, kubeenv.ExitAfterAnnotation: "1s"})
	}
	return create(t, jobSetsGVR, js).GetName()
}

// runningWorkers waits until n workers of the JobSet's restart attempt
// run, and checks that each is on a preemptible node of the tenant.
func runningWorkers(t *testing.T, w *testworld.World, name string, attempt, n int) []corev1.Pod {
	t.Helper()
	pods := kubeenv.WaitRunning(t, env.Client(), ns, fmt.Sprintf("%s=%s,%s=%d", jobSetNameLabel, name, restartAttemptLabel, attempt), n, nil, 60*time.Second)
	ready := map[string]bool{}
	for _, nd := range w.Nodes("tenant", domain.Preemptible, domain.NodeReady) {
		ready[nd.Name] = true
	}
	for _, p := range pods {
		if !ready[p.Spec.NodeName] || nodeClass(t, p.Spec.NodeName) != string(domain.Preemptible) {
			t.Fatalf("worker %s runs on %q, want a ready preemptible node of the tenant (%v)", p.Name, p.Spec.NodeName, ready)
		}
	}
	return pods
}

// TestJobSetReclaimsDoNotSpendMaxRestarts: docs/queues.md's JobSet runs
// on the tenant's preemptible nodes; a reclaim of one of its nodes
// restarts it without counting toward maxRestarts (the reclaimed worker
// got its notice, and its Job failed with reason PodFailurePolicy); a
// second reclaim, one more than maxRestarts, does not fail it; and it
// completes once the target is refilled.
func TestJobSetReclaimsDoNotSpendMaxRestarts(t *testing.T) {
	w := newWorld(t, 2)
	w.Start()
	w.Create("tenant", "p", 0, 16, 0)
	w.WaitReady("tenant", 2, 60*time.Second)
	h := record(t)

	name := submitJobSet(t, "25s")
	runningWorkers(t, w, name, 0, 2)

	reclaimWorker(t, w, h, name)

	// The new attempt: one worker on the node left, the other waits.
	pods := runningWorkers(t, w, name, 1, 1)
	pending, err := env.Client().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{
		LabelSelector: fmt.Sprintf("%s=%s,%s=1", jobSetNameLabel, name, restartAttemptLabel), FieldSelector: "status.phase=Pending"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pending.Items) != 1 {
		t.Fatalf("%d workers of the new attempt pending, want 1 waiting for a preemptible node", len(pending.Items))
	}

	// A second reclaim takes that node too: one more than maxRestarts.
	sixteen := 16
	w.Update("other", controller.Change{NumGPUs: &sixteen})
	second := w.WaitDraining("tenant", 30*time.Second)
	if second.Name != pods[0].Spec.NodeName {
		t.Fatalf("node %s draining, want %s, where the new attempt's worker runs", second.Name, pods[0].Spec.NodeName)
	}
	s := waitJobSet(t, name, 30*time.Second, "restarted twice", func(s jobSetState) bool { return s.restarts == 2 })
	if s.towardsMax != 0 {
		t.Fatalf("after two reclaims: %s, want no restart counted toward maxRestarts", s)
	}
	checkReclaimed(t, h, second.Name)
	checkBlocking(t, h, name, 1)

	// The other tenant lets both machines go: the target is refilled and
	// the set completes.
	zero := 0
	w.Update("other", controller.Change{NumGPUs: &zero})
	w.WaitReady("tenant", 2, 60*time.Second)
	runningWorkers(t, w, name, 2, 2)
	s = waitJobSet(t, name, 90*time.Second, "completed", func(s jobSetState) bool { return s.conditions["Completed"] != "" })
	if s.restarts != 2 || s.towardsMax != 0 {
		t.Fatalf("completed with %s, want 2 restarts, none counted toward maxRestarts", s)
	}
	t.Logf("completed after two reclaims: %s", s)
}

// reclaimWorker has another tenant take one of the JobSet's two machines
// as standard capacity, and checks the reclaim of the worker there: its
// notice, its Job failed by the policy, the set restarted once (blocking)
// without spending maxRestarts, and the node gone.
func reclaimWorker(t *testing.T, w *testworld.World, h *history, name string) {
	t.Helper()
	w.Create("other", "q", 8, 0, 0)
	first := w.WaitDraining("tenant", 30*time.Second)
	s := waitJobSet(t, name, 30*time.Second, "restarted once", func(s jobSetState) bool { return s.restarts == 1 })
	if s.towardsMax != 0 {
		t.Fatalf("after a reclaim: %s, want the restart not counted toward maxRestarts", s)
	}
	checkReclaimed(t, h, first.Name)
	checkBlocking(t, h, name, 0)
	waitGone(t, w, first.Name, 30*time.Second)
}

// checkReclaimed checks that the JobSet's worker on the reclaimed node got
// sparecap's notice (the DisruptionTarget condition, deleted with a
// grace period), and that its Job failed by the pod failure policy with
// the message the docs quote.
func checkReclaimed(t *testing.T, h *history, node string) {
	t.Helper()
	var worker *corev1.Pod
	kubeenv.Eventually(t, 10*time.Second, func() error {
		for _, p := range h.podsOn(node) {
			if p.Labels[jobSetNameLabel] == "" {
				continue
			}
			states := h.pod(p.UID)
			if _, ok := disruption(states); !ok {
				continue
			}
			if _, ok := deletionGrace(states); !ok {
				return fmt.Errorf("worker %s on %s has its DisruptionTarget condition but was not deleted gracefully", p.Name, node)
			}
			worker = p
			return nil
		}
		return fmt.Errorf("no worker on %s with the DisruptionTarget condition", node)
	})
	kubeenv.Eventually(t, 10*time.Second, func() error {
		j, ok := h.failedJob(jobOf(worker))
		if !ok {
			return fmt.Errorf("the Job of the reclaimed worker %s has not failed", worker.Name)
		}
		if j.Cond.Reason != "PodFailurePolicy" || !strings.Contains(j.Cond.Message, ns+"/"+worker.Name+" has condition DisruptionTarget") {
			t.Fatalf("job %s of the reclaimed worker %s failed with %s: %q, want PodFailurePolicy and a message that says it \"has condition DisruptionTarget\"",
				j.Name, worker.Name, j.Cond.Reason, j.Cond.Message)
		}
		t.Logf("reclaim of %s: job %s failed: %s: %s", node, j.Name, j.Cond.Reason, j.Cond.Message)
		return nil
	})
}

// checkBlocking checks the restart strategy the docs chose,
// BlockingRecreate: no worker of the JobSet's restart attempt+1 was
// created before every worker of attempt was gone, in the order the API
// server's watch reported them.
func checkBlocking(t *testing.T, h *history, name string, attempt int) {
	t.Helper()
	old, next := strconv.Itoa(attempt), strconv.Itoa(attempt+1)
	kubeenv.Eventually(t, 30*time.Second, func() error {
		var live []string
		created := false
		for _, e := range h.events() {
			if e.pod.Labels[jobSetNameLabel] != name {
				continue
			}
			switch a := e.pod.Labels[restartAttemptLabel]; {
			case a == old && !e.deleted:
				live = append(live, e.pod.Name)
			case a == old && e.deleted:
				live = slices.DeleteFunc(live, func(n string) bool { return n == e.pod.Name })
			case a == next && !e.deleted:
				if len(live) > 0 {
					t.Fatalf("worker %s of attempt %s created while %v of attempt %s were still there", e.pod.Name, next, live, old)
				}
				created = true
			}
		}
		if !created {
			return fmt.Errorf("no worker of attempt %s yet", next)
		}
		return nil
	})
}

// TestJobSetRealFailureSpendsMaxRestarts is the control: with the same
// JobSet, a worker whose container exits with an error (not a reclaim)
// gets its Job failed with BackoffLimitExceeded, which the docs' rule
// does not match, so the restart counts toward maxRestarts; the second
// such failure fails the set.
func TestJobSetRealFailureSpendsMaxRestarts(t *testing.T) {
	w := newWorld(t, 2)
	w.Start()
	w.Create("tenant", "p", 0, 16, 0)
	w.WaitReady("tenant", 2, 60*time.Second)
	h := record(t)

	name := submitJobSet(t, "60s")
	crash := func(attempt int) {
		t.Helper()
		p := runningWorkers(t, w, name, attempt, 2)[0]
		exitWorker(t, p, 1)
		kubeenv.Eventually(t, 10*time.Second, func() error {
			j, ok := h.failedJob(jobOf(&p))
			if !ok {
				return fmt.Errorf("the Job of worker %s has not failed", p.Name)
			}
			if j.Cond.Reason != "BackoffLimitExceeded" {
				t.Fatalf("job %s failed with %s: %s, want BackoffLimitExceeded", j.Name, j.Cond.Reason, j.Cond.Message)
			}
			t.Logf("worker %s exited with code 1: job %s failed: %s: %s", p.Name, j.Name, j.Cond.Reason, j.Cond.Message)
			return nil
		})
	}

	crash(0)
	s := waitJobSet(t, name, 30*time.Second, "restarted once", func(s jobSetState) bool { return s.restarts == 1 })
	if s.towardsMax != 1 {
		t.Fatalf("after a container's exit code 1: %s, want the restart counted toward maxRestarts", s)
	}

	crash(1)
	kubeenv.Eventually(t, 30*time.Second, func() error {
		s, err := readJobSet(t, name)
		if err != nil {
			return err
		}
		if s.conditions["Failed"] != "ReachedMaxRestarts" {
			return fmt.Errorf("JobSet %s not failed with ReachedMaxRestarts: %s", name, s)
		}
		if s.restarts != 1 || s.towardsMax != 1 {
			t.Fatalf("failed with %s, want 1 restart counted", s)
		}
		t.Logf("second real failure: %s", s)
		return nil
	})
}

// exitWorker writes what a kubelet writes when the worker's container
// exits with code.
func exitWorker(t *testing.T, p corev1.Pod, code int32) {
	t.Helper()
	pods := env.Client().CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := pods.Get(t.Context(), p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodFailed
		for i, c := range cur.Status.ContainerStatuses {
			started := false
			c.Ready, c.Started = false, &started
			c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error",
				StartedAt: metav1.Time{Time: cur.Status.StartTime.Time}, FinishedAt: now}}
			cur.Status.ContainerStatuses[i] = c
		}
		for i, c := range cur.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				cur.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
		_, err = pods.UpdateStatus(t.Context(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
