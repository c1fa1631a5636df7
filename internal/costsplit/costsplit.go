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

import (
	"slices"

	"github.com/sparecap/sparecap/internal/domain"
)

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
	var s Scratch
	s.out = buf
	return s.GPUSeconds(gpus, from, to, claims)
}

// Scratch holds GPUSeconds' buffers from one call to the next: its
// result is good until the next call.
type Scratch struct{ out, cuts []int64 }

// GPUSeconds is the package's GPUSeconds, in s's buffers.
func (s *Scratch) GPUSeconds(gpus int, from, to int64, claims []Claim) (out []int64, idle int64) {
	out = slices.Grow(s.out[:0], len(claims))[:len(claims)]
	clear(out)
	s.out = out
	total := int64(gpus) * max(to-from, 0)
	if gpus <= 0 || from >= to {
		return out, total
	}
	cuts := append(s.cuts[:0], from, to)
	defer func() { s.cuts = cuts }()
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

// Work is one node's claims, added in any order, each with a key (what
// tells claims that start together apart) and a value of the caller's;
// Ordered puts them in the order they hold the node's GPUs: earliest
// start first, then key, so a split does not depend on the order the
// claims were read in.
type Work[T any] struct {
	items   []workItem[T]
	claims  []Claim
	values  []T
	ordered bool
}

type workItem[T any] struct {
	claim Claim
	key   string
	value T
}

// Add adds a claim.
func (w *Work[T]) Add(c Claim, key string, v T) {
	w.items, w.ordered = append(w.items, workItem[T]{c, key, v}), false
}

// Ordered returns the claims in order, and their values.
func (w *Work[T]) Ordered() ([]Claim, []T) {
	if !w.ordered {
		slices.SortFunc(w.items, func(a, b workItem[T]) int {
			switch {
			case a.claim.Start != b.claim.Start:
				return cmpInt(a.claim.Start, b.claim.Start)
			case a.key < b.key:
				return -1
			case a.key > b.key:
				return 1
			}
			return 0
		})
		w.claims, w.values = w.claims[:0], w.values[:0]
		for _, it := range w.items {
			w.claims, w.values = append(w.claims, it.claim), append(w.values, it.value)
		}
		w.ordered = true
	}
	return w.claims, w.values
}

func cmpInt(a, b int64) int {
	if a < b {
		return -1
	}
	return 1
}

// ClaimOf is a work span's hold on its node: at least a second long once
// it ended (a span seen for less than a pass still held the node).
func ClaimOf(w *domain.WorkSpan) Claim {
	c := Claim{GPUs: w.GPUs, Start: w.Start.Unix()}
	if !w.End.IsZero() {
		c.End = max(w.End.Unix(), c.Start+1)
	}
	return c
}
