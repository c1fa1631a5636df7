// Package backoff is how sparecap waits before trying again, everywhere
// it retries: a node's step, a store transaction that met a conflict, a
// webhook delivery and an endpoint that keeps failing. One rule: the gap
// doubles from Policy.First up to Policy.Max and each gap is drawn at
// random within a band around it, so many retries that failed together
// (the nodes of a cluster whose API went away, writers that collided) do
// not come back in lockstep. The draw comes from a seeded random.Source
// and the times from the caller's clock, so a test or a simulation that
// fixes both sees the same waits again.
package backoff

import (
	"time"

	"github.com/sparecap/sparecap/internal/random"
)

// Policy is a doubling, jittered retry schedule.
type Policy struct {
	// First is the gap after the first failure, before jitter.
	First time.Duration
	// Max caps the gap, before jitter.
	Max time.Duration
	// Low and High bound the jitter in percent of the gap: the wait is
	// drawn uniformly from [gap·Low/100, gap·High/100]. Zero values: 100
	// and 100 (no jitter).
	Low, High int
}

// Gap is the wait after the fails-th failure in a row (fails ≥ 1; less
// counts as 1), drawn from r.
func (p Policy) Gap(fails int, r *random.Source) time.Duration {
	gap := p.First
	for i := 1; i < fails && gap < p.Max; i++ {
		gap *= 2
	}
	gap = min(gap, p.Max)
	low, high := p.Low, p.High
	if low == 0 && high == 0 {
		low, high = 100, 100
	}
	return gap*time.Duration(low)/100 + r.Duration(gap*time.Duration(high-low)/100)
}
