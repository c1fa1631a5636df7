package kube_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// TestReclaimTimeline is the whole reclaim against the real API server:
// the node joins labelled; standard demand reclaims it; at T+0 it is
// cordoned, tainted and annotated with its deadline, a Warning Event is
// posted on it and on each workload pod, and every workload pod is deleted
// with grace min(its own, time left); DaemonSet pods go last; the node is
// released as soon as its pods are gone, and the standard node takes its
// machine.
func TestReclaimTimeline(t *testing.T) {
	const window = 30 * time.Second
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"},
		opts: kube.Options{NodeLabels: map[string]string{"example.com/pool": "spare"},
			PreemptibleTaints: nil}})
	ctx := context.Background()
	graces := watchGraces(t)
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()

	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	n := node(t, pre.Name)
	if n == nil || n.Labels[domain.LabelComputeClass] != "preemptible" || n.Labels["example.com/pool"] != "spare" || !kube.Ready(n) {
		t.Fatalf("registered node %+v", n)
	}
	startPod(t, pre.Name, "tenant-a", "trainer", 30*time.Second, 3*time.Second, false)
	startPod(t, pre.Name, "tenant-a", "server", 600*time.Second, 2*time.Second, false)
	startPod(t, pre.Name, "kube-system", "logs", 5*time.Second, time.Second, true)
	// The controller reads pods from its watch: let it see them.
	time.Sleep(time.Second)

	standard := 8
	f.update("c-k", &standard, nil)
	drained := f.nodes("c-k", domain.NodeDraining, domain.NodeRemoving, domain.NodeRemoved)
	if len(drained) != 1 || drained[0].ID != pre.ID {
		t.Fatalf("reclaimed %+v", drained)
	}
	deadline := drained[0].Deadline
	t0 := drained[0].DrainStartedAt

	// T+0 actions.
	eventually(t, 10*time.Second, func() error {
		n := node(t, pre.Name)
		if n == nil {
			return fmt.Errorf("node gone before the notice was seen")
		}
		if !n.Spec.Unschedulable {
			return fmt.Errorf("not cordoned")
		}
		if n.Annotations[domain.AnnotationDeadline] != deadline.UTC().Format(time.RFC3339) {
			return fmt.Errorf("annotations %v, deadline %v", n.Annotations, deadline)
		}
		for _, tt := range n.Spec.Taints {
			if tt.Key == domain.TaintPreempted && tt.Effect == corev1.TaintEffectNoSchedule {
				return nil
			}
		}
		return fmt.Errorf("taints %+v", n.Spec.Taints)
	})
	eventually(t, 10*time.Second, func() error {
		evs, err := env.Client().CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		seen := map[string]string{}
		for _, e := range evs.Items {
			if e.Reason == "PreemptionNotified" {
				seen[e.InvolvedObject.Kind+"/"+e.Namespace+"/"+e.InvolvedObject.Name] = e.Type
			}
		}
		for _, want := range []string{"Node/default/" + pre.Name, "Pod/tenant-a/trainer", "Pod/tenant-a/server"} {
			if seen[want] != "Warning" {
				return fmt.Errorf("no Warning PreemptionNotified on %s: %v", want, seen)
			}
		}
		if _, ok := seen["Pod/kube-system/logs"]; ok {
			return fmt.Errorf("DaemonSet pod notified with the workload")
		}
		return nil
	})
	// SIGTERM to the workload, each with min(its grace, time left).
	for _, p := range []string{"trainer", "server"} {
		at, ok := kl.SigtermAt("tenant-a", p)
		if !ok {
			t.Fatalf("%s got no SIGTERM", p)
		}
		if at.Sub(t0) > 5*time.Second {
			t.Errorf("%s got SIGTERM %s after T+0", p, at.Sub(t0))
		}
	}

	// Early release, DaemonSet pods last, the standard node takes over.
	std := f.waitNodes("c-k", domain.Standard, domain.NodeReady, 1, window)[0]
	got, err := f.st.GetNode(ctx, pre.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != domain.OutcomeEarly || !got.DrainedAt.Before(deadline) {
		t.Fatalf("drain outcome %s at %v, deadline %v", got.Outcome, got.DrainedAt, deadline)
	}
	if node(t, pre.Name) != nil {
		t.Fatal("reclaimed node object still there")
	}
	logsAt, ok := kl.SigtermAt("kube-system", "logs")
	trainerAt, _ := kl.SigtermAt("tenant-a", "trainer")
	if !ok || logsAt.Before(trainerAt.Add(3*time.Second)) {
		t.Fatalf("DaemonSet pod SIGTERM at %v, workload exited from %v", logsAt, trainerAt.Add(3*time.Second))
	}
	// Grace periods: min(the pod's own, time left).
	if g := graces.get("tenant-a/server"); g < int64(window/time.Second)-2 || g > int64(window/time.Second) {
		t.Errorf("server (grace 600s) was deleted with grace %ds, want the %s left", g, window)
	}
	if g := graces.get("tenant-a/trainer"); g != int64(window/time.Second)-1 && g != int64(window/time.Second) && g != 30 {
		t.Errorf("trainer (grace 30s) was deleted with grace %ds", g)
	}
	if n := node(t, std.Name); n == nil || n.Labels[domain.LabelComputeClass] != "standard" || !kube.Ready(n) {
		t.Fatalf("standard node %+v", n)
	}
}

