package kueuetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/kube/kubeenv"
	"github.com/sparecap/sparecap/internal/queues/admission"
)

// BenchmarkRequeueAtNotice measures, in the same mini cluster and Kueue
// (waitForPodsReady on, with Kueue's default timeout of 5 minutes and its
// recoveryTimeout left to default to it), the time from sparecap's reclaim
// decision (T+0, the node's drain start) to the reclaimed workload evicted
// and requeued by Kueue: through sparecap's admission check (docs/queues.md's
// queue), and without it (the same queue with no check: Kueue notices only
// that the workload's pods are not ready, and waits recoveryTimeout). Run
// it with -benchtime 1x (make bench-queues); the path without the check
// takes over six minutes.
func BenchmarkRequeueAtNotice(b *testing.B) {
	for range b.N {
		for _, arm := range []struct {
			name  string
			check bool
		}{{"check", true}, {"waitForPodsReady", false}} {
			evicted, requeued, reason := requeueAfterReclaim(b, arm.check)
			b.ReportMetric(evicted.Seconds(), arm.name+"-evicted-s")
			b.ReportMetric(requeued.Seconds(), arm.name+"-requeued-s")
			b.Logf("%s: evicted (%s) %s and requeued %s after the reclaim decision", arm.name, reason,
				evicted.Round(10*time.Millisecond), requeued.Round(10*time.Millisecond))
		}
	}
}

// requeueAfterReclaim runs the docs' Job on two preemptible nodes, has one
// of them reclaimed (another tenant takes its machine as standard
// capacity, so there is no capacity left for the Job's pod), and returns
// how long after the reclaim decision Kueue evicted the workload (and
// why) and put it back in its queue, as a watch of the workload saw them.
func requeueAfterReclaim(b *testing.B, check bool) (evicted, requeued time.Duration, reason string) {
	b.Helper()
	ctx := context.Background()
	w := newWorld(b, 3, map[string]cluster{"tenant": miniCluster()})
	w.Start()
	defer w.Stop()
	w.Create("tenant", "p", 8, 16, 0)
	text, err := docs.Snippet("queues.md", "kueue-setup")
	if err != nil {
		b.Fatal(err)
	}
	if !check {
		text = text[:strings.Index(text, "  admissionChecksStrategy:")] + text[strings.Index(text, "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue"):]
	}
	if err := env.Apply(ctx, []byte(text)); err != nil {
		b.Fatal(err)
	}
	w.WaitReady("tenant", 2, 60*time.Second)
	job := submitJob(b, "bench", "1h")
	kubeenv.Eventually(b, 60*time.Second, func() error {
		wl, err := workloadOf(b, job)
		if err != nil {
			return err
		}
		if !isTrue(wl, "Admitted") || !isTrue(wl, "PodsReady") {
			return fmt.Errorf("workload not admitted with its pods ready: %+v", wl.Status.Conditions)
		}
		return nil
	})

	seen := watchConditions(ctx, b)
	w.Create("other", "q", 8, 0, 0)
	decided := w.WaitDraining("tenant", 30*time.Second).DrainStartedAt
	within := 15 * time.Second
	if !check {
		within = 8 * time.Minute
	}
	ev := seen.wait(b, "Evicted", within)
	rq := seen.wait(b, "Requeued", within)
	return ev.at.Sub(decided), rq.at.Sub(decided), ev.reason
}

// conditions records when a watch of the namespace's workloads first saw
// each condition type turn True (after it started), with its reason.
type conditions struct {
	mu    sync.Mutex
	first map[string]seenCond
}

type seenCond struct {
	at     time.Time
	reason string
}

func watchConditions(ctx context.Context, b *testing.B) *conditions {
	c := &conditions{first: map[string]seenCond{}}
	wi, err := env.Dynamic().Resource(workloadsGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(wi.Stop)
	go func() {
		for ev := range wi.ResultChan() {
			now := time.Now()
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			var wl admission.Workload
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wl) != nil {
				continue
			}
			c.mu.Lock()
			for _, cond := range wl.Status.Conditions {
				if _, done := c.first[cond.Type]; !done && cond.Status == metav1.ConditionTrue &&
					(cond.Type == "Evicted" || (cond.Type == "Requeued" && c.first["Evicted"].at != time.Time{})) {
					c.first[cond.Type] = seenCond{at: now, reason: cond.Reason}
				}
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *conditions) wait(b *testing.B, cond string, within time.Duration) seenCond {
	b.Helper()
	var got seenCond
	kubeenv.Eventually(b, within, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		s, ok := c.first[cond]
		if !ok {
			return fmt.Errorf("the workload is not %s yet", cond)
		}
		got = s
		return nil
	})
	return got
}
