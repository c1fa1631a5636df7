// Package costsplit splits a node's GPU-seconds among the work that ran
// on it, by GPUs held and time, the rest being idle: what cost allocation
// prices (OpenCost's split of a node among its pods by request, for GPUs).
//
// The split is in whole GPU-seconds and never gives more than the node
// has: at each instant the work holds the node's GPUs in the order given
// (earliest start first), each up to what it asks, so work that claims
// more than is left (a misreporting driver, work of unknown size) gets
// what is left. Amounts follow exactly from GPU-seconds (billing.Line's
// Part), so the parts and the idle rest add up to the node's total to the
// last unit.
package costsplit

import "slices"

// Claim is a unit of work's hold on a node: GPUs (0: all of them) over
// [Start, End) in Unix seconds; End 0 is open (still running).
type Claim struct {
	GPUs       int
	Start, End int64
}

// GPUSeconds splits [from, to) of a node of gpus GPUs among claims, in
// their order: out[i] is claims[i]'s GPU-seconds; idle is the rest.
// Claims outside [from, to) get 0. buf, if long enough, is reused for
// out.
func GPUSeconds(gpus int, from, to int64, claims []Claim, buf []int64) (out []int64, idle int64) {
	out = slices.Grow(buf[:0], len(claims))[:len(claims)]
	clear(out)
	total := int64(gpus) * max(to-from, 0)
	if gpus <= 0 || from >= to {
		return out, total
	}
	cuts := []int64{from, to}
	for _, c := range claims {
		s, e := c.Start, end(c)
		if s > from && s < to {
			cuts = append(cuts, s)
		}
		if e > from && e < to {
			cuts = append(cuts, e)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var used int64
	for i := 0; i+1 < len(cuts); i++ {
		s, e := cuts[i], cuts[i+1]
		free := gpus
		for j, c := range claims {
			if free == 0 {
				break
			}
			if c.Start > s || end(c) <= s {
				continue
			}
			g := c.GPUs
			if g <= 0 || g > free {
				g = free
			}
			free -= g
			out[j] += int64(g) * (e - s)
			used += int64(g) * (e - s)
		}
	}
	return out, total - used
}

// end is c's end, open as far as any time goes.
func end(c Claim) int64 {
	if c.End == 0 {
		return 1<<63 - 1
	}
	return c.End
}