// TestReclaimDeadline: pods that never exit (their kubelet does not
// answer) are force-deleted at the deadline and the node is removed.
func TestReclaimDeadline(t *testing.T) {
	const window = 10 * time.Second
	f := newFixture(t, fixtureConfig{machines: 1, window: window, attached: []string{"c-k"}})
	f.createCluster("c-k", 0, 8)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)[0]
	// No stand-in kubelet: nothing ever ends these pods but a force delete.
	startPod(t, pre.Name, "tenant-a", "stuck", 600*time.Second, -1, false)
	time.Sleep(time.Second)

	standard := 8
	f.update("c-k", &standard, nil)
	drained, err := f.st.GetNode(f.ctx, pre.ID)
	if err != nil || drained.State != domain.NodeDraining {
		t.Fatalf("%+v %v", drained, err)
	}
	eventually(t, 5*time.Second, func() error {
		p, err := env.Client().CoreV1().Pods("tenant-a").Get(f.ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.DeletionTimestamp == nil {
			return fmt.Errorf("no SIGTERM yet")
		}
		if g := *p.DeletionGracePeriodSeconds; g > int64(window/time.Second) {
			return fmt.Errorf("grace %ds exceeds the %s window", g, window)
		}
		return nil
	})
	f.waitNodes("c-k", domain.Standard, domain.NodeReady, 1, window+10*time.Second)
	got, _ := f.st.GetNode(f.ctx, pre.ID)
	if got.Outcome != domain.OutcomeDeadline || got.DrainedAt.Before(drained.Deadline) {
		t.Fatalf("outcome %s at %v, deadline %v", got.Outcome, got.DrainedAt, drained.Deadline)
	}
	if _, err := env.Client().CoreV1().Pods("tenant-a").Get(f.ctx, "stuck", metav1.GetOptions{}); err == nil {
		t.Fatal("the stuck pod was not force-deleted")
	}
	if node(t, pre.Name) != nil {
		t.Fatal("node object left behind")
	}
}

// graces records the grace period each pod was first deleted with, from
// a watch on every pod.
type graces struct {
	mu sync.Mutex
	m  map[string]int64
}

func watchGraces(t testing.TB) *graces {
	t.Helper()
	g := &graces{m: map[string]int64{}}
	w, err := env.Client().CoreV1().Pods("").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.DeletionGracePeriodSeconds == nil {
				continue
			}
			g.mu.Lock()
			if _, seen := g.m[p.Namespace+"/"+p.Name]; !seen {
				g.m[p.Namespace+"/"+p.Name] = *p.DeletionGracePeriodSeconds
			}
			g.mu.Unlock()
		}
	}()
	return g
}

func (g *graces) get(key string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[key]
}
