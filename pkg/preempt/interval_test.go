package preempt

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func near(t *testing.T, what string, got time.Duration, wantSeconds float64) {
	t.Helper()
	if math.Abs(got.Seconds()-wantSeconds) > 0.01 {
		t.Errorf("%s = %.3fs, want %.3fs", what, got.Seconds(), wantSeconds)
	}
}

// TestYoungDaly against values worked out by hand (python3: math.sqrt).
func TestYoungDaly(t *testing.T) {
	m := MTBF(2.3) // an A100 spot rate: 43.48 h between preemptions
	near(t, "MTBF(2.3 %/h)", m, 156521.739)
	near(t, "Young(90s, M)", Young(90*time.Second, m), 5307.910)
	near(t, "Daly(90s, M)", Daly(90*time.Second, m), 5248.080)
	near(t, "Interval(2.3, 90s)", Interval(2.3, 90*time.Second), 5248.080)
	m = MTBF(4.1)
	near(t, "Young(10m, M)", Young(10*time.Minute, m), 10264.787)
	near(t, "Daly(10m, M)", Daly(10*time.Minute, m), 9868.684)
	// A checkpoint costing twice the MTBF or more: checkpoint every M.
	near(t, "Daly(3h, 1h)", Daly(3*time.Hour, time.Hour), 3600)
	for _, tc := range []struct{ cost, mtbf time.Duration }{{0, time.Hour}, {time.Minute, 0}, {-1, -1}} {
		if Young(tc.cost, tc.mtbf) != 0 || Daly(tc.cost, tc.mtbf) != 0 {
			t.Errorf("Young/Daly(%v, %v) not 0", tc.cost, tc.mtbf)
		}
	}
	if Interval(0, time.Minute) != 0 || MTBF(-1) != 0 {
		t.Error("a rate of 0 has an interval")
	}
	e := Expect(time.Hour, 90*time.Second, 10*time.Hour)
	if math.Abs(e.Overhead-(90.0/3600+1845.0/36000)) > 1e-9 || e.LostPerPreemption != 1845*time.Second {
		t.Errorf("Expect = %+v", e)
	}
}

// simulate runs a job of work hours that checkpoints every interval(…)
// of work (each checkpoint costing cost), preempted at random with rate
// lambda an hour, each preemption losing the work since the last
// checkpoint and restart of restart. It returns the wall time over the
// work, minus one: the overhead.
func simulate(rnd *rand.Rand, work float64, lambda float64, cost, restart float64, interval func() float64) float64 {
	wall, done := 0.0, 0.0
	next := rnd.ExpFloat64() / lambda // hours to the next preemption
	for done < work {
		tau := math.Min(interval(), work-done)
		seg := tau + cost // work then the checkpoint
		if next >= seg {
			wall += seg
			next -= seg
			done += tau
			continue
		}
		wall += next + restart // lost: the segment so far
		next = rnd.ExpFloat64() / lambda
	}
	return wall/work - 1
}

// TestAdaptiveIntervalNearBest: at the public spot rates (0.8, 2.3 and
// 4.1 %/h), the interval Daly's formula gives from a measured rate (the
// fleet's, over 2,000 node-hours, as GET /v1/stats/preemptions reports it)
// costs within 10% of the best fixed interval found by trying 80 of them
// on the same preemptions (seeded).
func TestAdaptiveIntervalNearBest(t *testing.T) {
	const (
		work    = 500.0        // hours of training
		cost    = 90.0 / 3600  // a 10B model's checkpoint: 90 s
		restart = 120.0 / 3600 // rescheduled and reloaded
		runs    = 40           // jobs, each with its own preemptions
		seen    = 2000.0       // node-hours behind the measured rate
	)
	for _, pct := range []float64{0.8, 2.3, 4.1} {
		lambda := pct / 100
		mean := func(interval func(rnd *rand.Rand) func() float64) float64 {
			total := 0.0
			for run := range runs {
				rnd := rand.New(rand.NewPCG(uint64(run), 42)) // the same preemptions for every interval
				total += simulate(rnd, work, lambda, cost, restart, interval(rnd))
			}
			return total / runs
		}
		best, bestTau := math.Inf(1), 0.0
		for i := range 80 {
			tau := 0.1 * math.Pow(200, float64(i)/79) // 6 min to 20 h
			if o := mean(func(*rand.Rand) func() float64 { return func() float64 { return tau } }); o < best {
				best, bestTau = o, tau
			}
		}
		adaptive := mean(func(rnd *rand.Rand) func() float64 {
			// The measured rate: preemptions counted over the fleet's
			// node-hours (Poisson), drawn per job.
			count := poisson(rand.New(rand.NewPCG(rnd.Uint64(), 7)), lambda*seen)
			rate := math.Max(count, 1) / seen * 100
			tau := Interval(rate, time.Duration(cost*float64(time.Hour))).Hours()
			return func() float64 { return tau }
		})
		t.Logf("%.1f %%/h: best fixed interval %.2f h, overhead %.3f%%; Daly from the measured rate: %.3f%% (%.1f%% over the best)",
			pct, bestTau, 100*best, 100*adaptive, 100*(adaptive/best-1))
		if adaptive > best*1.10 {
			t.Errorf("%.1f %%/h: the adaptive interval's overhead %.4f is more than 10%% over the best fixed one's %.4f", pct, adaptive, best)
		}
	}
}

func poisson(rnd *rand.Rand, mean float64) float64 {
	// Normal approximation: the means here are 16 and more.
	return math.Max(0, math.Round(mean+rnd.NormFloat64()*math.Sqrt(mean)))
}
