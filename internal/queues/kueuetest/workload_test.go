package kueuetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/admission"
)

// submitJob creates docs/queues.md's Job (snippet kueue-job) under name,
// its pods doing work of runFor and exiting 1 s after their SIGTERM, as
// kwok plays them.
func submitJob(t testing.TB, name, runFor string) *batchv1.Job {
	t.Helper()
	text, err := docs.Snippet("queues.md", "kueue-job")
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(text), &job); err != nil {
		t.Fatalf("docs/queues.md's kueue-job: %v", err)
	}
	job.Name = name
	job.Spec.Template.Annotations = map[string]string{kubeenv.RunForAnnotation: runFor, kubeenv.ExitAfterAnnotation: "1s"}
	job.Spec.Template.Labels = map[string]string{"job": name}
	created, err := env.Client().BatchV1().Jobs(ns).Create(t.Context(), &job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the docs' Job: %v", err)
	}
	return created
}

// workloadOf reads the Kueue workload of a Job (Kueue names it after the
// Job and owns it by it).
func workloadOf(t testing.TB, job *batchv1.Job) (*admission.Workload, error) {
	t.Helper()
	list, err := env.Dynamic().Resource(workloadsGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, u := range list.Items {
		for _, o := range u.GetOwnerReferences() {
			if o.UID == job.UID {
				var w admission.Workload
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &w); err != nil {
					return nil, err
				}
				return &w, nil
			}
		}
	}
	return nil, fmt.Errorf("no workload of job %s yet", job.Name)
}

func condOf(w *admission.Workload, t string) metav1.Condition {
	for _, c := range w.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// checkOf is the workload's state of the docs' check, sparecap-capacity.
func checkOf(w *admission.Workload) admission.CheckState {
	for _, c := range w.Status.AdmissionChecks {
		if c.Name == "sparecap-capacity" {
			return c
		}
	}
	return admission.CheckState{}
}

// waitWorkload waits until cond holds of job's workload and returns it.
func waitWorkload(t testing.TB, job *batchv1.Job, within time.Duration, what string, cond func(*admission.Workload) bool) *admission.Workload {
	t.Helper()
	var got *admission.Workload
	kubeenv.Eventually(t, within, func() error {
		w, err := workloadOf(t, job)
		if err != nil {
			return err
		}
		if !cond(w) {
			return fmt.Errorf("workload %s is not %s: conditions %+v, checks %+v", w.Name, what, w.Status.Conditions, w.Status.AdmissionChecks)
		}
		got = w
		return nil
	})
	return got
}

func isTrue(w *admission.Workload, t string) bool {
	return condOf(w, t).Status == metav1.ConditionTrue
}

// waitJobComplete waits for job to complete and fails the test if it
// failed or if a pod of it counted as failed.
func waitJobComplete(t testing.TB, job *batchv1.Job, within time.Duration) *batchv1.Job {
	t.Helper()
	var got *batchv1.Job
	kubeenv.Eventually(t, within, func() error {
		j, err := env.Client().BatchV1().Jobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				t.Fatalf("job %s failed: %s: %s", j.Name, c.Reason, c.Message)
			}
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				got = j
				return nil
			}
		}
		return fmt.Errorf("job %s not complete: active %d, succeeded %d, failed %d", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed)
	})
	return got
}

// onNodes lists the nodes a job's running pods are on.
func onNodes(t testing.TB, job *batchv1.Job, n int) map[string]bool {
	t.Helper()
	nodes := map[string]bool{}
	for _, p := range kubeenv.WaitRunning(t, env.Client(), ns, "job="+job.Name, n, nil, 60*time.Second) {
		nodes[p.Spec.NodeName] = true
	}
	return nodes
}

