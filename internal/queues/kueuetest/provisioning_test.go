package kueuetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/admission"
	"github.com/sparecap/sparecap/internal/queues/provreq"
	"github.com/sparecap/sparecap/internal/queues/testworld"
)

// request reads a ProvisioningRequest.
func request(ctx context.Context, dyn dynamic.Interface, name string) (*provreq.Request, error) {
	u, err := dyn.Resource(provisioningGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var r provreq.Request
	return &r, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r)
}

// waitCondition waits until request name has condition t with status,
// and returns that condition.
func waitCondition(t *testing.T, dyn dynamic.Interface, name, cond string, status metav1.ConditionStatus, within time.Duration) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	kubeenv.Eventually(t, within, func() error {
		r, err := request(t.Context(), dyn, name)
		if err != nil {
			return err
		}
		for _, c := range r.Status.Conditions {
			if c.Type == cond && c.Status == status {
				got = c
				return nil
			}
		}
		return fmt.Errorf("request %s has no %s=%s: %+v", name, cond, status, r.Status.Conditions)
	})
	return got
}

// waitTarget waits until the cluster's target is gpus.
func waitTarget(t *testing.T, w *testworld.World, id string, gpus int, within time.Duration) {
	t.Helper()
	kubeenv.Eventually(t, within, func() error {
		c := w.Cluster(id)
		if c.TargetPreemptibleGPUs() != gpus {
			return fmt.Errorf("cluster %s: target %d (requested %d, max %d), want %d", id, c.TargetPreemptibleGPUs(),
				c.RequestedPreemptibleGPUs, c.MaxPreemptibleGPUs, gpus)
		}
		return nil
	})
}

