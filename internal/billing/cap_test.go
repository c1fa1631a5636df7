package billing

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestACappedClusterIsNeverBilledAboveItsCap: a preemptible node of a
// cluster capped at $1.60 a GPU-hour is billed $1.50 while its type costs
// $3.00 on demand, and $1.60, not $2.00, from a price change of $4.00 to
// the second its drain starts; every second of every line is at most the
// cap. Standard nodes and uncapped clusters are not touched.
func TestACappedClusterIsNeverBilledAboveItsCap(t *testing.T) {
	change := t0.Add(30 * time.Minute)
	b := book(t, od("H200", "3.00", time.Time{}), od("H200", "4.00", change))
	c := &domain.Cluster{ID: "c1", ProjectID: "p", Region: "us", GPUType: "H200", BillingType: domain.BillingOnDemand, MaxPreemptiblePrice: "1.60"}
	m := &domain.Machine{ID: "m1", Region: "us", GPUType: "H200", GPUs: 8}
	n := &domain.Node{ID: "n1", ClusterID: "c1", MachineID: "m1", GPUType: "H200", Class: domain.Preemptible, GPUs: 8,
		State: domain.NodeRemoved, ReadyAt: t0, DrainStartedAt: change.Add(2 * time.Second), RemovedAt: change.Add(time.Minute)}
	r, ok := Record(n, c, m, t0.Add(2*time.Hour))
	if !ok || r.MaxRateMicros != 1_600_000 || !r.End.Equal(change.Add(2*time.Second)) {
		t.Fatalf("record %+v (%v)", r, ok)
	}
	tot, lines := priceAll(b, []domain.UsageRecord{r}, t0, t0.Add(2*time.Hour))
	if len(lines) != 2 || lines[0].EffectiveRate() != "1.50" || lines[1].EffectiveRate() != "1.60" {
		t.Fatalf("lines %+v", lines)
	}
	for _, l := range lines {
		// Per second: the amount of one GPU-second at most the cap's.
		if one, _ := l.Part(1); AtFullRate(1_600_000, 1).Less(one) {
			t.Errorf("a GPU-second at %s is billed above the cap", one.Exact())
		}
	}
	// 8 GPUs: 30 min at $1.50, 2 s at $1.60 (not $2.00).
	want := amount(1_500_000, FullBP, 8*1800).Add(amount(1_600_000, FullBP, 8*2))
	if tot.Amount != want {
		t.Fatalf("amount %s, want %s", tot.Amount.Exact(), want.Exact())
	}
	if tot.OnDemand != amount(3_000_000, FullBP, 8*1800).Add(amount(4_000_000, FullBP, 8*2)) {
		t.Errorf("on-demand %s: savings count against the on-demand price", tot.OnDemand.Exact())
	}
	for _, other := range []func(*domain.Node, *domain.Cluster){
		func(n *domain.Node, _ *domain.Cluster) { n.Class = domain.Standard },
		func(_ *domain.Node, c *domain.Cluster) { c.MaxPreemptiblePrice = "" },
	} {
		n2, c2 := *n, *c
		other(&n2, &c2)
		r, _ := Record(&n2, &c2, m, t0.Add(2*time.Hour))
		if r.MaxRateMicros != 0 {
			t.Errorf("record %+v has a cap", r)
		}
	}
}
