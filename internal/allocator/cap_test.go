package allocator

import (
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestSpreadByReclaimsAndDroppedTypes: capacity-optimized tries the pool
// that reclaims least first; what the types listed have no room for
// stays on the nodes of a type no longer listed, unless it is capped.
func TestSpreadByReclaimsAndDroppedTypes(t *testing.T) {
	pools := map[string]Pool{"H100": {Price: 1_500_000, Room: 64, Reclaims: 0.20}, "H200": {Price: 1_750_000, Room: 8, Reclaims: 0.01},
		"B200": {Price: 2_500_000, Room: 64, Reclaims: 0.01}}
	for _, c := range []struct {
		name string
		c    *domain.Cluster
		held map[string]int
		cap  uint64
		want string
	}{
		{"capacity optimized: fewest reclaims, then room", multi(16, CapacityOptimized, "H100", "H200", "B200"), nil, 0, "map[B200:16 H100:0 H200:0]"},
		{"price capacity optimized: fits, price, reclaims", multi(8, PriceCapacityOptimized, "B200", "H100", "H200"), nil, 0, "map[B200:0 H100:8 H200:0]"},
		{"a dropped type keeps what the listed cannot take", multi(32, "", "H200"), map[string]int{"H100": 16}, 0, "map[H100:16 H200:16]"},
		{"a dropped type gives way to room", multi(8, "", "H200"), map[string]int{"H100": 16}, 0, "map[H200:8]"},
		{"a dropped type above the cap keeps nothing", multi(32, "", "H200"), map[string]int{"B200": 16}, 2_000_000, "map[H200:32]"},
	} {
		if got := fmt.Sprint(Spread(c.c, c.held, pools, c.cap)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// capWorld is 2 H100 and 4 H200 machines in one region, and cluster c,
// holding a ready preemptible node on each machine of held.
func capWorld(now time.Time, c domain.Cluster, held ...string) Snapshot {
	var s Snapshot
	for i := range 2 {
		s.Machines = append(s.Machines, domain.Machine{ID: fmt.Sprintf("H100-%d", i), Region: "r", GPUType: "H100", GPUs: 8, CreatedAt: now})
	}
	for i := range 4 {
		s.Machines = append(s.Machines, domain.Machine{ID: fmt.Sprintf("H200-%d", i), Region: "r", GPUType: "H200", GPUs: 8, CreatedAt: now})
	}
	s.Clusters = []domain.Cluster{c}
	for i, m := range held {
		s.Nodes = append(s.Nodes, &domain.Node{ID: fmt.Sprintf("n-%d", i), ClusterID: c.ID, MachineID: m, GPUType: m[:4],
			Class: domain.Preemptible, GPUs: 8, State: domain.NodeReady, CreatedAt: now, ReadyAt: now})
	}
	return s
}

// TestFacetedCapKeepsATypeAbovePrice: over H100 ($1.50) and H200 ($2.00)
// under a cap of $1.60, the target is planned on H100 alone.
func TestFacetedCapKeepsATypeAbovePrice(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	c := domain.Cluster{ID: "c-1", Region: "r", GPUType: "H200", NumGPUs: 0, BillingType: domain.BillingOnDemand, CreatedAt: now,
		DesiredPreemptibleGPUs: 48, PreemptibleGPUTypes: []string{"H200", "H100"}, MaxPreemptiblePrice: "1.60"}
	f := Faceted{
		Price: func(_, t string, _ time.Time) uint64 {
			return map[string]uint64{"H100": 1_500_000, "H200": 2_000_000}[t]
		},
		Cap: func(*domain.Cluster) uint64 { return 1_600_000 },
	}
	f.Load(capWorld(now, c))
	for i := range 3 {
		pl, _ := f.Plan(now.Add(time.Duration(i)*time.Second), Config{}, With{})
		for _, p := range pl.Provisions {
			if p.GPUType != "H100" {
				t.Fatalf("plan %d provisions %+v above the cap", i, p)
			}
		}
	}
}

// TestFacetedCapReleasesAtAPriceChange: a cluster of one type under a
// cap of $1.60 keeps its nodes while H200 costs $1.50; from the moment a
// price of $1.80 takes effect its nodes are reclaimed (that plan), and its target
// is unmet for its cap.
func TestFacetedCapReleasesAtAPriceChange(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	change := now.Add(time.Hour)
	c := domain.Cluster{ID: "c-1", Region: "r", GPUType: "H200", BillingType: domain.BillingOnDemand, CreatedAt: now,
		DesiredPreemptibleGPUs: 16, MaxPreemptiblePrice: "1.60"}
	f := Faceted{
		Price: func(_, _ string, at time.Time) uint64 {
			if at.Before(change) {
				return 1_500_000
			}
			return 1_800_000
		},
		Cap: func(*domain.Cluster) uint64 { return 1_600_000 },
	}
	f.Load(capWorld(now, c, "H200-0", "H200-1"))
	for _, at := range []time.Time{now, change.Add(-time.Second)} {
		if pl, _ := f.Plan(at, Config{}, With{}); len(pl.Reclaims)+len(pl.Provisions) != 0 {
			t.Fatalf("at %s under the cap: %+v", at, pl)
		}
	}
	pl, _ := f.Plan(change, Config{}, With{})
	if len(pl.Reclaims) != 2 || len(pl.Provisions) != 0 {
		t.Fatalf("after the change: reclaims %+v, provisions %+v", pl.Reclaims, pl.Provisions)
	}
	for _, r := range pl.Reclaims {
		if r.ClusterID != "c-1" || r.Why != "the preemptible price of H200 ($1.8 per GPU-hour) is above the cluster's cap of $1.60" {
			t.Errorf("reclaim %+v", r)
		}
	}
	// A cluster whose every type is above its cap says so.
	g := Faceted{Price: f.Price, Cap: f.Cap}
	g.Load(capWorld(now, c))
	var st ClusterState
	for i := range 2 {
		pl, _ := g.Plan(change.Add(time.Duration(i)*time.Second), Config{}, With{})
		if len(pl.Provisions) != 0 {
			t.Fatalf("provisions above the cap: %+v", pl.Provisions)
		}
		for _, cs := range pl.Clusters {
			if cs.ClusterID == "c-1" {
				st = cs
			}
		}
	}
	if st.Unfulfilled != domain.UnfulfilledNoCapacity || st.Message == "" {
		t.Errorf("state %+v", st)
	}
}
