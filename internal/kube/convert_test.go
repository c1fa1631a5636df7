package kube_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
	"github.com/sparecap/sparecap/internal/store/storetest"
)

// TestConvertInPlace, on the real API server: a preemptible node whose
// pod runs is converted to standard and back. Each time its Node gets
// the class label and loses (or gets back) the operator's preemptible
// taint, while its pod runs on untouched (never deleted: no SIGTERM);
// billing splits at the second of each conversion.
func TestConvertInPlace(t *testing.T) {
	taint := kube.Taint{Key: "sparecap.dev/preemptible", Value: "true", Effect: "NoSchedule"}
	f := newFixture(t, fixtureConfig{machines: 2, window: 30 * time.Second, attached: []string{"c-conv"},
		opts: kube.Options{PreemptibleTaints: []kube.Taint{taint}}})
	kl, err := kubelet.Start(f.ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter, RunPods: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	f.createCluster("c-conv", 8, 8)
	n := f.waitNodes("c-conv", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	if _, err := kubelet.CreatePods(f.ctx, env.Client(), "tenant-a", n.Name, 1, 30, podOptions("trainer", time.Second, false)); err != nil {
		t.Fatal(err)
	}
	pod := func() *corev1.Pod {
		p, err := env.Client().CoreV1().Pods("tenant-a").Get(f.ctx, "trainer", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the pod: %v", err)
		}
		return p
	}
	eventually(t, 10*time.Second, func() error {
		if p := pod(); p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s", p.Status.Phase)
		}
		return nil
	})
	uid := pod().UID

	var periods []time.Time
	for _, to := range []domain.ComputeClass{domain.Standard, domain.Preemptible} {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond))) // a new second
		got, err := f.ctrl.ConvertNode(f.ctx, "c-conv", n.Name, to)
		if err != nil {
			t.Fatalf("convert to %s: %v", to, err)
		}
		periods = append(periods, got.ClassSince)
		eventually(t, 10*time.Second, func() error {
			kn := node(t, n.Name)
			hasTaint := slices.ContainsFunc(kn.Spec.Taints, func(x corev1.Taint) bool { return x.Key == taint.Key })
			if kn.Labels[domain.LabelComputeClass] != string(to) || hasTaint != (to == domain.Preemptible) {
				return fmt.Errorf("Node after converting to %s: labels %v, taints %v", to, kn.Labels, kn.Spec.Taints)
			}
			if kn.Spec.Unschedulable {
				return fmt.Errorf("the Node was cordoned")
			}
			return nil
		})
		if p := pod(); p.UID != uid || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			t.Fatalf("the pod after converting to %s: uid %s (was %s), deletion %v, phase %s", to, p.UID, uid, p.DeletionTimestamp, p.Status.Phase)
		}
	}

	recs := storetest.NodeUsage(t, f.st, clock.Real{}, "c-conv", n.ID)
	if len(recs) != 3 {
		t.Fatalf("usage of the node: %+v, want three periods", recs)
	}
	want := []struct {
		class      domain.ComputeClass
		start, end time.Time
		final      bool
	}{
		{domain.Preemptible, n.ReadyAt, periods[0], true},
		{domain.Standard, periods[0], periods[1], true},
		{domain.Preemptible, periods[1], recs[2].End, false},
	}
	for i, w := range want {
		r := recs[i]
		if r.Class != w.class || !r.Start.Equal(w.start) || !r.End.Equal(w.end) || r.Final != w.final || r.Start.Nanosecond() != 0 && i > 0 {
			t.Errorf("period %d: %s %s–%s final %v; want %s %s–%s final %v", i, r.Class, r.Start, r.End, r.Final, w.class, w.start, w.end, w.final)
		}
	}
}
