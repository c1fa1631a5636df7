package plan

import (
	"math"
	"time"
)

// MeetTarget is the share of runs in which a plan must meet its deadline
// to be said to meet it.
const MeetTarget = 0.99

// How a plan's checkpoint interval was chosen (Result.IntervalBasis).
const (
	IntervalDaly     = "daly"     // Daly's, for the rate
	IntervalAsked    = "asked"    // the job's
	IntervalDeadline = "deadline" // the cheapest that meets the deadline
)

// The deadline's interval search: Daly's and shorter ones, each a factor
// of √2 below the last, down to an eighth of it, and no shorter than a
// minute or a checkpoint; each candidate needs minSearchRuns runs.
const (
	searchCandidates = 7
	minSearchRuns    = 25
)

// deadlineInterval is the checkpoint interval to meet j's deadline with:
// Daly's interval minimises the expected time, but a plan that moves to
// standard nodes keeps the worst loss of one segment in reserve, so a
// tight deadline moves early at Daly's and a shorter interval, keeping
// less in reserve, stays on preemptible nodes longer. It runs the plan
// at Daly's and shorter intervals on the same draws and takes the
// cheapest that meets the deadline in MeetTarget of runs (none does: the
// likeliest to). The search's steps are at most twice one strategy's at
// runs runs of Daly's. ok is false when there is nothing to choose: no
// deadline, an interval asked, a notice checkpoint, no checkpoint cost.
func deadlineInterval(j Job, m Market, runs int, procs func(i int) Process) (tau time.Duration, ok bool) {
	_, daly, mtbf := overhead(j, m, m.RatePercentPerHour)
	if j.Deadline == 0 || j.Interval > 0 || daly <= 0 || notice(j, m) {
		return 0, false
	}
	floor := max(j.CheckpointCost, time.Minute)
	budget := 2 * float64(runs) * steps(j, daly, mtbf)
	var taus []time.Duration
	var sum float64
	for k := range searchCandidates {
		c := daly
		if k > 0 {
			c = time.Duration(float64(daly) * math.Pow(2, -float64(k)/2)).Round(time.Second)
		}
		s := steps(j, c, mtbf)
		if (k > 0 && c < floor) || s > maxSteps || budget/(sum+s) < minSearchRuns {
			break // shorter ones take more steps still
		}
		taus, sum = append(taus, c), sum+s
	}
	if len(taus) < 2 {
		return daly, false
	}
	n := min(runs, int(budget/sum))
	// The search's runs spread over the caller's, as a trace's offsets do.
	spread := func(i int) Process { return procs(i * runs / n) }
	var best Outcome
	for i, c := range taus {
		jc := j
		jc.Interval = c
		o := simulate(newJob(jc, m), Slack, n, spread)
		if i == 0 || better(o, best) {
			tau, best = c, o
		}
	}
	return tau, tau != daly
}

// better: a meets the deadline in MeetTarget of runs and b does not; or
// both do and a costs less; or neither does and a meets it more often.
func better(a, b Outcome) bool {
	am, bm := a.MeetProbability >= MeetTarget, b.MeetProbability >= MeetTarget
	switch {
	case am != bm:
		return am
	case !am && a.MeetProbability != b.MeetProbability:
		return a.MeetProbability > b.MeetProbability
	}
	return a.ExpectedCost < b.ExpectedCost
}

// steps is about how many steps one run of j takes at interval tau:
// its checkpoint segments and its interruptions.
func steps(j Job, tau, mtbf time.Duration) float64 {
	work := j.GPUHours / float64(j.GPUs) * 3600
	s := 1.0
	if tau > 0 {
		s += work / tau.Seconds()
	}
	if mtbf > 0 {
		s += work / mtbf.Seconds()
	}
	return s
}
