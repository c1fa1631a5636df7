package kube_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// fanOut is the notice fan-out scenario: nodes × pods reclaimed at once,
// each pod taking checkpoint after its SIGTERM to exit. It measures, from
// the reclaim decision, when each pod's deletion (SIGTERM) was issued —
// as the stand-in kubelet's watch saw it — and when each node was cordoned.
type fanOut struct {
	nodes, pods int
	checkpoint  time.Duration
	// Client-side limits, the same for both ways.
	qps   float32
	burst int
	// drainWorkers: nodes drained at once the ecosystem's way.
	drainWorkers int
}

// notices are the latencies of one run.
type notices struct {
	pods  []time.Duration // per pod, sorted
	nodes []time.Duration // per node cordon, sorted
}

func (n notices) all() time.Duration { return max(n.pods[len(n.pods)-1], n.nodes[len(n.nodes)-1]) }

func (n notices) quantile(q float64) time.Duration {
	return n.pods[min(len(n.pods)-1, int(q*float64(len(n.pods))))]
}

func (s fanOut) podExit(*corev1.Pod) (time.Duration, bool) { return s.checkpoint, true }

// watchCordons records when each node is first seen unschedulable.
func watchCordons(tb testing.TB, ctx context.Context) func() map[string]time.Time {
	tb.Helper()
	w, err := env.Client().CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && n.Spec.Unschedulable {
				mu.Lock()
				if _, ok := seen[n.Name]; !ok {
					seen[n.Name] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()
	tb.Cleanup(w.Stop)
	return func() map[string]time.Time {
		mu.Lock()
		defer mu.Unlock()
		return copyTimes(seen)
	}
}

func copyTimes(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// collect waits until every pod got SIGTERM and every node was cordoned,
// and returns the latencies from t0.
func collect(tb testing.TB, kl *kubelet.Kubelet, cordons func() map[string]time.Time, t0 time.Time, nodes []string, pods map[string][]*corev1.Pod, within time.Duration) notices {
	tb.Helper()
	var out notices
	eventually(tb, within, func() error {
		out = notices{}
		seen := cordons()
		for _, n := range nodes {
			at, ok := seen[n]
			if !ok {
				return fmt.Errorf("node %s not cordoned", n)
			}
			out.nodes = append(out.nodes, at.Sub(t0))
			for _, p := range pods[n] {
				at, ok := kl.SigtermAt(p.Namespace, p.Name)
				if !ok {
					return fmt.Errorf("pod %s/%s got no SIGTERM", p.Namespace, p.Name)
				}
				out.pods = append(out.pods, at.Sub(t0))
			}
		}
		return nil
	})
	slices.Sort(out.pods)
	slices.Sort(out.nodes)
	return out
}

// sparecap reclaims the nodes through the controller: a preemptible
// target fills them, then standard demand needs every machine back.
func (s fanOut) sparecap(tb testing.TB) notices {
	f := newFixture(tb, fixtureConfig{machines: s.nodes, window: 5 * time.Minute, attached: []string{"c-k"},
		opts: kube.Options{QPS: s.qps, Burst: s.burst}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: s.podExit})
	if err != nil {
		tb.Fatal(err)
	}
	defer kl.Stop()
	f.createCluster("c-k", 0, 8*s.nodes)
	var names []string
	for _, n := range f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, s.nodes, time.Minute) {
		names = append(names, n.Name)
	}
	pods := s.createPods(tb, "bench-sparecap", names)
	// The controller lists pods from its watch: wait until it has them all.
	eventually(tb, 30*time.Second, func() error {
		for _, n := range names {
			got, err := f.router.ListPods(ctx, "c-k", n)
			if err != nil || len(got) != s.pods {
				return fmt.Errorf("%s: %d pods, %v", n, len(got), err)
			}
		}
		return nil
	})
	cordons := watchCordons(tb, ctx)
	standard := 8 * s.nodes
	t0 := time.Now()
	f.update("c-k", &standard, nil)
	return collect(tb, kl, cordons, t0, names, pods, time.Minute)
}

// kubectlDrain drains the nodes the ecosystem's way: k8s.io/kubectl's
// drain package (cordon, then evict every pod and wait for it to go),
// node by node with a pool of workers, as aws-node-termination-handler
// does in queue mode.
func (s fanOut) kubectlDrain(tb testing.TB) notices {
	reset(tb)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: s.podExit})
	if err != nil {
		tb.Fatal(err)
	}
	defer kl.Stop()
	var names []string
	for i := range s.nodes {
		name := fmt.Sprintf("drain-%03d", i)
		if err := kubelet.RegisterNode(ctx, env.Client(), name, nil); err != nil {
			tb.Fatal(err)
		}
		names = append(names, name)
	}
	pods := s.createPods(tb, "bench-drain", names)
	rc := env.RESTConfig()
	rc.QPS, rc.Burst = s.qps, s.burst
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		tb.Fatal(err)
	}
	helper := &drain.Helper{Ctx: ctx, Client: client, Force: true, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true,
		DeleteEmptyDirData: true, Timeout: 10 * time.Minute, Out: io.Discard, ErrOut: io.Discard}
	cordons := watchCordons(tb, ctx)
	queue := make(chan string, len(names))
	for _, n := range names {
		queue <- n
	}
	close(queue)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	t0 := time.Now()
	for range s.drainWorkers {
		wg.Go(func() {
			for name := range queue {
				node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err == nil {
					err = drain.RunCordonOrUncordon(helper, node, true)
				}
				if err == nil {
					err = drain.RunNodeDrain(helper, name)
				}
				if err != nil {
					errs <- fmt.Errorf("drain %s: %w", name, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return collect(tb, kl, cordons, t0, names, pods, 10*time.Second)
}

// floor is what the API server itself allows: a bare client cordons every
// node and deletes every pod at once (48 calls in flight, as sparecap's
// driver), with no controller, store or Events. It is the lower bound
// sparecap's numbers are compared with.
func (s fanOut) floor(tb testing.TB) notices {
	reset(tb)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: s.podExit})
	if err != nil {
		tb.Fatal(err)
	}
	defer kl.Stop()
	var names []string
	for i := range s.nodes {
		name := fmt.Sprintf("floor-%03d", i)
		if err := kubelet.RegisterNode(ctx, env.Client(), name, nil); err != nil {
			tb.Fatal(err)
		}
		names = append(names, name)
	}
	pods := s.createPods(tb, "bench-floor", names)
	rc := env.RESTConfig()
	rc.QPS, rc.Burst = s.qps, s.burst
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		tb.Fatal(err)
	}
	cordons := watchCordons(tb, ctx)
	slots := make(chan struct{}, kube.DefaultInFlight)
	var wg sync.WaitGroup
	call := func(f func() error) {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := f(); err != nil {
				tb.Error(err)
			}
		})
	}
	t0 := time.Now()
	for _, n := range names {
		call(func() error {
			_, err := client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
			return err
		})
	}
	grace := int64(30)
	for _, n := range names {
		for _, p := range pods[n] {
			call(func() error {
				return client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
			})
		}
	}
	wg.Wait()
	return collect(tb, kl, cordons, t0, names, pods, 10*time.Second)
}

