package kube_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	// setup, if set, runs on sparecap's fixture before the fill (what else
	// the leader runs meanwhile: webhooks, see webhooks_test.go).
	setup func(tb testing.TB, f *fixture)
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
	return watchNodes(tb, ctx, "", func(n *corev1.Node) bool { return n.Spec.Unschedulable })
}

// watchNodes records when each node matching selector is first seen
// with seen(node) true.
func watchNodes(tb testing.TB, ctx context.Context, selector string, seen func(*corev1.Node) bool) func() map[string]time.Time {
	tb.Helper()
	w, err := env.Client().CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	at := map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && seen(n) {
				mu.Lock()
				if _, ok := at[n.Name]; !ok {
					at[n.Name] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()
	tb.Cleanup(w.Stop)
	return func() map[string]time.Time {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(at)
	}
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
	if s.setup != nil {
		s.setup(tb, f)
	}
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
			got, err := f.router.ListWork(ctx, "c-k", n)
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
	ctx, kl, names, pods, client := s.bareNodes(tb, "drain")
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
// sparecap's numbers are compared with. floorEvict is the same with the
// DisruptionTarget condition kept: it evicts every pod instead (one call
// each, but two writes on the server: the condition, then the deletion).
func (s fanOut) floor(tb testing.TB) notices { return s.bare(tb, "floor", false) }

func (s fanOut) floorEvict(tb testing.TB) notices { return s.bare(tb, "floorev", true) }

func (s fanOut) bare(tb testing.TB, prefix string, evict bool) notices {
	ctx, kl, names, pods, client := s.bareNodes(tb, prefix)
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
				opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
				if evict {
					return client.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{
						ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}, DeleteOptions: &opts})
				}
				return client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts)
			})
		}
	}
	wg.Wait()
	return collect(tb, kl, cordons, t0, names, pods, 10*time.Second)
}

// bareNodes registers s.nodes Ready nodes named <prefix>-NNN with s.pods
// pods each (in namespace bench-<prefix>), outside sparecap, runs the
// stand-in kubelet for them and returns a client with the scenario's
// limits. Everything stops when the test ends.
func (s fanOut) bareNodes(tb testing.TB, prefix string) (context.Context, *kubelet.Kubelet, []string, map[string][]*corev1.Pod, kubernetes.Interface) {
	tb.Helper()
	reset(tb)
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: s.podExit})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(kl.Stop)
	var names []string
	for i := range s.nodes {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		if err := kubelet.RegisterNode(ctx, env.Client(), name, nil); err != nil {
			tb.Fatal(err)
		}
		names = append(names, name)
	}
	pods := s.createPods(tb, "bench-"+prefix, names)
	rc := env.RESTConfig()
	rc.QPS, rc.Burst = s.qps, s.burst
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		tb.Fatal(err)
	}
	return ctx, kl, names, pods, client
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
// each way cordons every node and SIGTERMs every pod. (Speed is measured
// by BenchmarkNoticeFanOut.)
func TestNoticeFanOut(t *testing.T) {
	s := fanOut{nodes: 3, pods: 3, checkpoint: 500 * time.Millisecond, qps: kube.DefaultQPS, burst: kube.DefaultBurst, drainWorkers: 2}
	for _, way := range s.ways() {
		t.Run(way.name, func(t *testing.T) {
			n := way.run(t)
			if len(n.pods) != s.nodes*s.pods || len(n.nodes) != s.nodes {
				t.Fatalf("%d pods, %d nodes noticed", len(n.pods), len(n.nodes))
			}
		})
	}
}

type way struct {
	name string
	run  func(testing.TB) notices
}

func (s fanOut) ways() []way {
	return []way{{"sparecap", s.sparecap}, {"kubectl-drain", s.kubectlDrain}, {"floor", s.floor}, {"floor-evict", s.floorEvict}}
}

// BenchmarkNoticeFanOut: 50 nodes × 20 pods reclaimed at once, each pod
// taking 10 s after SIGTERM to checkpoint and exit; sparecap's driver
// against kubectl's drain package with 10 workers, at the same client QPS
// and burst, and a bare client's floor. Each way is a sub-benchmark, so
// what one started (its controller, its stand-in kubelet) is stopped
// before the next. Run it with:
//
//	go test -run '^$' -bench NoticeFanOut -benchtime 1x ./internal/kube/
func BenchmarkNoticeFanOut(b *testing.B) {
	s := fanOut{nodes: 50, pods: 20, checkpoint: 10 * time.Second, qps: kube.DefaultQPS, burst: kube.DefaultBurst, drainWorkers: 10}
	got := map[string]notices{}
	for _, w := range s.ways() {
		b.Run(w.name, func(b *testing.B) {
			for range b.N {
				n := w.run(b)
				got[w.name] = n
				b.ReportMetric(n.all().Seconds(), "all-s")
				b.ReportMetric(n.quantile(0.5).Seconds(), "p50-s")
				b.ReportMetric(n.quantile(0.99).Seconds(), "p99-s")
				b.ReportMetric(n.nodes[len(n.nodes)-1].Seconds(), "cordoned-s")
			}
		})
	}
	ours, theirs, bare, evict := got["sparecap"], got["kubectl-drain"], got["floor"], got["floor-evict"]
	if len(ours.pods) == 0 || len(theirs.pods) == 0 || len(bare.pods) == 0 || len(evict.pods) == 0 {
		return // a way was filtered out with -bench
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	// A parent benchmark's own log is not shown: print the comparison.
	fmt.Printf("%d nodes × %d pods, checkpoint %s, QPS %g burst %d: sparecap all notices out in %s (p50 %s, p99 %s, cordons by %s); kubectl drain ×%d workers in %s (p50 %s, p99 %s): %.1f× faster; a bare client deleting everything at once: %s (p50 %s, p99 %s), sparecap at %.2f×; evicting everything at once: %s (p50 %s), sparecap at %.2f×",
		s.nodes, s.pods, s.checkpoint, s.qps, s.burst,
		ms(ours.all()), ms(ours.quantile(0.5)), ms(ours.quantile(0.99)), ms(ours.nodes[len(ours.nodes)-1]),
		s.drainWorkers, ms(theirs.all()), ms(theirs.quantile(0.5)), ms(theirs.quantile(0.99)),
		theirs.all().Seconds()/ours.all().Seconds(),
		ms(bare.all()), ms(bare.quantile(0.5)), ms(bare.quantile(0.99)), ours.all().Seconds()/bare.all().Seconds(),
		ms(evict.all()), ms(evict.quantile(0.5)), ours.all().Seconds()/evict.all().Seconds())
	fmt.Println()
}
