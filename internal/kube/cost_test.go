package kube_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/budget"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/worklog"
)

// TestCostSplitOnTheAPIServer: pods on a node of the real API server,
// recorded by the work recorder through the driver, get their GPUs' share
// of the node's metered cost, by label, from when each started; a pod
// holding no GPU gets none.
func TestCostSplitOnTheAPIServer(t *testing.T) {
	const ns = "tenant-cost"
	f := newFixture(t, fixtureConfig{machines: 1, attached: []string{"c-cost"}})
	kl, err := kubelet.Start(f.ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter, RunPods: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	f.createCluster("c-cost", 0, 8)
	node := f.waitNodes("c-cost", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	for _, p := range []struct {
		name, team string
		gpus       int64
	}{{"vision-0", "vision", 4}, {"nlp-0", "nlp", 2}, {"cpu-0", "vision", 0}} {
		_, err := kubelet.CreatePods(f.ctx, env.Client(), ns, node.Name, 1, 30, podOptions(p.name, time.Second, false), func(pod *corev1.Pod) {
			pod.Labels = map[string]string{"team": p.team}
			if p.gpus > 0 {
				gpus := corev1.ResourceList{kube.ResourceGPU: *resource.NewQuantity(p.gpus, resource.DecimalSI)}
				pod.Spec.Containers[0].Resources.Requests, pod.Spec.Containers[0].Resources.Limits = gpus, gpus
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if w, ok := f.router.Running("c-cost", node.Name); !ok || len(w) != 2 || w[0].Start.IsZero() || w[1].Start.IsZero() {
			return fmt.Errorf("running %+v (%v)", w, ok)
		}
		return nil
	})
	rec := worklog.New(f.st, f.st, f.router, clock.Real{}, nil)
	if err := rec.Pass(f.ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := metering.New(f.st, clock.Real{}, nil).Cut(f.ctx); err != nil {
		t.Fatal(err)
	}
	starts := map[string]time.Time{}
	err = f.st.ScanWorkSpans(f.ctx, store.WorkSpanFilter{ClusterID: "c-cost"}, func(w domain.WorkSpan) error {
		starts[w.Labels["team"]] = w.Start
		return nil
	})
	if err != nil || len(starts) != 2 {
		t.Fatalf("spans by team %v (%v)", starts, err)
	}
	book, err := billing.NewBook([]domain.Price{{ID: "od", Kind: domain.PriceOnDemand, GPUType: gpu, Value: "2.00", EffectiveFrom: time.Unix(0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	from := now.Add(-time.Hour)
	spend := func(label string) float64 {
		hours, err := budget.Hourly(f.ctx, f.st, book, "p", label, from, now)
		if err != nil {
			t.Fatal(err)
		}
		var sum billing.Money
		for _, h := range hours {
			sum = sum.Add(h)
		}
		v, _ := sum.Rat().Float64()
		return v
	}
	recs, err := f.st.ListUsage(f.ctx, store.UsageFilter{ClusterID: "c-cost"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("usage %+v (%v)", recs, err)
	}
	// The node's 8 GPUs from ready to now cost total; each team's pod its
	// GPUs from its start, to now.
	total := spend("")
	nodeGPUSeconds := 8 * float64(now.Unix()-recs[0].Start.Unix()) // billing is by whole seconds
	for team, gpus := range map[string]float64{"vision": 4, "nlp": 2} {
		want := total * gpus * float64(now.Unix()-starts[team].Unix()) / nodeGPUSeconds
		if got := spend("team=" + team); total == 0 || math.Abs(got-want) > 1e-9 {
			t.Errorf("team %s: $%.9f of the node's $%.9f, want $%.9f (%v GPUs since %v; the node's since %v; now %v)", team, got, total, want, gpus, starts[team], recs[0].Start, now)
		}
	}
}
