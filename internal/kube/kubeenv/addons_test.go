package kubeenv_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sparecap/sparecap/internal/kube/kubeenv"
)

// The tests of Kueue, JobSet and KubeRay share one mini cluster running
// all three, started by the first of them (so that the package's other
// tests, run alone, do not pay for it) and closed by TestMain. None of them
// runs in parallel with another: TestKueueRestart stops Kueue, which makes
// the API server refuse Jobs meanwhile.
var addons struct {
	once    sync.Once
	env     *kubeenv.Env
	err     error
	elapsed time.Duration
}

func TestMain(m *testing.M) {
	code := m.Run()
	if addons.env != nil {
		if err := addons.env.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Two GPU nodes for the batch tests, and one lent node, tainted and
// labelled as sparecap marks the capacity it lends, which only pods that
// an admission check gave the toleration and the nodeSelector may use.
const (
	lentTaintKey = "sparecap.dev/lent"
	lentLabelKey = "sparecap.dev/pool"
)

func addonEnv(t *testing.T) *kubeenv.Env {
	t.Helper()
	addons.once.Do(func() {
		start := time.Now()
		addons.env, addons.err = kubeenv.Start(kubeenv.Options{
			MiniCluster: true,
			Kueue:       &kubeenv.KueueOptions{},
			JobSet:      true,
			KubeRay:     true,
		})
		addons.elapsed = time.Since(start)
		if addons.err != nil {
			return
		}
		ctx := context.Background()
		c := addons.env.Client()
		gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		lent := kubeenv.FakeNode("gpu-lent-1", gpus)
		lent.Labels[lentLabelKey] = "lent"
		lent.Spec.Taints = []corev1.Taint{{Key: lentTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		for _, n := range []*corev1.Node{kubeenv.FakeNode("gpu-1", gpus), kubeenv.FakeNode("gpu-2", gpus), lent} {
			if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				addons.err = err
				return
			}
		}
	})
	if addons.err != nil {
		t.Fatal(addons.err)
	}
	t.Logf("Kueue, JobSet and KubeRay started in %s", addons.elapsed.Round(100*time.Millisecond))
	addons.env.LogOnFailure(t)
	return addons.env
}

var (
	workloads       = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
	clusterQueues   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
	admissionChecks = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "admissionchecks"}
	jobSets         = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	rayClusters     = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
)

// queues applies a namespace, a ResourceFlavor, a ClusterQueue with 8 GPUs
// of it (and the admission checks named, if any) and a LocalQueue "lq" in
// the namespace, all named after name.
func queues(t *testing.T, e *kubeenv.Env, name string, checks ...string) {
	t.Helper()
	strategy := ""
	if len(checks) > 0 {
		strategy = "  admissionChecksStrategy:\n    admissionChecks:\n"
		for _, c := range checks {
			strategy += "    - name: " + c + "\n"
		}
	}
	yaml := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: %[1]s-gpu
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %[1]s
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: %[1]s-gpu
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
%[2]s---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq
  namespace: %[1]s
spec:
  clusterQueue: %[1]s
`, name, strategy)
	if err := e.Apply(t.Context(), []byte(yaml)); err != nil {
		t.Fatal(err)
	}
}

// queuedJob is a Job for LocalQueue "lq": n pods of one GPU, each done
// runFor after it starts, exiting at once when deleted.
func queuedJob(ns, name string, n int32, runFor string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "lq"}},
		Spec: batchv1.JobSpec{
			Parallelism:  &n,
			Completions:  &n,
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"job": name},
					Annotations: map[string]string{kubeenv.RunForAnnotation: runFor, kubeenv.ExitAfterAnnotation: "100ms"},
				},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:      "c",
						Image:     "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
					}},
				},
			},
		},
	}
}

// createQueuedJob creates job and checks that Kueue's webhook suspended it
// at creation.
func createQueuedJob(t *testing.T, e *kubeenv.Env, job *batchv1.Job) {
	t.Helper()
	created, err := e.Client().BatchV1().Jobs(job.Namespace).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Suspend == nil || !*created.Spec.Suspend {
		t.Fatalf("job %s created unsuspended: Kueue's webhook did not see it", job.Name)
	}
}

// workloadOf waits for the Workload Kueue made for the Job and returns it.
func workloadOf(t *testing.T, e *kubeenv.Env, ns, job string) *unstructured.Unstructured {
	t.Helper()
	var wl *unstructured.Unstructured
	kubeenv.Eventually(t, 20*time.Second, func() error {
		list, err := e.Dynamic().Resource(workloads).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i, w := range list.Items {
			for _, o := range w.GetOwnerReferences() {
				if o.Kind == "Job" && o.Name == job {
					wl = &list.Items[i]
					return nil
				}
			}
		}
		return fmt.Errorf("no Workload for job %s among %d", job, len(list.Items))
	})
	return wl
}

// condition returns the status and reason of obj's condition typ ("" if
// it has none).
func condition(obj *unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		c, _ := c.(map[string]any)
		if c["type"] == typ {
			status, _ = c["status"].(string)
			reason, _ = c["reason"].(string)
			return status, reason
		}
	}
	return "", ""
}

// waitCondition waits until the object has condition typ with status
// (and reason, if not empty) and returns it.
func waitCondition(t *testing.T, e *kubeenv.Env, gvr schema.GroupVersionResource, ns, name, typ, status, reason string, within time.Duration) *unstructured.Unstructured {
	t.Helper()
	var obj *unstructured.Unstructured
	kubeenv.Eventually(t, within, func() error {
		var err error
		obj, err = e.Dynamic().Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s, r := condition(obj, typ)
		if s != status || reason != "" && r != reason {
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			return fmt.Errorf("%s %s: want %s=%s %s, have conditions %v", gvr.Resource, name, typ, status, reason, conds)
		}
		return nil
	})
	return obj
}

func waitJobComplete(t *testing.T, e *kubeenv.Env, ns, name string, within time.Duration) {
	t.Helper()
	kubeenv.Eventually(t, within, func() error {
		j, err := e.Client().BatchV1().Jobs(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				t.Fatalf("job %s failed: %s: %s", name, c.Reason, c.Message)
			}
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("job %s: suspend %v, active %d, succeeded %d; events: %s", name, *j.Spec.Suspend,
			j.Status.Active, j.Status.Succeeded, kubeenv.Events(t.Context(), e.Client(), ns))
	})
}

// jobPods returns the pods of Job name, also those that finished.
func jobPods(t *testing.T, e *kubeenv.Env, ns, name string) []corev1.Pod {
	t.Helper()
	list, err := e.Client().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "job=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestKueueAdmitsJob: a Job sent to a LocalQueue is created suspended,
// admitted within the ClusterQueue's GPU quota, unsuspended; its pods run
// on the kwok GPU nodes and complete, and the Workload ends Finished.
func TestKueueAdmitsJob(t *testing.T) {
	e := addonEnv(t)
	const ns = "kueue-job"
	queues(t, e, ns)
	start := time.Now()
	createQueuedJob(t, e, queuedJob(ns, "train", 2, "1s"))
	wl := workloadOf(t, e, ns, "train")
	waitCondition(t, e, workloads, ns, wl.GetName(), "Admitted", "True", "", 20*time.Second)
	t.Logf("admitted %s after the job's creation", time.Since(start).Round(10*time.Millisecond))
	waitJobComplete(t, e, ns, "train", 30*time.Second)
	t.Logf("complete %s after the job's creation", time.Since(start).Round(10*time.Millisecond))
	pods := jobPods(t, e, ns, "train")
	if len(pods) != 2 {
		t.Fatalf("job ran %d pods, want 2", len(pods))
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded || !strings.HasPrefix(p.Spec.NodeName, "gpu-") {
			t.Errorf("pod %s %s on %q, want Succeeded on a GPU node", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
	waitCondition(t, e, workloads, ns, wl.GetName(), "Finished", "True", "", 20*time.Second)
}

// The contract of an admission check controller such as sparecap's, as
// Kueue v0.17 (API v1beta2) keeps it; see docs/kubernetes.md, "Kueue
// admission checks":
//
//   - A ClusterQueue lists the checks in spec.admissionChecksStrategy
//     .admissionChecks[].name (v1beta2 has no spec.admissionChecks). It is
//     inactive (condition Active=False, reason AdmissionCheckInactive) and
//     admits nothing until each check's controller sets the AdmissionCheck's
//     condition Active=True (status subresource).
//   - Kueue reserves quota for a workload (QuotaReserved=True) and adds to
//     status.admissionChecks an entry {name, state: Pending} per check; the
//     Job stays suspended.
//   - The controller sets its entry's state to Ready, with podSetUpdates
//     (per pod set, "main" for a batch Job: labels, annotations,
//     nodeSelector, tolerations), through the status subresource: Kueue
//     admits the workload (Admitted=True), writes the updates into the
//     Job's pod template and unsuspends it.
//   - Retry on an admitted workload evicts it (Evicted=True, reason
//     AdmissionCheck): Kueue suspends the Job (its pods are deleted),
//     releases the quota, puts the entry back to Pending (retryCount 1) and
//     requeues the workload, which reserves quota again.
func TestKueueAdmissionCheck(t *testing.T) {
	e := addonEnv(t)
	ctx := t.Context()
	const (
		ns         = "kueue-ac"
		check      = "sparecap-capacity"
		controller = "sparecap.dev/capacity"
	)
	if err := e.Apply(ctx, []byte(`apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: `+check+`
spec:
  controllerName: `+controller+`
`)); err != nil {
		t.Fatal(err)
	}
	// v1beta2 has no spec.admissionChecks.
	err := e.Apply(ctx, []byte(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: kueue-ac-old-field
spec:
  admissionChecks: [`+check+`]
`))
	if err == nil || !strings.Contains(err.Error(), "admissionChecks") {
		t.Fatalf("a ClusterQueue with spec.admissionChecks: %v; want it refused", err)
	}
	queues(t, e, ns, check)
	waitCondition(t, e, clusterQueues, "", ns, "Active", "False", "AdmissionCheckInactive", 20*time.Second)

	// 1. The controller marks its AdmissionCheck Active.
	start := time.Now()
	active := fmt.Sprintf(`{"status":{"conditions":[{"type":"Active","status":"True","reason":"Active",`+
		`"message":"sparecap lends capacity","lastTransitionTime":%q}]}}`, time.Now().UTC().Format(time.RFC3339))
	if _, err := e.Dynamic().Resource(admissionChecks).Patch(ctx, check, types.MergePatchType, []byte(active), metav1.PatchOptions{FieldManager: controller}, "status"); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, e, clusterQueues, "", ns, "Active", "True", "", 20*time.Second)
	t.Logf("ClusterQueue active %s after the AdmissionCheck", time.Since(start).Round(10*time.Millisecond))

	// 2. Quota is reserved, the check is Pending, the Job stays suspended.
	createQueuedJob(t, e, queuedJob(ns, "lent", 1, "1h"))
	wl := workloadOf(t, e, ns, "lent")
	wl = waitCondition(t, e, workloads, ns, wl.GetName(), "QuotaReserved", "True", "", 20*time.Second)
	if s, _ := condition(wl, "Admitted"); s == "True" {
		t.Fatal("workload admitted before its check is Ready")
	}
	st := checkState(t, wl, check)
	if st["state"] != "Pending" {
		t.Fatalf("check %v, want Pending", st)
	}
	t.Logf("pending check %v; managed fields: %s", st, managers(wl))
	if j, err := e.Client().BatchV1().Jobs(ns).Get(ctx, "lent", metav1.GetOptions{}); err != nil || !*j.Spec.Suspend {
		t.Fatalf("job while its check is pending: %v, %v; want suspended", j.Spec.Suspend, err)
	}

	// Kueue's workload controller added the entry by an update, as field
	// manager "kueue" (after admission its "kueue-admission" applies own it
	// too): a server-side apply that changes it without forcing conflicts
	// (Kueue's own check controllers force too).
	noForce := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Workload","metadata":{"name":%q,"namespace":%q},`+
		`"status":{"admissionChecks":[{"name":%q,"state":"Ready","message":"capacity lent","lastTransitionTime":%q}]}}`,
		wl.GetName(), ns, check, time.Now().UTC().Format(time.RFC3339))
	_, err = e.Dynamic().Resource(workloads).Namespace(ns).Patch(ctx, wl.GetName(), types.ApplyPatchType, []byte(noForce),
		metav1.PatchOptions{FieldManager: controller}, "status")
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflicts with "kueue`) {
		t.Fatalf("apply without force: %v; want a conflict with Kueue's field manager", err)
	}
	// A JSON merge patch replaces the whole list (CRDs take no strategic
	// merge patch): an entry without lastTransitionTime and message, which
	// the schema requires, is refused.
	_, err = e.Dynamic().Resource(workloads).Namespace(ns).Patch(ctx, wl.GetName(), types.MergePatchType,
		[]byte(`{"status":{"admissionChecks":[{"name":"`+check+`","state":"Ready"}]}}`), metav1.PatchOptions{FieldManager: controller}, "status")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "lastTransitionTime: Required value") {
		t.Fatalf("merge patch of an entry without lastTransitionTime: %v; want it refused", err)
	}

	// 3. Ready, with pod set updates, by a forced server-side apply of the
	// controller's own entry (what Kueue's own check controllers do).
	start = time.Now()
	applyCheck(t, e, wl, controller, check, "Ready", "capacity lent", `,"podSetUpdates":[{"name":"main",`+
		`"labels":{"sparecap.dev/lent-by":"capacity"},`+
		`"nodeSelector":{"`+lentLabelKey+`":"lent"},`+
		`"tolerations":[{"key":"`+lentTaintKey+`","operator":"Exists","effect":"NoSchedule"}]}]`)
	wl = waitCondition(t, e, workloads, ns, wl.GetName(), "Admitted", "True", "", 20*time.Second)
	t.Logf("admitted %s after Ready; managed fields: %s", time.Since(start).Round(10*time.Millisecond), managers(wl))
	pod := kubeenv.WaitRunning(t, e.Client(), ns, "job=lent", 1, nil, 30*time.Second)[0]
	t.Logf("pod running %s after Ready", time.Since(start).Round(10*time.Millisecond))
	if pod.Spec.NodeName != "gpu-lent-1" || pod.Spec.NodeSelector[lentLabelKey] != "lent" || pod.Labels["sparecap.dev/lent-by"] != "capacity" ||
		!slices.ContainsFunc(pod.Spec.Tolerations, func(tl corev1.Toleration) bool { return tl.Key == lentTaintKey }) {
		t.Fatalf("pod on %q with nodeSelector %v, labels %v, tolerations %v: the pod set updates are not on it",
			pod.Spec.NodeName, pod.Spec.NodeSelector, pod.Labels, pod.Spec.Tolerations)
	}

	// 4. Retry evicts the admitted workload, suspends the Job and requeues.
	start = time.Now()
	applyCheck(t, e, wl, controller, check, "Retry", "capacity reclaimed", "")
	wl = waitCondition(t, e, workloads, ns, wl.GetName(), "Evicted", "True", "AdmissionCheck", 20*time.Second)
	t.Logf("evicted %s after Retry; managed fields: %s", time.Since(start).Round(10*time.Millisecond), managers(wl))
	kubeenv.Eventually(t, 20*time.Second, func() error {
		j, err := e.Client().BatchV1().Jobs(ns).Get(ctx, "lent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !*j.Spec.Suspend || j.Status.Active != 0 {
			return fmt.Errorf("job suspend %v, %d active", *j.Spec.Suspend, j.Status.Active)
		}
		return nil
	})
	t.Logf("job suspended, pods gone %s after Retry", time.Since(start).Round(10*time.Millisecond))
	kubeenv.Eventually(t, 30*time.Second, func() error {
		w, err := e.Dynamic().Resource(workloads).Namespace(ns).Get(ctx, wl.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		wl = w
		st := checkState(t, w, check)
		if s, _ := condition(w, "QuotaReserved"); s != "True" || st["state"] != "Pending" {
			return fmt.Errorf("QuotaReserved %q, check %v", s, st)
		}
		return nil
	})
	if st := checkState(t, wl, check); st["retryCount"] != int64(1) {
		t.Errorf("check after one Retry: %v, want retryCount 1", st)
	}
	t.Logf("requeued, quota reserved again, check %v, %s after Retry", checkState(t, wl, check), time.Since(start).Round(10*time.Millisecond))

	// Ready again: admitted again, the pod runs again. Kueue may still
	// reset the check to Pending, or clear an Admitted it had not cleared
	// yet, as it finishes the requeue (both seen after the wait above), so
	// the loop reconciles as a check controller does: Ready is applied
	// whenever the check is not Ready, until a new pod runs.
	var rerun *corev1.Pod
	kubeenv.Eventually(t, 45*time.Second, func() error {
		w, err := e.Dynamic().Resource(workloads).Namespace(ns).Get(ctx, wl.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if checkState(t, w, check)["state"] != "Ready" {
			applyCheck(t, e, w, controller, check, "Ready", "capacity lent again", `,"podSetUpdates":[{"name":"main",`+
				`"nodeSelector":{"`+lentLabelKey+`":"lent"},`+
				`"tolerations":[{"key":"`+lentTaintKey+`","operator":"Exists","effect":"NoSchedule"}]}]`)
		}
		pods, err := e.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job=lent"})
		if err != nil {
			return err
		}
		for i, p := range pods.Items {
			if p.UID != pod.UID && p.Status.Phase == corev1.PodRunning && kubeenv.PodReady(&p) && p.DeletionTimestamp == nil {
				rerun = &pods.Items[i]
				return nil
			}
		}
		admitted, _ := condition(w, "Admitted")
		return fmt.Errorf("no new pod running; Admitted %q, check %v; events: %s", admitted, checkState(t, w, check), kubeenv.Events(ctx, e.Client(), ns))
	})
	if rerun.Spec.NodeName != "gpu-lent-1" {
		t.Fatalf("pod readmitted on %q", rerun.Spec.NodeName)
	}
}

// checkState returns the workload's status.admissionChecks entry name.
func checkState(t *testing.T, wl *unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	for _, c := range checks {
		if c, _ := c.(map[string]any); c["name"] == name {
			return c
		}
	}
	t.Fatalf("workload %s has no admission check %s: %v", wl.GetName(), name, checks)
	return nil
}

// applyCheck sets the controller's check on the workload by server-side
// apply on the status subresource, as the controller's field manager:
// only its entry (the list is a map keyed by name), with the workload's
// resourceVersion so that a stale read conflicts.
func applyCheck(t *testing.T, e *kubeenv.Env, wl *unstructured.Unstructured, manager, check, state, message, extra string) {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Workload",`+
		`"metadata":{"name":%q,"namespace":%q},`+
		`"status":{"admissionChecks":[{"name":%q,"state":%q,"message":%q,"lastTransitionTime":%q%s}]}}`,
		wl.GetName(), wl.GetNamespace(), check, state, message, time.Now().UTC().Format(time.RFC3339), extra)
	force := true
	if _, err := e.Dynamic().Resource(workloads).Namespace(wl.GetNamespace()).Patch(t.Context(), wl.GetName(), types.ApplyPatchType, []byte(body),
		metav1.PatchOptions{FieldManager: manager, Force: &force}, "status"); err != nil {
		t.Fatalf("apply %s: %v", state, err)
	}
}

