package slurm_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/budget"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/worklog"
)

// TestCostSplitOnSlurmctld: jobs on a node of the real slurmctld,
// recorded by the work recorder through the driver, get their GPUs'
// share (--gres=gpu:1 each) of the node's metered cost, from when each
// started; the rest of the node is idle.
func TestCostSplitOnSlurmctld(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 1, window: time.Minute})
	f.createCluster("c-cost", 0, 8)
	node := f.waitNodes("c-cost", domain.Preemptible, domain.NodeReady, 1, time.Minute)[0]
	for _, name := range []string{"train", "eval"} {
		submit(t, f.env, job{Node: node.Name, Name: name})
	}
	eventually(t, 20*time.Second, func() error {
		if w, ok := f.router.Running("c-cost", node.Name); !ok || len(w) != 2 || w[0].GPUs != 1 || w[1].GPUs != 1 {
			return fmt.Errorf("running %+v (%v)", w, ok)
		}
		return nil
	})
	if err := worklog.New(f.st, f.st, f.router, clock.Real{}, nil).Pass(f.ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := metering.New(f.st, clock.Real{}, nil).Cut(f.ctx); err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	err := f.st.ScanWorkSpans(f.ctx, store.WorkSpanFilter{ClusterID: "c-cost"}, func(w domain.WorkSpan) error {
		if w.Labels["user"] == "" || w.Job == "" {
			t.Errorf("span %+v: no user or job", w)
		}
		starts = append(starts, w.Start)
		return nil
	})
	if err != nil || len(starts) != 2 {
		t.Fatalf("spans %v (%v)", starts, err)
	}
	recs, err := f.st.ListUsage(f.ctx, store.UsageFilter{ClusterID: "c-cost"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("usage %+v (%v)", recs, err)
	}
	book, err := billing.NewBook([]domain.Price{{ID: "od", Kind: domain.PriceOnDemand, GPUType: gpu, Value: "2.00", EffectiveFrom: time.Unix(0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	spend := func(label string) float64 {
		hours, err := budget.Hourly(f.ctx, f.st, book, "p", label, now.Add(-time.Hour), now)
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
	total := spend("")
	var jobSeconds float64
	for _, s := range starts {
		jobSeconds += float64(now.Unix() - s.Unix())
	}
	user := ""
	f.st.ScanWorkSpans(f.ctx, store.WorkSpanFilter{ClusterID: "c-cost"}, func(w domain.WorkSpan) error { user = w.Labels["user"]; return nil })
	want := total * jobSeconds / (8 * float64(now.Unix()-recs[0].Start.Unix()))
	if got := spend("user=" + user); total == 0 || math.Abs(got-want) > 1e-9 {
		t.Fatalf("the jobs of %s: $%.9f of the node's $%.9f, want $%.9f (started %v, the node %v)", user, got, total, want, starts, recs[0].Start)
	}
}
