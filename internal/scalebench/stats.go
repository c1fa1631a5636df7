package scalebench

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of ds,
// which need not be sorted: with N values sorted ascending it is the
// ⌈p·N/100⌉-th, always an observed value. 0 for no values.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// Latencies collects request latencies from concurrent clients.
type Latencies struct {
	mu  sync.Mutex
	ds  []time.Duration
	err int
}

// Add records one successful request.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
}

// Err counts one failed request.
func (l *Latencies) Err() {
	l.mu.Lock()
	l.err++
	l.mu.Unlock()
}

// Summary of a set of latencies.
type Summary struct {
	N        int
	Errors   int
	P50, P99 time.Duration
	Max      time.Duration
	Mean     time.Duration
}

// Summary sums up what was recorded.
func (l *Latencies) Summary() Summary {
	l.mu.Lock()
	s := slices.Clone(l.ds)
	errs := l.err
	l.mu.Unlock()
	out := Summary{N: len(s), Errors: errs}
	if len(s) == 0 {
		return out
	}
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	out.P50, out.P99, out.Max = percentileSorted(s, 50), percentileSorted(s, 99), s[len(s)-1]
	out.Mean = sum / time.Duration(len(s))
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
