package costsplit

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestSplitByGPUsAndTime(t *testing.T) {
	// An 8-GPU node over [0, 100): a 4-GPU pod the whole time, a 2-GPU pod
	// over [50, 150), a pod of unknown size over [0, 10) that takes what
	// is left (4), one before and one after the period.
	claims := []Claim{{GPUs: 4, Start: -10}, {GPUs: 2, Start: 50, End: 150}, {Start: 0, End: 10},
		{GPUs: 8, Start: -50, End: -1}, {GPUs: 8, Start: 100}}
	got, idle := GPUSeconds(8, 0, 100, claims, nil)
	want := []int64{400, 100, 40, 0, 0}
	if !slices.Equal(got, want) || idle != 800-540 {
		t.Fatalf("got %v idle %d, want %v idle %d", got, idle, want, 800-540)
	}
	// Over-claimed: the first claims take the node, the later get the rest.
	got, idle = GPUSeconds(8, 0, 10, []Claim{{GPUs: 6}, {GPUs: 6}, {GPUs: 6}}, got)
	if !slices.Equal(got, []int64{60, 20, 0}) || idle != 0 {
		t.Fatalf("over-claimed: %v idle %d", got, idle)
	}
	if got, idle := GPUSeconds(8, 5, 5, []Claim{{GPUs: 1}}, nil); got[0] != 0 || idle != 0 {
		t.Fatalf("empty period: %v %d", got, idle)
	}
}

// The parts and the idle rest always add up to the node's GPU-seconds; no
// claim gets more than it asks for over its own overlap, nor a negative.
func TestSplitAddsUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := rapid.IntRange(1, 16).Draw(t, "gpus")
		from := rapid.Int64Range(0, 1000).Draw(t, "from")
		to := from + rapid.Int64Range(0, 1000).Draw(t, "len")
		n := rapid.IntRange(0, 12).Draw(t, "n")
		claims := make([]Claim, n)
		for i := range claims {
			s := rapid.Int64Range(-200, 2200).Draw(t, "start")
			c := Claim{GPUs: rapid.IntRange(0, 20).Draw(t, "g"), Start: s}
			if rapid.Bool().Draw(t, "ended") {
				c.End = s + rapid.Int64Range(1, 1500).Draw(t, "dur")
			}
			claims[i] = c
		}
		got, idle := GPUSeconds(gpus, from, to, claims, nil)
		sum := idle
		for i, g := range got {
			c := claims[i]
			ov := max(min(end(c), to)-max(c.Start, from), 0)
			ask := int64(c.GPUs)
			if ask <= 0 || ask > int64(gpus) {
				ask = int64(gpus)
			}
			if g < 0 || g > ask*ov {
				t.Fatalf("claim %d %+v got %d of at most %d", i, c, g, ask*ov)
			}
			sum += g
		}
		if idle < 0 || sum != int64(gpus)*(to-from) {
			t.Fatalf("parts %v idle %d add to %d, want %d", got, idle, sum, int64(gpus)*(to-from))
		}
	})
}
