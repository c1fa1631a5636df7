package kubelet_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// One cluster for the package, as kubeenv's documentation suggests; each
// test uses its own namespace and node.
var env *kubeenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = kubeenv.Start(kubeenv.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	os.Exit(code)
}

// exitAfter reads the pod's "exit" label: a duration, or "never".
func exitAfter(pod *corev1.Pod) (time.Duration, bool) {
	if pod.Labels["exit"] == "never" {
		return 0, false
	}
	d, err := time.ParseDuration(pod.Labels["exit"])
	return d, err == nil
}

func start(t *testing.T, cfg kubelet.Config) (*kubelet.Kubelet, chan string) {
	terminated := make(chan string, 100)
	cfg.ExitAfter = exitAfter
	cfg.Terminated = func(pod *corev1.Pod, _ time.Time) { terminated <- pod.Namespace + "/" + pod.Name }
	k, err := kubelet.Start(t.Context(), env.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k, terminated
}

func createPod(t *testing.T, c kubernetes.Interface, ns, node string, grace int64, exit string) *corev1.Pod {
	t.Helper()
	pods, err := kubelet.CreatePods(t.Context(), c, ns, node, 1, grace, kubelet.WithLabels(map[string]string{"exit": exit}))
	if err != nil {
		t.Fatal(err)
	}
	return pods[0]
}

// waitGone polls until the pod is gone and returns when it saw that.
func waitGone(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := c.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return time.Now()
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s still there after %v", pod.Namespace, pod.Name, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sigterm(t *testing.T, k *kubelet.Kubelet, pod *corev1.Pod) time.Time {
	t.Helper()
	at, ok := k.SigtermAt(pod.Namespace, pod.Name)
	if !ok {
		t.Fatalf("no SIGTERM recorded for %s/%s", pod.Namespace, pod.Name)
	}
	return at
}

func TestTermination(t *testing.T) {
	c := env.Client()
	ctx := t.Context()
	k, terminated := start(t, kubelet.Config{NodeName: "node-term"})
	if err := kubelet.RegisterNode(ctx, c, "node-term", map[string]string{"pool": "spare"}); err != nil {
		t.Fatal(err)
	}
	del := func(pod *corev1.Pod, opts metav1.DeleteOptions) time.Time {
		t.Helper()
		before := time.Now()
		if err := c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts); err != nil {
			t.Fatal(err)
		}
		return before
	}

	t.Run("exits before its grace runs out", func(t *testing.T) {
		pod := createPod(t, c, "term", "node-term", 30, "1s")
		deleted := del(pod, metav1.DeleteOptions{}) // the pod's own grace: 30 s
		// Well under the 30 s grace: the containers' exit ended it.
		gone := waitGone(t, c, pod, 20*time.Second)
		at := sigterm(t, k, pod)
		if at.Before(deleted) || !at.Before(gone) {
			t.Fatalf("deleted %v, SIGTERM %v, gone %v: out of order", deleted, at, gone)
		}
	})

	t.Run("ignores SIGTERM until its grace runs out", func(t *testing.T) {
		pod := createPod(t, c, "term", "node-term", 2, "never")
		del(pod, metav1.DeleteOptions{})
		got, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp == nil {
			t.Fatalf("right after a graceful delete: %v, %v; want the pod terminating", got, err)
		}
		gone := waitGone(t, c, pod, 30*time.Second)
		if at := sigterm(t, k, pod); !at.Before(gone) {
			t.Fatalf("SIGTERM %v not before gone %v", at, gone)
		}
	})

	t.Run("a shorter second delete moves the deadline", func(t *testing.T) {
		pod := createPod(t, c, "term", "node-term", 30, "never")
		del(pod, metav1.DeleteOptions{})
		del(pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64(1))})
		waitGone(t, c, pod, 20*time.Second)
		sigterm(t, k, pod)
	})

	t.Run("grace 0 is gone at once", func(t *testing.T) {
		pod := createPod(t, c, "term", "node-term", 30, "never")
		del(pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
		waitGone(t, c, pod, 5*time.Second)
	})

	// No pod is left, and Terminated reported each of them.
	seen := map[string]bool{}
	for _, p := range mustList(t, c, "term") {
		t.Errorf("pod %s left over", p.Name)
	}
	deadline := time.After(10 * time.Second)
	for len(seen) < 4 {
		select {
		case name := <-terminated:
			seen[name] = true
		case <-deadline:
			t.Fatalf("Terminated called for %d pods, want 4: %v", len(seen), seen)
		}
	}
}

func mustList(t *testing.T, c kubernetes.Interface, ns string) []corev1.Pod {
	t.Helper()
	l, err := c.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func TestNodeAndRunPods(t *testing.T) {
	c := env.Client()
	ctx := t.Context()
	start(t, kubelet.Config{NodeName: "node-run", RunPods: true})
	// Another node's pods are not this stand-in's business.
	other := createPod(t, c, "run", "node-elsewhere", 30, "1s")

	if err := kubelet.RegisterNode(ctx, c, "node-run", map[string]string{"pool": "spare"}); err != nil {
		t.Fatal(err)
	}
	if err := kubelet.MarkNotReady(ctx, c, "node-run"); err != nil {
		t.Fatal(err)
	}
	if ready(t, c, "node-run") {
		t.Fatal("node Ready after MarkNotReady")
	}
	if err := kubelet.MarkReady(ctx, c, "node-run"); err != nil {
		t.Fatal(err)
	}
	if !ready(t, c, "node-run") {
		t.Fatal("node not Ready after MarkReady")
	}
	node, err := c.CoreV1().Nodes().Get(ctx, "node-run", metav1.GetOptions{})
	if err != nil || node.Labels["pool"] != "spare" {
		t.Fatalf("node %v, %v: want label pool=spare", node, err)
	}

	pods, err := kubelet.CreatePods(ctx, c, "run", "node-run", 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			waitFor(t, func() bool {
				got, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
				return err == nil && got.Status.Phase == corev1.PodRunning
			})
		})
	}
	wg.Wait()
	got, err := c.CoreV1().Pods(other.Namespace).Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.PodPending {
		t.Fatalf("pod on another node: %v, %v; want it left Pending", got.Status.Phase, err)
	}
}

func ready(t *testing.T, c kubernetes.Interface, name string) bool {
	node, err := c.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitFor(t *testing.T, cond func() bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Error("condition not met within 20s")
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
