package preempt

import (
	"math"
	"time"
)

// Young is Young's optimal checkpoint interval, √(2·δ·M), for a
// checkpoint cost δ and a mean time between preemptions M.
func Young(cost, mtbf time.Duration) time.Duration {
	if cost <= 0 || mtbf <= 0 {
		return 0
	}
	return time.Duration(math.Sqrt(2*cost.Seconds()*mtbf.Seconds()) * float64(time.Second))
}

// Daly is Daly's refinement of Young's interval:
// √(2δM)·[1 + ⅓·√(δ/2M) + ⅑·(δ/2M)] − δ for δ < 2M, else M.
func Daly(cost, mtbf time.Duration) time.Duration {
	if cost <= 0 || mtbf <= 0 {
		return 0
	}
	d, m := cost.Seconds(), mtbf.Seconds()
	if d >= 2*m {
		return mtbf
	}
	x := d / (2 * m)
	tau := math.Sqrt(2*d*m)*(1+math.Sqrt(x)/3+x/9) - d
	return time.Duration(tau * float64(time.Second))
}

// MTBF is the mean time between preemptions at a rate of ratePerHour
// percent of nodes an hour (the unit of GET /v1/stats/preemptions and of
// the public spot figures: 0.8, 2.3, 4.1 %/h); 0 when the rate is not
// positive (never preempted).
func MTBF(ratePerHour float64) time.Duration {
	if ratePerHour <= 0 {
		return 0
	}
	return time.Duration(100 / ratePerHour * float64(time.Hour))
}

// Interval is the checkpoint interval Daly's formula gives for a
// preemption rate (percent an hour) and a checkpoint cost. With no
// preemptions (rate 0) or no cost known, it is 0: the caller picks its own.
func Interval(ratePerHour float64, cost time.Duration) time.Duration {
	return Daly(cost, MTBF(ratePerHour))
}

// Expected is what an interval costs at a preemption rate, to first
// order: Overhead is the fraction of time spent checkpointing (δ/τ) and
// redoing work lost to preemptions ((τ+δ)/2 per preemption, one every M);
// LostPerPreemption is the work a preemption loses when no checkpoint is
// taken on its notice ((τ+δ)/2). A notice checkpoint that completes
// before the deadline loses nothing.
type Expected struct {
	Overhead          float64
	LostPerPreemption time.Duration
}

// Expect works out Expected for an interval, a cost and an MTBF.
func Expect(interval, cost, mtbf time.Duration) Expected {
	if interval <= 0 {
		return Expected{}
	}
	lost := (interval + cost) / 2
	e := Expected{LostPerPreemption: lost, Overhead: cost.Seconds() / interval.Seconds()}
	if mtbf > 0 {
		e.Overhead += lost.Seconds() / mtbf.Seconds()
	}
	return e
}
