package plan

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sparecap/sparecap/pkg/preempt"
)

// GPUsPerNode is a node's GPUs: a gang of G GPUs needs G/8 nodes at once.
const GPUsPerNode = 8

// Job is what a tenant wants to run.
type Job struct {
	// GPUHours of work (at full speed, nothing lost).
	GPUHours float64
	// GPUs the job runs on at once (a gang: every node must be up), a
	// multiple of 8.
	GPUs int
	// CheckpointCost is how long one checkpoint takes; RestartCost how
	// long the job needs after an interruption (new nodes, loading the
	// checkpoint) before it progresses again.
	CheckpointCost, RestartCost time.Duration
	// CheckpointAtNotice: the job checkpoints on its notice; with a
	// notice of Window it then loses nothing when the checkpoint fits.
	CheckpointAtNotice bool
	// Interval, if set, is the checkpoint interval to use; zero: Daly's.
	Interval time.Duration
	// Deadline, if set, is the time from now by which the job must end.
	Deadline time.Duration
}

// Market is where it would run.
type Market struct {
	// RatePercentPerHour is the preemption rate of one node (percent of
	// nodes an hour, as GET /v1/stats/preemptions measures it).
	RatePercentPerHour float64
	// OnDemand is the on-demand price per GPU-hour; Discount the
	// preemptible discount (0.5).
	OnDemand, Discount float64
	// Window is the drain window (the notice).
	Window time.Duration
}

// Limits of a plan's inputs.
const (
	MaxGPUHours = 10_000_000
	MaxGPUs     = 100_000
	MaxDuration = 366 * 24 * time.Hour
	// MaxRate bounds a preemption rate, percent of nodes an hour: ten
	// preemptions a node-hour. Spot traces reach past 100 (a node lasting
	// 40 minutes on average is 150 %/h).
	MaxRate = 1000
	// RealRate bounds the rates pools really have, in the same unit: at
	// 100 %/h a node lasts an hour on average, where sparecap's pools
	// measure a few (the seed's 0.8 to 4.1) and the spot traces the
	// planner was tried on 17 to 25. A break-even rate past it (and past
	// the rate planned with) is no rate to watch for: preemptible always
	// pays.
	RealRate = 100
)

// Check validates a job and a market.
func Check(j Job, m Market) error {
	switch {
	case !(j.GPUHours > 0 && j.GPUHours <= MaxGPUHours):
		return fmt.Errorf("gpu_hours must be above 0 and at most %d; got %g", MaxGPUHours, j.GPUHours)
	case j.GPUs < GPUsPerNode || j.GPUs > MaxGPUs || j.GPUs%GPUsPerNode != 0:
		return fmt.Errorf("gpus must be a multiple of %d between %d and %d; got %d", GPUsPerNode, GPUsPerNode, MaxGPUs, j.GPUs)
	case j.CheckpointCost < 0 || j.CheckpointCost > 24*time.Hour:
		return fmt.Errorf("checkpoint cost must be between 0 and 24h; got %s", j.CheckpointCost)
	case j.RestartCost < 0 || j.RestartCost > 24*time.Hour:
		return fmt.Errorf("restart cost must be between 0 and 24h; got %s", j.RestartCost)
	case j.Interval < 0 || j.Interval > MaxDuration:
		return fmt.Errorf("interval must be between 0 and %s; got %s", MaxDuration, j.Interval)
	case j.Deadline < 0 || j.Deadline > MaxDuration:
		return fmt.Errorf("deadline must be between 0 and %s from now; got %s", MaxDuration, j.Deadline)
	case !(m.RatePercentPerHour >= 0 && m.RatePercentPerHour <= MaxRate):
		return fmt.Errorf("preemption rate must be between 0 and %d %%/h; got %g", MaxRate, m.RatePercentPerHour)
	case !(m.OnDemand >= 0 && m.OnDemand < 1e6) || !(m.Discount >= 0 && m.Discount < 1):
		return errors.New("prices: on-demand must be at least 0 and the discount in [0, 1)")
	}
	return nil
}

// Expectation is the first-order answer for the job on preemptible nodes.
type Expectation struct {
	// JobMTBF is the mean time between interruptions of the whole gang.
	JobMTBF time.Duration
	// Interval is the checkpoint interval used (zero with a notice
	// checkpoint: none is needed).
	Interval time.Duration
	// Overhead is the extra time as a fraction of the work's time:
	// checkpoints, work redone, restarts.
	Overhead float64
	// Hours is the expected wall-clock time; StandardHours the time on
	// standard nodes (nothing lost).
	Hours, StandardHours float64
	// Cost on preemptible nodes and on standard ones.
	Cost, StandardCost float64
	// BreakEvenRatePercentPerHour is the node preemption rate at which
	// preemptible costs what standard does (+Inf: never).
	BreakEvenRatePercentPerHour float64
	// AlwaysPays: the break-even rate is past RealRate and the rate
	// planned with (or there is none).
	AlwaysPays bool
}

// Expect works the expectation out by formula.
func Expect(j Job, m Market) Expectation {
	e := Expectation{StandardHours: j.GPUHours / float64(j.GPUs)}
	e.StandardCost = j.GPUHours * m.OnDemand
	e.Overhead, e.Interval, e.JobMTBF = overhead(j, m, m.RatePercentPerHour)
	e.Hours = e.StandardHours * (1 + e.Overhead)
	e.Cost = e.Hours * float64(j.GPUs) * m.OnDemand * (1 - m.Discount)
	e.BreakEvenRatePercentPerHour = breakEven(j, m)
	e.AlwaysPays = e.BreakEvenRatePercentPerHour > max(RealRate, m.RatePercentPerHour)
	return e
}

// overhead is the job's overhead fraction at a node rate, with the
// interval it uses and the gang's MTBF.
func overhead(j Job, m Market, rate float64) (float64, time.Duration, time.Duration) {
	nodes := float64(j.GPUs / GPUsPerNode)
	mtbf := preempt.MTBF(rate * nodes)
	if mtbf == 0 {
		return 0, 0, 0
	}
	M := mtbf.Seconds()
	if notice(j, m) {
		// One checkpoint per interruption, then the restart.
		return (j.CheckpointCost.Seconds() + j.RestartCost.Seconds()) / M, 0, mtbf
	}
	tau := j.Interval
	if tau == 0 {
		tau = preempt.Daly(j.CheckpointCost, mtbf)
	}
	if tau <= 0 {
		// No checkpoint at all: every interruption starts the work over.
		// The expected time to finish T of work with restarts R at rate
		// 1/M is (M+R)(e^(T/M)-1).
		T := j.GPUHours / float64(j.GPUs) * 3600
		return (M+j.RestartCost.Seconds())*math.Expm1(T/M)/T - 1, 0, mtbf
	}
	e := preempt.Expect(tau, j.CheckpointCost, mtbf)
	return e.Overhead + j.RestartCost.Seconds()/M, tau, mtbf
}

// notice: a checkpoint on the notice saves the work.
func notice(j Job, m Market) bool {
	return j.CheckpointAtNotice && j.CheckpointCost <= m.Window
}

// breakEven finds the node rate at which preemptible costs what standard
// does: (1-discount)(1+overhead) = 1.
func breakEven(j Job, m Market) float64 {
	target := 1/(1-m.Discount) - 1
	f := func(rate float64) float64 { o, _, _ := overhead(j, m, rate); return o }
	lo, hi := 0.0, float64(MaxRate)
	if f(hi) < target {
		return math.Inf(1)
	}
	for range 60 {
		mid := (lo + hi) / 2
		if f(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
