package allocator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// benchWorld builds a fleet of scale × 12,500 machines of 8 GPUs (4 regions
// × 4 GPU types; a fifth of each partition reserved by one of 20 projects)
// and scale × 2,000 clusters with 1–4 standard nodes and a preemptible
// target of 0–64 GPUs, so spare capacity is contended. With settled=true the
// plans are applied until the world is stable, which is the state the
// periodic reconcile sees; otherwise nodes are empty, the first plan after a
// start from nothing.
func benchWorld(scale int, settled bool) *world {
	rnd := rand.New(rand.NewPCG(1, 2))
	w := newWorld(t0)
	regions := []string{"us-central-2", "us-central-8", "eu-west-1", "ap-south-1"}
	gpus := []string{"H100_SXM", "A100_SXM", "L40S", "RTX_6000_PCI"}
	perPart := 12500 * scale / 16
	for ri, r := range regions {
		for gi, g := range gpus {
			res := perPart / 5
			w.addMachines(r, g, "", perPart-res)
			for k := 0; k < 4; k++ {
				w.addReservation(fmt.Sprintf("res-%d-%d-%d", ri, gi, k), fmt.Sprintf("proj-%d", (ri*4+gi+k)%20), r, g, res/4)
			}
		}
	}
	nclusters := 2000 * scale
	for i := 0; i < nclusters; i++ {
		part := i % 16
		c := domain.Cluster{
			ID:                     fmt.Sprintf("c-%05d", i),
			ProjectID:              fmt.Sprintf("proj-%d", rnd.IntN(20)),
			Region:                 regions[part/4],
			GPUType:                gpus[part%4],
			Type:                   domain.ClusterKubernetes,
			BillingType:            domain.BillingOnDemand,
			NumGPUs:                8 * (1 + rnd.IntN(4)),
			DesiredPreemptibleGPUs: 8 * rnd.IntN(9),
			Weight:                 1,
			CreatedAt:              t0.Add(time.Duration(i) * time.Second),
		}
		w.s.Clusters = append(w.s.Clusters, c)
	}
	if settled {
		w.settle()
	}
	return w
}

func benchPlan(b *testing.B, scale int, settled bool) {
	w := benchWorld(scale, settled)
	b.ReportAllocs()
	b.ResetTimer()
	var pl Plan
	for i := 0; i < b.N; i++ {
		pl = Compute(w.s, w.now, Config{})
	}
	b.StopTimer()
	b.ReportMetric(float64(len(pl.Provisions)+len(pl.Reclaims)), "changes/plan")
}

// benchNextPlan is the plan the controller makes after a node step on a
// settled fleet: through one Planner, with one node and one cluster
// written since the last plan (new slices for both tables, as store.Cached
// hands them out).
func benchNextPlan(b *testing.B, scale int) {
	w := benchWorld(scale, true)
	var pl Planner
	s := w.s
	pl.Compute(s, w.now, Config{})
	b.ReportAllocs()
	b.ResetTimer()
	var out Plan
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s.Nodes = slices.Clone(s.Nodes)
		k := i % len(s.Nodes)
		n := *s.Nodes[k]
		s.Nodes[k] = &n
		s.Clusters = slices.Clone(s.Clusters)
		s.Clusters[i%len(s.Clusters)].NodeSeq++
		b.StartTimer()
		out = pl.Compute(s, w.now, Config{})
	}
	b.StopTimer()
	b.ReportMetric(float64(len(out.Provisions)+len(out.Reclaims)), "changes/plan")
}

// BenchmarkPlan is the periodic reconcile on a settled 100,000-GPU fleet:
// settled is a plan from nothing (a new leader's first), next the plan
// after a node step through the controller's Planner, cold the first plan
// of an empty fleet.
func BenchmarkPlan(b *testing.B) {
	b.Run("gpus=100k/settled", func(b *testing.B) { benchPlan(b, 1, true) })
	b.Run("gpus=100k/next", func(b *testing.B) { benchNextPlan(b, 1) })
	b.Run("gpus=100k/cold", func(b *testing.B) { benchPlan(b, 1, false) })
	b.Run("gpus=1M/settled", func(b *testing.B) { benchPlan(b, 10, true) })
	b.Run("gpus=1M/next", func(b *testing.B) { benchNextPlan(b, 10) })
	b.Run("gpus=1M/cold", func(b *testing.B) { benchPlan(b, 10, false) })
}

// BenchmarkPartitioned is what the controller plans with: first, a new
// leader's first plan (every partition, from nothing: Load and Plan);
// step, the plan after one node became ready (Apply, then the one
// partition it moved).
func BenchmarkPartitioned(b *testing.B) {
	for _, scale := range []int{1, 10} {
		name := map[int]string{1: "100k", 10: "1M"}[scale]
		b.Run("gpus="+name+"/first", func(b *testing.B) { benchPartitionedFirst(b, scale) })
		b.Run("gpus="+name+"/step", func(b *testing.B) { benchPartitionedStep(b, scale) })
	}
}

func benchPartitionedFirst(b *testing.B, scale int) {
	w := benchWorld(scale, true)
	s := storeOrder(w.s)
	b.ReportAllocs()
	for b.Loop() {
		var pp Partitioned
		pp.Load(s)
		pp.Plan(w.now, Config{}, With{})
	}
}

func benchPartitionedStep(b *testing.B, scale int) {
	w := benchWorld(scale, true)
	s := storeOrder(w.s)
	var pp Partitioned
	pp.Load(s)
	_, tok := pp.Plan(w.now, Config{}, With{})
	pp.Settle(tok)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		n := *s.Nodes[i%len(s.Nodes)]
		i++
		n.LastError = "" // a write a plan reads: a ready node, written again
		n.ReadyAt = n.ReadyAt.Add(time.Nanosecond)
		pp.Apply(Changes{Nodes: []*domain.Node{&n}})
		_, tok := pp.Plan(w.now, Config{}, With{})
		pp.Settle(tok)
	}
}