// managers sums up who owns which of the workload's status fields.
func managers(wl *unstructured.Unstructured) string {
	var out []string
	for _, m := range wl.GetManagedFields() {
		if m.Subresource != "status" || m.FieldsV1 == nil {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s): %s", m.Manager, m.Operation, m.FieldsV1.Raw))
	}
	return strings.Join(out, "; ")
}

// TestKueueRestart: with Kueue's manager stopped, the API server refuses a
// queued Job (its webhook fails closed); started again on the same ports
// with the same certificates, Kueue admits a Job created afterwards.
func TestKueueRestart(t *testing.T) {
	e := addonEnv(t)
	const ns = "kueue-restart"
	queues(t, e, ns)
	start := time.Now()
	if err := e.StopKueue(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kueue stopped in %s", time.Since(start).Round(10*time.Millisecond))
	_, err := e.Client().BatchV1().Jobs(ns).Create(t.Context(), queuedJob(ns, "while-down", 1, "1s"), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "mjob.kb.io") {
		t.Fatalf("a Job created while Kueue is down: %v; want its webhook's failure", err)
	}
	start = time.Now()
	if err := e.StartKueue(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kueue started again in %s", time.Since(start).Round(10*time.Millisecond))
	if err := e.StartKueue(); err == nil {
		t.Fatal("StartKueue while Kueue runs: no error")
	}
	createQueuedJob(t, e, queuedJob(ns, "after", 1, "1s"))
	wl := workloadOf(t, e, ns, "after")
	waitCondition(t, e, workloads, ns, wl.GetName(), "Admitted", "True", "", 20*time.Second)
	waitJobComplete(t, e, ns, "after", 30*time.Second)
}

// TestKueueWaitForPodsReady: KueueOptions reach Kueue's configuration. In
// an Env of its own with waitForPodsReady (2 s) and only the batch/job
// integration, an admitted Job whose pod cannot be scheduled is evicted
// for PodsReadyTimeout and suspended again.
func TestKueueWaitForPodsReady(t *testing.T) {
	start := time.Now()
	e := kubeenv.StartTWith(t, kubeenv.Options{MiniCluster: true, Kueue: &kubeenv.KueueOptions{
		Frameworks:       []string{"batch/job"},
		WaitForPodsReady: &kubeenv.KueueWaitForPodsReady{Timeout: 2 * time.Second, BackoffBaseSeconds: 1, BackoffMaxSeconds: 1},
		Config:           map[string]any{"objectRetentionPolicies": map[string]any{}},
	}})
	t.Logf("Kueue (batch/job only) started in %s", time.Since(start).Round(100*time.Millisecond))
	ctx := t.Context()
	if _, err := e.Client().CoreV1().Nodes().Create(ctx, kubeenv.FakeNode("gpu-1", corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const ns = "kueue-podsready"
	queues(t, e, ns)
	job := queuedJob(ns, "stuck", 1, "1h")
	job.Spec.Template.Spec.NodeSelector = map[string]string{"sparecap.test/no-such-node": "true"}
	createQueuedJob(t, e, job)
	wl := workloadOf(t, e, ns, "stuck")
	waitCondition(t, e, workloads, ns, wl.GetName(), "Admitted", "True", "", 20*time.Second)
	admitted := time.Now()
	waitCondition(t, e, workloads, ns, wl.GetName(), "Evicted", "True", "PodsReadyTimeout", 20*time.Second)
	t.Logf("evicted for PodsReadyTimeout %s after the test saw it admitted", time.Since(admitted).Round(10*time.Millisecond))
	kubeenv.Eventually(t, 20*time.Second, func() error {
		j, err := e.Client().BatchV1().Jobs(ns).Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if j.Spec.Suspend == nil || !*j.Spec.Suspend {
			return fmt.Errorf("job not suspended again")
		}
		return nil
	})
}

// TestJobSet: a JobSet of one replicated Job (two replicas) runs its pods
// on the kwok nodes and completes.
func TestJobSet(t *testing.T) {
	e := addonEnv(t)
	const ns = "jobset"
	err := e.Apply(t.Context(), []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: jobset
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  namespace: jobset
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          metadata:
            annotations:
              sparecap.test/run-for: 1s
          spec:
            restartPolicy: Never
            containers:
            - name: c
              image: registry.k8s.io/pause:3.10
              resources:
                limits:
                  nvidia.com/gpu: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	waitCondition(t, e, jobSets, ns, "train", "Completed", "True", "", 40*time.Second)
	pods, err := e.Client().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=train"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded || !strings.HasPrefix(p.Spec.NodeName, "gpu-") {
			t.Errorf("pod %s %s on %q, want Succeeded on a GPU node", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
}

// TestKubeRay: a RayCluster with a head group and a worker group of two
// gets its head and worker pods, which kwok runs (no Ray inside them).
func TestKubeRay(t *testing.T) {
	e := addonEnv(t)
	const ns = "kuberay"
	err := e.Apply(t.Context(), []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: kuberay
---
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: rc
  namespace: kuberay
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
  workerGroupSpecs:
  - groupName: gpu
    replicas: 2
    minReplicas: 0
    maxReplicas: 2
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
          resources:
            limits:
              nvidia.com/gpu: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	head := kubeenv.WaitRunning(t, e.Client(), ns, "ray.io/cluster=rc,ray.io/node-type=head", 1, nil, 30*time.Second)
	workers := kubeenv.WaitRunning(t, e.Client(), ns, "ray.io/cluster=rc,ray.io/node-type=worker", 2, nil, 30*time.Second)
	for _, p := range append(head, workers...) {
		if !strings.HasPrefix(p.Spec.NodeName, "gpu-") {
			t.Errorf("pod %s on %q, want a kwok GPU node", p.Name, p.Spec.NodeName)
		}
	}
}

// The Go lookups must find what the build script produces: the mini
// cluster's binaries and the addons.
func TestToolPathsMatchScript(t *testing.T) {
	for _, b := range []struct {
		name, env string
		find      func() (string, error)
	}{
		{"kube-controller-manager", "SPARECAP_KUBE_CONTROLLER_MANAGER", kubeenv.ControllerManagerPath},
		{"kube-scheduler", "SPARECAP_KUBE_SCHEDULER", kubeenv.SchedulerPath},
		{"kwok", "SPARECAP_KWOK", kubeenv.KwokPath},
		{"kueue", "SPARECAP_KUEUE", kubeenv.KueuePath},
		{"jobset", "SPARECAP_JOBSET", kubeenv.JobSetPath},
		{"kuberay-operator", "SPARECAP_KUBERAY", kubeenv.KubeRayPath},
		{"kueue-manifests", "SPARECAP_KUEUE_MANIFESTS", kubeenv.KueueManifestsDir},
	} {
		t.Setenv(b.env, "")
		out, err := exec.Command("../../../scripts/kube-paths.sh", b.name).Output()
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSpace(string(out))
		got, err := b.find()
		if err != nil {
			t.Fatal(err) // also when it is missing: run scripts/ensure-kube.sh
		}
		if got != want {
			t.Fatalf("%s: Go finds %s, script says %s", b.name, got, want)
		}
		// Missing, or (the manifests) incomplete.
		missing := filepath.Join(t.TempDir(), "missing")
		if b.name == "kueue-manifests" {
			os.MkdirAll(filepath.Join(missing, "kueue", "crds"), 0o755)
		}
		t.Setenv(b.env, missing)
		if _, err := b.find(); err == nil || !strings.Contains(err.Error(), "scripts/ensure-kube.sh") {
			t.Fatalf("missing %s: error %v should say how to get it", b.name, err)
		}
	}
	// And Start says so before it starts anything.
	t.Setenv("SPARECAP_KUEUE", filepath.Join(t.TempDir(), "missing"))
	if _, err := kubeenv.Start(kubeenv.Options{MiniCluster: true, Kueue: &kubeenv.KueueOptions{}}); err == nil || !strings.Contains(err.Error(), "scripts/ensure-kube.sh") {
		t.Fatalf("Start without Kueue's binary: %v", err)
	}
	if _, err := kubeenv.Start(kubeenv.Options{JobSet: true}); err == nil || !strings.Contains(err.Error(), "MiniCluster") {
		t.Fatalf("Start with JobSet but no mini cluster: %v", err)
	}
}
