package allocator

import (
	"fmt"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
)

func multi(target int, strategy string, types ...string) *domain.Cluster {
	return &domain.Cluster{ID: "c-1", GPUType: types[0], NumGPUs: 8, DesiredPreemptibleGPUs: target,
		PreemptibleGPUTypes: types, PreemptibleStrategy: strategy}
}

func TestFacetsOfATargetOverTwoTypes(t *testing.T) {
	c := multi(32, "", "H100", "H200")
	fs := Facets(*c, map[string]int{"H100": 16, "H200": 16})
	if len(fs) != 2 || fs[0].ID != "c-1" || fs[0].NumGPUs != 8 || fs[0].TargetPreemptibleGPUs() != 16 ||
		fs[1].ID != "c-1/H200" || fs[1].GPUType != "H200" || fs[1].NumGPUs != 0 || fs[1].TargetPreemptibleGPUs() != 16 {
		t.Fatalf("facets %+v", fs)
	}
	if RealID("c-1/H200") != "c-1" || RealID("c-1") != "c-1" {
		t.Error("RealID")
	}
	one := domain.Cluster{ID: "c-2", GPUType: "H100", DesiredPreemptibleGPUs: 8}
	if fs := Facets(one, nil); len(fs) != 1 || fs[0].DesiredPreemptibleGPUs != 8 {
		t.Errorf("a cluster of one type is itself: %+v", fs)
	}
	n := &domain.Node{GPUType: "H200"}
	if NodeFacet(n, c) != "c-1/H200" || NodeFacet(&domain.Node{}, c) != "c-1" || NodeFacet(&domain.Node{GPUType: "L40S"}, c) != "c-1/L40S" {
		t.Error("NodeFacet")
	}
}

// TestSpread: held nodes stay, the rest fills in the strategy's order as
// far as each pool has room, what none has waits on the first; types
// above the cap get nothing.
func TestSpread(t *testing.T) {
	pools := map[string]Pool{"H100": {Price: 1_500_000, Room: 8}, "H200": {Price: 1_750_000, Room: 64}, "B200": {Price: 2_500_000, Room: 64}}
	for _, c := range []struct {
		name  string
		c     *domain.Cluster
		held  map[string]int
		pools map[string]Pool
		cap   uint64
		want  string
	}{
		{"in order, the first full", multi(32, "", "H100", "H200"), nil, pools, 0, "map[H100:8 H200:24]"},
		{"held stays", multi(32, "", "H100", "H200"), map[string]int{"H200": 16}, pools, 0, "map[H100:8 H200:24]"},
		{"held above the target: the least preferred goes", multi(16, "", "H100", "H200"), map[string]int{"H100": 8, "H200": 16}, pools, 0, "map[H100:8 H200:8]"},
		{"no room anywhere waits on the first", multi(32, "", "H100", "H200"), nil, map[string]Pool{"H100": {Room: 0}, "H200": {Room: 0}}, 0, "map[H100:32 H200:0]"},
		{"unknown room takes it all", multi(32, "", "H100", "H200"), nil, map[string]Pool{"H100": {Room: -1}}, 0, "map[H100:32 H200:0]"},
		{"lowest price", multi(32, LowestPrice, "B200", "H200"), nil, pools, 0, "map[B200:0 H200:32]"},
		{"capacity optimized", multi(16, CapacityOptimized, "H100", "H200"), nil, pools, 0, "map[H100:0 H200:16]"},
		{"price capacity optimized", multi(32, PriceCapacityOptimized, "B200", "H100", "H200"), nil, pools, 0, "map[B200:0 H100:0 H200:32]"},
		{"the cap leaves a type out", multi(32, "", "H100", "B200"), map[string]int{"B200": 8}, pools, 2_000_000, "map[H100:32]"},
	} {
		if got := fmt.Sprint(Spread(c.c, c.held, c.pools, c.cap)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestMergeFacetStates(t *testing.T) {
	c := multi(32, "", "H100", "H200")
	got := Merge(c, []ClusterState{
		{ClusterID: "c-1", Status: domain.StatusReady, StandardGPUs: 8, AllocatedPreemptibleGPUs: 8, FairShareGPUs: 8, Unfulfilled: domain.UnfulfilledNoCapacity, Message: "none left"},
		{ClusterID: "c-1/H200", Status: domain.StatusReady, AllocatedPreemptibleGPUs: 16, FairShareGPUs: 24, Unfulfilled: domain.UnfulfilledProvisioning},
	})
	if got.ClusterID != "c-1" || got.StandardGPUs != 8 || got.AllocatedPreemptibleGPUs != 24 || got.FairShareGPUs != 32 || got.Unfulfilled != domain.UnfulfilledNoCapacity {
		t.Errorf("merged %+v", got)
	}
	got = Merge(c, []ClusterState{{AllocatedPreemptibleGPUs: 8, Unfulfilled: domain.UnfulfilledNoCapacity}, {AllocatedPreemptibleGPUs: 24}})
	if got.Unfulfilled != domain.UnfulfilledNone {
		t.Errorf("met across types but %+v", got)
	}
}