// TestWorkloadRequeuedAtTheNoticeAndCompletes is the check's promise,
// with the docs' queue and Job: the workload waits (Pending) while the
// cluster has no preemptible capacity for it; it is admitted once the
// target is filled, pinned to the preemptible nodes; a reclaim of one of
// its nodes gets it evicted and requeued within seconds (Kueue alone would
// wait for recoveryTimeout), it is admitted again when the target is
// refilled, and it runs to completion without spending a backoff: the Job
// has backoffLimit 0 and Kueue's requeueState stays empty.
func TestWorkloadRequeuedAtTheNoticeAndCompletes(t *testing.T) {
	w := newWorld(t, 3, map[string]cluster{"tenant": miniCluster()})
	w.Start()
	w.Create("tenant", "p", 8, 0, 0)
	apply(t, "kueue-setup")

	job := submitJob(t, "sweep", "20s")
	wl := waitWorkload(t, job, 30*time.Second, "waiting for capacity", func(w *admission.Workload) bool {
		return isTrue(w, "QuotaReserved") && checkOf(w).State == admission.StatePending && strings.Contains(checkOf(w).Message, "waiting for preemptible capacity")
	})
	t.Logf("no preemptible nodes yet: %s", checkOf(wl).Message)

	sixteen := 16
	w.Update("tenant", controller.Change{PreemptibleGPUs: &sixteen})
	pre := w.WaitReady("tenant", 2, 60*time.Second)
	wl = waitWorkload(t, job, 30*time.Second, "admitted", func(w *admission.Workload) bool { return isTrue(w, "Admitted") })
	if st := checkOf(wl); st.State != admission.StateReady || len(st.PodSetUpdates) != 1 {
		t.Fatalf("check %+v, want Ready with its pod set pinned", st)
	}
	nodes := onNodes(t, job, 2)
	for _, n := range pre {
		if !nodes[n.Name] {
			t.Fatalf("job's pods on %v, want the preemptible nodes %s and %s", nodes, pre[0].Name, pre[1].Name)
		}
	}

	// Another tenant takes one machine as standard capacity: one of the
	// job's nodes is reclaimed.
	w.Create("other", "q", 8, 0, 0)
	drained := w.WaitDraining("tenant", 30*time.Second)
	reclaimed, decided := drained.Name, drained.DrainStartedAt
	wl = waitWorkload(t, job, 15*time.Second, "evicted by the check", func(w *admission.Workload) bool {
		c := condOf(w, "Evicted")
		return c.Status == metav1.ConditionTrue && c.Reason == "AdmissionCheck"
	})
	evicted := condOf(wl, "Evicted").LastTransitionTime.Time
	wl = waitWorkload(t, job, 15*time.Second, "requeued", func(w *admission.Workload) bool {
		return condOf(w, "Requeued").Status == metav1.ConditionTrue && !condOf(w, "Requeued").LastTransitionTime.Time.Before(evicted)
	})
	requeued := condOf(wl, "Requeued").LastTransitionTime.Time
	t.Logf("node %s reclaimed at %s: workload evicted %s and requeued %s later (Kueue's times, to the second)",
		reclaimed, decided.Format(time.TimeOnly), evicted.Sub(decided.Truncate(time.Second)), requeued.Sub(decided.Truncate(time.Second)))
	if evicted.Sub(decided) > 10*time.Second || requeued.Sub(decided) > 15*time.Second {
		t.Fatalf("evicted %s and requeued %s after the reclaim decision, want seconds", evicted.Sub(decided), requeued.Sub(decided))
	}
	kubeenv.Eventually(t, 10*time.Second, func() error {
		if evs := w.Events("tenant", "WorkloadRequeued"); len(evs) != 1 || evs[0].NodeName != reclaimed || !strings.Contains(evs[0].Message, ns+"/"+wl.Name) {
			return fmt.Errorf("WorkloadRequeued events %+v, want one on %s naming %s", evs, reclaimed, wl.Name)
		}
		return nil
	})

	// Back in the queue, it waits for capacity: one node is left.
	waitWorkload(t, job, 30*time.Second, "pending for capacity again", func(w *admission.Workload) bool {
		return isTrue(w, "QuotaReserved") && !isTrue(w, "Admitted") && checkOf(w).State == admission.StatePending
	})

	// The other tenant lets the machine go: the target is refilled, the
	// workload admitted again, and it completes.
	zero := 0
	w.Update("other", controller.Change{NumGPUs: &zero})
	w.WaitReady("tenant", 2, 90*time.Second)
	waitWorkload(t, job, 30*time.Second, "admitted again", func(w *admission.Workload) bool { return isTrue(w, "Admitted") })
	done := waitJobComplete(t, job, 90*time.Second)
	if done.Status.Succeeded != 2 {
		t.Fatalf("job succeeded with %d pods, want 2", done.Status.Succeeded)
	}
	// Kueue marks the workload Finished a moment after the Job completes.
	final := waitWorkload(t, job, 30*time.Second, "Finished", func(w *admission.Workload) bool { return isTrue(w, "Finished") })
	u, err := env.Dynamic().Resource(workloadsGVR).Namespace(ns).Get(t.Context(), final.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rs, found, _ := unstructured.NestedMap(u.Object, "status", "requeueState"); found && rs["count"] != nil {
		t.Fatalf("requeueState %v: the reclaim spent Kueue's requeuing backoff", rs)
	}
}