// TestProvisioningRequestRaisesTheTarget: docs/queues.md's request (two
// 8-GPU pods) raises a cluster whose own target is 0 to 16 GPUs, is
// Provisioned once the two nodes are ready, and the target comes back down
// (the nodes drained) when it is deleted.
func TestProvisioningRequestRaisesTheTarget(t *testing.T) {
	w := newWorld(t, 4, map[string]cluster{"tenant": miniCluster()})
	w.Start()
	w.Create("tenant", "p", 8, 0, 64)
	apply(t, "provisioning-request")
	dyn := env.Dynamic()

	acc := waitCondition(t, dyn, "nightly-eval", provreq.CondAccepted, metav1.ConditionTrue, 20*time.Second)
	waitTarget(t, w, "tenant", 16, 10*time.Second)
	t.Logf("accepted: %s", acc.Message)
	w.WaitReady("tenant", 2, 60*time.Second)
	prov := waitCondition(t, dyn, "nightly-eval", provreq.CondProvisioned, metav1.ConditionTrue, 20*time.Second)
	t.Logf("provisioned: %s", prov.Message)
	if c := w.Cluster("tenant"); c.DesiredPreemptibleGPUs != 0 || c.RequestedPreemptibleGPUs != 16 {
		t.Fatalf("cluster %+v: want its own target 0 and 16 GPUs requested", c)
	}

	if err := dyn.Resource(provisioningGVR).Namespace(ns).Delete(t.Context(), "nightly-eval", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTarget(t, w, "tenant", 0, 20*time.Second)
	kubeenv.Eventually(t, 60*time.Second, func() error {
		for _, st := range []domain.NodeState{domain.NodeProvisioning, domain.NodeReady, domain.NodeDraining} {
			if n := w.Nodes("tenant", domain.Preemptible, st); len(n) > 0 {
				return fmt.Errorf("%d preemptible nodes %s", len(n), st)
			}
		}
		return nil
	})
}

// TestRequestsThatCannotBeFilledFail: a request over the cluster's maximum
// is Failed at once with MaximumExceeded; one the pool has no room for is
// Failed with NoSpareCapacity after its fill timeout; neither counts.
func TestRequestsThatCannotBeFilledFail(t *testing.T) {
	w := newWorld(t, 2, map[string]cluster{"tenant": miniCluster()})
	w.Start()
	w.Create("tenant", "p", 8, 0, 24)
	dyn := env.Dynamic()
	req := func(name string, count int, params string) string {
		return fmt.Sprintf(`apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: %s
  namespace: %s
spec:
  provisioningClassName: preemptible.sparecap.dev
  podSets:
  - podTemplateRef: {name: trainer}
    count: %d
%s`, name, ns, count, params)
	}
	// The docs' pod template, without its request.
	tmpl := `apiVersion: v1
kind: PodTemplate
metadata:
  name: trainer
  namespace: ` + ns + `
template:
  spec:
    containers:
    - name: main
      image: registry.example/trainer:1
      resources:
        limits: {nvidia.com/gpu: 8}
`
	if err := env.Apply(t.Context(), []byte(tmpl+"---\n"+req("too-big", 4, "")+"---\n"+
		req("no-room", 2, "  parameters: {fillTimeoutSeconds: \"3\"}\n"))); err != nil {
		t.Fatal(err)
	}
	c := waitCondition(t, dyn, "too-big", provreq.CondFailed, metav1.ConditionTrue, 20*time.Second)
	if c.Reason != "MaximumExceeded" || !strings.Contains(c.Message, "max_preemptible_gpus of 24") {
		t.Fatalf("too-big: %+v", c)
	}
	// The fleet has one machine to spare: 16 GPUs are not there.
	c = waitCondition(t, dyn, "no-room", provreq.CondFailed, metav1.ConditionTrue, 30*time.Second)
	if c.Reason != string(domain.UnfulfilledNoCapacity) || !strings.Contains(c.Message, "not filled in 3s") {
		t.Fatalf("no-room: %+v", c)
	}
	waitTarget(t, w, "tenant", 0, 20*time.Second)
}

// TestKueueProvisioningFollowsTheQueue is the queue that needs no
// hand-set target, with docs/queues.md's queue, provisioning config and
// Job: Kueue's provisioning check asks for the Job's capacity with a
// request of sparecap's class, the target rises to it, the request is
// Provisioned and sparecap's check Ready once the nodes are, the Job runs
// on them and completes, and the target comes down once the Job (and so
// its workload and request) is deleted.
func TestKueueProvisioningFollowsTheQueue(t *testing.T) {
	w := newWorld(t, 3, map[string]cluster{"tenant": miniCluster()})
	w.Start()
	w.Create("tenant", "p", 8, 0, 32)
	apply(t, "kueue-setup")
	apply(t, "kueue-provisioning")

	job := submitJob(t, "eval", "5s")
	waitTarget(t, w, "tenant", 16, 30*time.Second)
	w.WaitReady("tenant", 2, 60*time.Second)
	wl := waitWorkload(t, job, 30*time.Second, "admitted", func(w *admission.Workload) bool { return isTrue(w, "Admitted") })
	for _, c := range wl.Status.AdmissionChecks {
		if c.State != admission.StateReady {
			t.Fatalf("admitted with check %s %s: %s", c.Name, c.State, c.Message)
		}
	}
	waitJobComplete(t, job, 60*time.Second)
	list, err := env.Dynamic().Resource(provisioningGVR).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("Kueue made no ProvisioningRequest (%v)", err)
	}
	t.Logf("Kueue's request %s asked for the Job's capacity", list.Items[0].GetName())

	bg := metav1.DeletePropagationBackground
	if err := env.Client().BatchV1().Jobs(ns).Delete(t.Context(), job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	waitTarget(t, w, "tenant", 0, 60*time.Second)
}

// TestBookingExpiresToWhatThePodsUse: docs/queues.md's request with a
// short booking (bookingSeconds 2) is Provisioned, then BookingExpired;
// from then on it holds what the pods consuming it use: the target stays
// at 16 while two such pods run on the nodes, and comes down to 0 once
// they are gone, though the request is still there.
func TestBookingExpiresToWhatThePodsUse(t *testing.T) {
	w := newWorld(t, 4, map[string]cluster{"tenant": miniCluster()})
	w.Start()
	w.Create("tenant", "p", 8, 0, 64)
	text, err := docs.Snippet("queues.md", "provisioning-request")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Apply(t.Context(), []byte(text+"  parameters: {bookingSeconds: \"2\"}\n")); err != nil {
		t.Fatal(err)
	}
	dyn := env.Dynamic()
	waitTarget(t, w, "tenant", 16, 20*time.Second)
	nodes := w.WaitReady("tenant", 2, 60*time.Second)
	waitCondition(t, dyn, "nightly-eval", provreq.CondProvisioned, metav1.ConditionTrue, 20*time.Second)

	// The request's pods, as Kueue would run them: annotated with its name.
	c := env.Client()
	for i, n := range nodes {
		runPod(t, fmt.Sprintf("trainer-%d", i), n.Name, map[string]string{kube.AnnotationConsumes: "nightly-eval"})
	}
	kubeenv.WaitRunning(t, c, ns, "app=trainer", 2, nil, 30*time.Second)
	exp := waitCondition(t, dyn, "nightly-eval", provreq.CondBookingExpired, metav1.ConditionTrue, 20*time.Second)
	t.Logf("booking expired: %s", exp.Message)
	// The pass after the expiry counts the pods (a resync is 5 s at most).
	time.Sleep(6 * time.Second)
	if got := w.Cluster("tenant").TargetPreemptibleGPUs(); got != 16 {
		t.Fatalf("target %d after the booking expired with both pods running, want 16", got)
	}

	zero := int64(0)
	if err := c.CoreV1().Pods(ns).DeleteCollection(t.Context(), metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: "app=trainer"}); err != nil {
		t.Fatal(err)
	}
	waitTarget(t, w, "tenant", 0, 20*time.Second)
	if _, err := request(t.Context(), dyn, "nightly-eval"); err != nil {
		t.Fatalf("the request: %v", err)
	}
}

