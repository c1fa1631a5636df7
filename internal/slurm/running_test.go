package slurm

import "testing"

func TestGPUsOfAJob(t *testing.T) {
	for _, c := range []struct {
		alloc, per  string
		nodes, want int
	}{
		{"cpu=2,mem=1G,node=2,billing=2,gres/gpu=8", "", 2, 4},
		{"cpu=1,node=1", "gres:gpu:1", 1, 1},
		{"", "gres/gpu:3", 1, 3},
		{"", "gres:gpu:a100:2", 1, 2},
		{"", "gres:gpu", 1, 1},
		{"", "gres:mps:100", 1, 0},
		{"", "gres:gpu:x", 1, 0},
		{"gres/gpu=zz", "", 1, 0},
		{"", "", 1, 0},
	} {
		j := &jobInfo{TresAlloc: c.alloc, TresPerNode: c.per, on: make([]string, c.nodes)}
		if got := gpusOf(j); got != c.want {
			t.Errorf("%q / %q on %d nodes: %d GPUs, want %d", c.alloc, c.per, c.nodes, got, c.want)
		}
	}
}
