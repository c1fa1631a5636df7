package forecast

import (
	"slices"
	"time"
)

// Weeks of history a forecast reads, and the hours either side of an
// hour's same hour of the week it takes as its samples: 4 × 5 = 20, the
// fewest whose extremes make a 90% interval.
const (
	Weeks  = 4
	Spread = 2
	// MinSamples are the samples a 90% interval needs.
	MinSamples = 19
)

// Hour is the forecast of one hour: the lendable GPUs expected (the
// median of its samples) and a 90% interval [Low, High] (order
// statistics of the samples: a new hour like them falls inside with
// probability (n+1-2k)/(n+1) for the k-th from each end).
type Hour struct {
	Start     time.Time
	Expected  float64
	Low, High float64
	Samples   int
}

// Of forecasts hours hours from start (on the hour) from hist, the
// lendable GPUs of the hours from histStart (Lendable). An hour's
// samples are the hours of hist Weeks weeks back, and Spread either side
// of each, that hist holds.
func Of(hist []float64, histStart, start time.Time, hours int) []Hour {
	out := make([]Hour, 0, max(hours, 0))
	var samples []float64
	for h := range max(hours, 0) {
		t := start.Add(time.Duration(h) * time.Hour)
		samples = samples[:0]
		for w := 1; w <= Weeks; w++ {
			for d := -Spread; d <= Spread; d++ {
				at := t.Add(-time.Duration(w)*7*24*time.Hour + time.Duration(d)*time.Hour)
				if i := int(at.Sub(histStart) / time.Hour); !at.Before(histStart) && i < len(hist) {
					samples = append(samples, hist[i])
				}
			}
		}
		out = append(out, summarise(t, samples))
	}
	return out
}

// summarise is the hour at t from its samples.
func summarise(t time.Time, samples []float64) Hour {
	h := Hour{Start: t, Samples: len(samples)}
	n := len(samples)
	if n == 0 {
		return h
	}
	slices.Sort(samples)
	h.Expected = samples[n/2]
	if n%2 == 0 {
		h.Expected = (samples[n/2-1] + samples[n/2]) / 2
	}
	k := max(1, int(0.05*float64(n+1)))
	k = min(k, (n+1)/2)
	h.Low, h.High = samples[k-1], samples[n-k]
	return h
}

// Coverage is how often the forecast's intervals held: the fraction of
// hs whose actual lendable GPUs (actual[i] for hs[i]) lay in [Low, High].
func Coverage(hs []Hour, actual []float64) float64 {
	n, in := 0, 0
	for i, h := range hs {
		if i >= len(actual) || h.Samples == 0 {
			continue
		}
		n++
		if actual[i] >= h.Low-1e-9 && actual[i] <= h.High+1e-9 {
			in++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(in) / float64(n)
}
