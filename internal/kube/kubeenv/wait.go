package kubeenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Eventually retries check every 100 ms until it passes, and fails the
// test with check's last error once within has passed.
func Eventually(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitRunning waits up to within until exactly n pods in ns match
// selector, are Running and Ready, not being deleted and not in skip, and
// returns them. On failure it says where every matching pod is and what
// the namespace's Events say.
func WaitRunning(t testing.TB, c kubernetes.Interface, ns, selector string, n int, skip map[types.UID]bool, within time.Duration) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var got []corev1.Pod
	Eventually(t, within, func() error {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		got = got[:0]
		var states []string
		for _, p := range list.Items {
			states = append(states, fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase))
			if p.Status.Phase == corev1.PodRunning && PodReady(&p) && p.DeletionTimestamp == nil && !skip[p.UID] {
				got = append(got, p)
			}
		}
		if len(got) != n {
			return fmt.Errorf("%d of %d pods %s running: %s; events: %s", len(got), n, selector, strings.Join(states, "; "), Events(ctx, c, ns))
		}
		return nil
	})
	return got
}

// Events sums up a namespace's Events on one line, for failure messages.
func Events(ctx context.Context, c kubernetes.Interface, ns string) string {
	list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, fmt.Sprintf("%s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
	}
	return strings.Join(out, "; ")
}

// PodReady says whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
