package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// handOver: a standard request needs the machines of `nodes` preemptible
// nodes whose pods take checkpoint after SIGTERM to exit. It returns the
// time from the request until the last standard node is Ready, as a watch
// on the Node objects sees it.
func handOver(tb testing.TB, nodes, podsPerNode int, checkpoint time.Duration) time.Duration {
	f := newFixture(tb, fixtureConfig{machines: nodes, window: 5 * time.Minute, attached: []string{"c-k"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{
		ExitAfter: func(*corev1.Pod) (time.Duration, bool) { return checkpoint, true }})
	if err != nil {
		tb.Fatal(err)
	}
	defer kl.Stop()
	f.createCluster("c-k", 0, 8*nodes)
	pre := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, nodes, time.Minute)
	for _, n := range pre {
		if _, err := kubelet.CreatePods(ctx, env.Client(), "training", n.Name, podsPerNode, 60); err != nil {
			tb.Fatal(err)
		}
	}
	eventually(tb, 30*time.Second, func() error {
		for _, n := range pre {
			if got, err := f.router.ListWork(ctx, "c-k", n.Name); err != nil || len(got) != podsPerNode {
				return fmt.Errorf("%s: %d pods, %v", n.Name, len(got), err)
			}
		}
		return nil
	})
	ready := watchNodes(tb, ctx, domain.LabelComputeClass+"="+string(domain.Standard), kube.Ready)
	standard := 8 * nodes
	t0 := time.Now()
	f.update("c-k", &standard, nil)
	var last time.Time
	eventually(tb, 6*time.Minute, func() error {
		seen := ready()
		if len(seen) < nodes {
			return fmt.Errorf("%d of %d standard nodes Ready", len(seen), nodes)
		}
		for _, at := range seen {
			if at.After(last) {
				last = at
			}
		}
		return nil
	})
	for _, n := range f.nodes("c-k", domain.NodeRemoved) {
		if n.Outcome != domain.OutcomeEarly {
			tb.Fatalf("%s drained with outcome %s", n.Name, n.Outcome)
		}
	}
	return last.Sub(t0)
}

// TestHandOver runs the hand-over small: the standard nodes come as soon
// as the preemptible pods have checkpointed, not at the deadline.
func TestHandOver(t *testing.T) {
	if d := handOver(t, 2, 2, 2*time.Second); d >= 5*time.Minute {
		t.Fatalf("standard nodes Ready after %s: the drain ran to its deadline", d)
	}
}

// BenchmarkHandOver: a standard request needs 4 preemptible nodes back;
// their pods checkpoint for 20 s after SIGTERM. Goal: the standard nodes
// are Ready within the checkpoint + 2 s (early release), where a drain
// that always ran to its deadline would take 5 minutes. Run it with:
//
//	go test -run '^$' -bench HandOver -benchtime 1x ./internal/kube/
func BenchmarkHandOver(b *testing.B) {
	const checkpoint = 20 * time.Second
	for range b.N {
		d := handOver(b, 4, 10, checkpoint)
		b.ReportMetric(d.Seconds(), "ready-s")
		b.ReportMetric((d - checkpoint).Seconds(), "over-checkpoint-s")
		b.Logf("standard nodes Ready %s after the request (checkpoint %s, so %s of overhead); a drain to the deadline: 5m0s",
			d.Round(time.Millisecond), checkpoint, (d - checkpoint).Round(time.Millisecond))
	}
}
