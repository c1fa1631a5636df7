package kubeenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/sparecap/sparecap/internal/kube/kubeenv"
)

// TestMiniCluster pins what the product relies on from a real control plane
// and kubelets: the scheduler binds pods to a GPU node kwok runs, a pod
// deleted with grace exits when its containers do (not at once, not at the
// end of the grace period), the ReplicaSet controller replaces it, and a
// Job whose podFailurePolicy ignores DisruptionTarget replaces a disrupted
// pod without counting a failure. The parts run side by side on one node.
func TestMiniCluster(t *testing.T) {
	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	e := kubeenv.StartMiniClusterT(t)
	t.Logf("mini cluster up in %s", since())
	ctx := t.Context()
	c := e.Client()
	const ns = "mini"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A GPU node, Ready with the capacity its creator gave it.
	node := kubeenv.FakeNode("gpu-dp-1", corev1.ResourceList{
		"nvidia.com/gpu":      resource.MustParse("8"),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
	})
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeenv.Eventually(t, 20*time.Second, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, "gpu-dp-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(n) {
			return fmt.Errorf("node not Ready: %v", n.Status.Conditions)
		}
		gpus := n.Status.Allocatable["nvidia.com/gpu"]
		pods := n.Status.Allocatable[corev1.ResourcePods]
		if gpus.Value() != 8 || pods.Value() == 0 {
			return fmt.Errorf("allocatable %v", n.Status.Allocatable)
		}
		return nil
	})
	t.Logf("node Ready after %s", since())

	t.Run("deployment", func(t *testing.T) {
		t.Parallel()
		// The scheduler binds both pods to the node, kwok runs them.
		replicas := int32(2)
		labels := map[string]string{"app": "trainer"}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: podTemplate(labels, "2s", corev1.RestartPolicyAlways),
			},
		}
		if _, err := c.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		running := kubeenv.WaitRunning(t, c, ns, "app=trainer", 2, nil, 30*time.Second)
		for _, p := range running {
			if p.Spec.NodeName != "gpu-dp-1" {
				t.Fatalf("pod %s on %q, want gpu-dp-1", p.Name, p.Spec.NodeName)
			}
		}
		t.Logf("deployment running after %s", since())

		// Deleted with grace 10 s, it exits 2 s after SIGTERM: Failed with
		// 143 (SIGTERM), then gone.
		victim := running[0]
		gone, last := deleteAndWait(t, c, victim, 10)
		if gone < time.Second || gone > 8*time.Second {
			t.Errorf("pod gone %s after its deletion, want about 2 s", gone.Round(10*time.Millisecond))
		}
		if last.Status.Phase != corev1.PodFailed || exitCode(last) != 143 {
			t.Errorf("pod's last status: phase %s, exit code %d; want Failed, 143", last.Status.Phase, exitCode(last))
		}
		if last.Annotations[kubeenv.SigtermAtAnnotation] == "" || last.Annotations[kubeenv.ExitAtAnnotation] == "" {
			t.Errorf("pod's last annotations %v lack sigterm-at/exit-at", last.Annotations)
		}
		t.Logf("pod with exit-after 2s and grace 10s gone %s after its deletion", gone.Round(10*time.Millisecond))
		// The ReplicaSet controller replaces it.
		kubeenv.WaitRunning(t, c, ns, "app=trainer", 2, map[types.UID]bool{victim.UID: true}, 30*time.Second)
		t.Logf("replaced after %s", since())
	})

	t.Run("job", func(t *testing.T) {
		t.Parallel()
		// A Job that ignores disruptions: its pod, marked DisruptionTarget
		// and deleted, is replaced and not counted as a failure.
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
			Spec: batchv1.JobSpec{
				BackoffLimit: new(int32(0)),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:          batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
				}}},
				Template: podTemplate(map[string]string{"job": "train"}, "1s", corev1.RestartPolicyNever),
			},
		}
		if _, err := c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		first := kubeenv.WaitRunning(t, c, ns, "job=train", 1, nil, 30*time.Second)[0]
		// What the driver does before deleting a pod it reclaims. Without
		// lastTransitionTime the disruption controller takes the condition
		// for one left over on a pod nobody deleted (it allows 2 minutes)
		// and sets it to False at once; the Job then counts the pod failed.
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"Reclaim",`+
			`"message":"the machine is being reclaimed","lastTransitionTime":%q}]}}`, time.Now().UTC().Format(time.RFC3339))
		marked, err := c.CoreV1().Pods(ns).Patch(ctx, first.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		if err != nil {
			t.Fatal(err)
		}
		_, last := deleteAndWait(t, c, *marked, 10)
		if last.Status.Phase != corev1.PodFailed {
			t.Errorf("job pod's last phase %s, want Failed", last.Status.Phase)
		}
		gone := time.Now()
		// The Job controller waits out its pod failure backoff (10 s, then
		// doubling) even for a failure the policy ignores.
		kubeenv.WaitRunning(t, c, ns, "job=train", 1, map[types.UID]bool{first.UID: true}, 30*time.Second)
		t.Logf("job pod replaced %s after the old one was gone", time.Since(gone).Round(100*time.Millisecond))
		kubeenv.Eventually(t, 10*time.Second, func() error {
			j, err := c.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
					t.Fatalf("job failed: %s: %s", cond.Reason, cond.Message)
				}
			}
			if j.Status.Failed != 0 {
				t.Fatalf("job counts %d failed pods", j.Status.Failed)
			}
			if j.Status.Active != 1 {
				return fmt.Errorf("job status active %d", j.Status.Active)
			}
			return nil
		})
	})

	// The rest of the exit contract (see kubeenv.ExitAfterAnnotation), one
	// pod each.
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		grace       int64
		regrace     int64 // if set, deleted again with this grace 500 ms later
		terminal    bool  // made Succeeded before its deletion
		min, max    time.Duration
		phase       corev1.PodPhase
		code        int32
	}{
		// Killed at the deadline, which the API server keeps to the second:
		// up to 1 s early.
		{name: "ignores-sigterm", grace: 3, min: 1500 * time.Millisecond, max: 6 * time.Second, phase: corev1.PodFailed, code: 137},
		{name: "exits-0", annotations: map[string]string{kubeenv.ExitAfterAnnotation: "500ms", kubeenv.ExitCodeAnnotation: "0"},
			grace: 30, min: 300 * time.Millisecond, max: 4 * time.Second, phase: corev1.PodSucceeded, code: 0},
		{name: "exit-after-past-grace", annotations: map[string]string{kubeenv.ExitAfterAnnotation: "1m"},
			grace: 2, min: 500 * time.Millisecond, max: 5 * time.Second, phase: corev1.PodFailed, code: 137},
		{name: "bad-exit-after", annotations: map[string]string{kubeenv.ExitAfterAnnotation: "soon"},
			grace: 2, min: 500 * time.Millisecond, max: 5 * time.Second, phase: corev1.PodFailed, code: 137},
		// The API server counts a shorter grace from the first deletion.
		{name: "grace-shortened", grace: 60, regrace: 2, min: 500 * time.Millisecond, max: 5 * time.Second, phase: corev1.PodFailed, code: 137},
		{name: "already-succeeded", terminal: true, grace: 30, max: 4 * time.Second, phase: corev1.PodSucceeded, code: 0},
	} {
		t.Run("exit/"+tc.name, func(t *testing.T) {
			t.Parallel()
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns, Labels: map[string]string{"exit": tc.name}, Annotations: tc.annotations},
				Spec: corev1.PodSpec{
					NodeName:   "gpu-dp-1",
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
				},
			}
			if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := kubeenv.WaitRunning(t, c, ns, "exit="+tc.name, 1, nil, 30*time.Second)[0]
			if tc.terminal {
				done := `{"status":{"phase":"Succeeded","containerStatuses":[{"name":"c","image":"registry.k8s.io/pause:3.10","imageID":"","ready":false,` +
					`"restartCount":0,"state":{"terminated":{"exitCode":0,"reason":"Completed","startedAt":null,"finishedAt":null}}}]}}`
				q, err := c.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(done), metav1.PatchOptions{}, "status")
				if err != nil {
					t.Fatal(err)
				}
				p = *q
			}
			if tc.regrace != 0 {
				go func() {
					time.Sleep(500 * time.Millisecond)
					c.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &tc.regrace})
				}()
			}
			gone, last := deleteAndWait(t, c, p, tc.grace)
			if gone < tc.min || gone > tc.max {
				t.Errorf("gone %s after its deletion, want between %s and %s", gone.Round(10*time.Millisecond), tc.min, tc.max)
			}
			if last.Status.Phase != tc.phase || exitCode(last) != tc.code {
				t.Errorf("last status: phase %s, exit code %d; want %s, %d", last.Status.Phase, exitCode(last), tc.phase, tc.code)
			}
		})
	}
}

// podTemplate asks for a GPU, so that the scheduler has to place it on a
// GPU node, and exits exitAfter after SIGTERM.
func podTemplate(labels map[string]string, exitAfter string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{kubeenv.ExitAfterAnnotation: exitAfter}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: new(int64(30)),
			Containers: []corev1.Container{{
				Name:      "c",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
			}},
		},
	}
}

// deleteAndWait deletes pod with the given grace and waits until it is
// gone; it returns how long that took and the pod as it last was.
func deleteAndWait(t *testing.T, c kubernetes.Interface, pod corev1.Pod, grace int64) (time.Duration, *corev1.Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := c.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", pod.Name).String(),
		ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	last := &pod
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			t.Fatalf("watching %s: %v", pod.Name, ev.Object)
		}
		last = p
		if ev.Type == watch.Deleted {
			return time.Since(deleted), last
		}
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod %s not gone 30 s after its deletion: phase %s, annotations %v", pod.Name, last.Status.Phase, last.Annotations)
	}
	return time.Since(deleted), last
}

func exitCode(p *corev1.Pod) int32 {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Terminated != nil {
			return s.State.Terminated.ExitCode
		}
	}
	return -1
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
