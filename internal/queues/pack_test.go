package queues

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestPack(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bins, pods []int64
		ok         bool
		free       []int64
	}{
		{"fits whole nodes", []int64{8, 8}, []int64{8, 8}, true, []int64{0, 0}},
		{"one too many", []int64{8, 8}, []int64{8, 8, 8}, false, nil},
		{"fragmented: 12 free but no 8 in one place", []int64{4, 4, 4}, []int64{8}, false, nil},
		{"largest first", []int64{4, 8}, []int64{4, 8}, true, []int64{0, 0}},
		{"no GPUs always fits", nil, []int64{0, 0}, true, nil},
		{"nothing asked", []int64{8}, nil, true, []int64{8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			free, ok := Pack(tc.bins, tc.pods)
			if ok != tc.ok || (ok && !slices.Equal(free, tc.free)) {
				t.Fatalf("Pack(%v, %v) = %v, %v; want %v, %v", tc.bins, tc.pods, free, ok, tc.free, tc.ok)
			}
		})
	}
	bins := []int64{8}
	Pack(bins, []int64{8})
	if bins[0] != 8 {
		t.Fatal("Pack changed its input")
	}
}

func TestNodesFor(t *testing.T) {
	for _, tc := range []struct {
		pods  []int64
		nodes int
		ok    bool
	}{
		{[]int64{8, 8, 8}, 3, true},
		{[]int64{2, 2, 2, 2}, 1, true},
		{[]int64{6, 2, 6, 2}, 2, true},
		{[]int64{5, 5}, 2, true},
		{[]int64{0, 0}, 0, true},
		{[]int64{16}, 0, false},
	} {
		if n, ok := NodesFor(tc.pods, 8); n != tc.nodes || ok != tc.ok {
			t.Errorf("NodesFor(%v, 8) = %d, %v; want %d, %v", tc.pods, n, ok, tc.nodes, tc.ok)
		}
	}
}

// TestPackProperties: whatever Pack says fits, fits: no bin goes
// negative, exactly the pods' GPUs are taken, and the nodes NodesFor asks
// for do hold the pods.
func TestPackProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		bins := rapid.SliceOfN(rapid.Int64Range(0, 8), 0, 6).Draw(rt, "bins")
		pods := rapid.SliceOfN(rapid.Int64Range(0, 8), 0, 8).Draw(rt, "pods")
		free, ok := Pack(bins, pods)
		var before, after, asked int64
		for i := range bins {
			before += bins[i]
			after += free[i]
			if free[i] < 0 || free[i] > bins[i] {
				rt.Fatalf("bin %d: %d free of %d", i, free[i], bins[i])
			}
		}
		for _, p := range pods {
			asked += p
		}
		if ok && before-after != asked {
			rt.Fatalf("took %d GPUs for pods asking %d", before-after, asked)
		}
		if !ok && asked <= 0 {
			rt.Fatalf("pods asking nothing did not fit")
		}
		n, fits := NodesFor(pods, 8)
		if !fits {
			rt.Fatalf("8-GPU pods at most, yet NodesFor says they do not fit a node")
		}
		nodes := make([]int64, n)
		for i := range nodes {
			nodes[i] = 8
		}
		if _, ok := Pack(nodes, pods); !ok {
			rt.Fatalf("NodesFor(%v) = %d nodes, which do not hold them", pods, n)
		}
	})
}