// runPod creates an 8-GPU pod labelled app=trainer bound to node, with
// annotations.
func runPod(t *testing.T, name, node string, annotations map[string]string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "trainer"}, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "main", Image: "registry.example/trainer:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}},
		},
	}
	if _, err := env.Client().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRequestsGoneDrainIdleNodesFirst: a cluster's own target of one
// node, raised to two by docs/queues.md's request; a pod runs on the
// younger node. When the request is deleted and the target comes back
// down, the node drained is the older one, which runs no pod, not the
// youngest (which the allocator gives up first among equals); the pod
// keeps running.
func TestRequestsGoneDrainIdleNodesFirst(t *testing.T) {
	w := newWorld(t, 4, map[string]cluster{"tenant": miniCluster()})
	w.Start()
	w.Create("tenant", "p", 8, 8, 64)
	w.WaitReady("tenant", 1, 60*time.Second)
	apply(t, "provisioning-request")
	dyn := env.Dynamic()
	waitCondition(t, dyn, "nightly-eval", provreq.CondProvisioned, metav1.ConditionTrue, 90*time.Second)
	// The cluster's own node, then the request's second one.
	nodes := w.WaitReady("tenant", 2, 10*time.Second)
	slices.SortFunc(nodes, func(a, b domain.Node) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	youngest := nodes[1]
	runPod(t, "trainer", youngest.Name, nil)
	kubeenv.WaitRunning(t, env.Client(), ns, "app=trainer", 1, nil, 30*time.Second)

	if err := dyn.Resource(provisioningGVR).Namespace(ns).Delete(t.Context(), "nightly-eval", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitTarget(t, w, "tenant", 8, 20*time.Second)
	kubeenv.Eventually(t, 30*time.Second, func() error {
		if n := len(w.Nodes("tenant", domain.Preemptible, domain.NodeReady)); n != 1 {
			return fmt.Errorf("%d ready preemptible nodes, want 1", n)
		}
		return nil
	})
	left := w.Nodes("tenant", domain.Preemptible, domain.NodeReady)[0]
	if left.ID != youngest.ID {
		t.Fatalf("node %s kept, want the busy %s", left.ID, youngest.ID)
	}
	kubeenv.WaitRunning(t, env.Client(), ns, "app=trainer", 1, nil, time.Second)
}
