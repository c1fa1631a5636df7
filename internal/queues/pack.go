package queues

import (
	"slices"
)

// Pack places pods (their GPUs each) on bins (the GPUs free on each node)
// first-fit, largest pod first, as a scheduler spreading nothing would:
// ok reports whether every pod found room, and free is what is left
// (a copy; bins is not changed). A pod that asks for no GPUs always fits.
// It is how the admission check decides whether capacity for a workload
// is there, and how a ProvisioningRequest's pods become nodes.
func Pack(bins []int64, pods []int64) (free []int64, ok bool) {
	free = slices.Clone(bins)
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b int64) int { return int(b - a) })
	for _, p := range sorted {
		if p <= 0 {
			continue
		}
		placed := false
		for i := range free {
			if free[i] >= p {
				free[i] -= p
				placed = true
				break
			}
		}
		if !placed {
			return free, false
		}
	}
	return free, true
}

// NodesFor is how many nodes of perNode GPUs the pods need, packed as
// Pack does; ok is false when a pod asks for more than one node has.
func NodesFor(pods []int64, perNode int64) (nodes int, ok bool) {
	var bins []int64
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b int64) int { return int(b - a) })
	for _, p := range sorted {
		if p <= 0 {
			continue
		}
		if p > perNode {
			return 0, false
		}
		placed := false
		for i := range bins {
			if bins[i] >= p {
				bins[i] -= p
				placed = true
				break
			}
		}
		if !placed {
			bins = append(bins, perNode-p)
		}
	}
	return len(bins), true
}