// createPods starts s.pods pods on each node, with 30 s of grace (more
// than the checkpoint takes).
func (s fanOut) createPods(tb testing.TB, namespace string, nodes []string) map[string][]*corev1.Pod {
	tb.Helper()
	out := map[string][]*corev1.Pod{}
	for _, n := range nodes {
		ps, err := kubelet.CreatePods(context.Background(), env.Client(), namespace, n, s.pods, 30)
		if err != nil {
			tb.Fatal(err)
		}
		out[n] = ps
	}
	return out
}

// TestNoticeFanOut runs the benchmark's scenario small, for correctness:
// both ways cordon every node and SIGTERM every pod. (Speed is measured
// by BenchmarkNoticeFanOut.)
func TestNoticeFanOut(t *testing.T) {
	s := fanOut{nodes: 3, pods: 3, checkpoint: 500 * time.Millisecond, qps: kube.DefaultQPS, burst: kube.DefaultBurst, drainWorkers: 2}
	for name, run := range map[string]func(testing.TB) notices{"sparecap": s.sparecap, "kubectl drain": s.kubectlDrain, "floor": s.floor} {
		n := run(t)
		if len(n.pods) != s.nodes*s.pods || len(n.nodes) != s.nodes {
			t.Fatalf("%s: %d pods, %d nodes noticed", name, len(n.pods), len(n.nodes))
		}
	}
}

// BenchmarkNoticeFanOut: 50 nodes × 20 pods reclaimed at once, each pod
// taking 10 s after SIGTERM to checkpoint and exit; sparecap's driver
// against kubectl's drain package with 10 workers, at the same client QPS
// and burst. Run it with:
//
//	go test -run '^$' -bench NoticeFanOut -benchtime 1x ./internal/kube/
func BenchmarkNoticeFanOut(b *testing.B) {
	s := fanOut{nodes: 50, pods: 20, checkpoint: 10 * time.Second, qps: kube.DefaultQPS, burst: kube.DefaultBurst, drainWorkers: 10}
	for range b.N {
		ours := s.sparecap(b)
		theirs := s.kubectlDrain(b)
		bare := s.floor(b)
		b.ReportMetric(ours.all().Seconds(), "sparecap-all-s")
		b.ReportMetric(ours.quantile(0.99).Seconds(), "sparecap-p99-s")
		b.ReportMetric(theirs.all().Seconds(), "drain-all-s")
		b.ReportMetric(theirs.quantile(0.99).Seconds(), "drain-p99-s")
		b.ReportMetric(theirs.all().Seconds()/ours.all().Seconds(), "ratio")
		b.ReportMetric(bare.all().Seconds(), "floor-all-s")
		b.Logf("%d nodes × %d pods, checkpoint %s, QPS %g burst %d: sparecap all notices out in %s (p50 %s, p99 %s, cordons by %s); kubectl drain ×%d workers in %s (p50 %s, p99 %s); %.1f× faster; a bare client deleting everything at once: %s (p50 %s, p99 %s)",
			s.nodes, s.pods, s.checkpoint, s.qps, s.burst,
			ours.all().Round(time.Millisecond), ours.quantile(0.5).Round(time.Millisecond), ours.quantile(0.99).Round(time.Millisecond), ours.nodes[len(ours.nodes)-1].Round(time.Millisecond),
			s.drainWorkers, theirs.all().Round(time.Millisecond), theirs.quantile(0.5).Round(time.Millisecond), theirs.quantile(0.99).Round(time.Millisecond),
			theirs.all().Seconds()/ours.all().Seconds(),
			bare.all().Round(time.Millisecond), bare.quantile(0.5).Round(time.Millisecond), bare.quantile(0.99).Round(time.Millisecond))
	}
}
