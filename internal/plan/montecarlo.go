package plan

import (
	"github.com/sparecap/sparecap/internal/apiv1"
	"math"
	"math/rand/v2"
	"slices"
)

// Process is the preemptible capacity a job meets: when its gang is
// interrupted next, and when capacity for it is back. Times are seconds
// from the job's start.
type Process interface {
	// NextStop is the first interruption after t while the job runs
	// (+Inf: none).
	NextStop(t float64) float64
	// NextUp is when capacity for the gang is there, at or after t.
	NextUp(t float64) float64
}

// poisson interrupts the gang at rate per second; capacity is back at
// once (the restart cost covers getting new nodes).
type poisson struct {
	rate float64
	rnd  *rand.Rand
}

func (p *poisson) NextStop(t float64) float64 {
	if p.rate <= 0 {
		return math.Inf(1)
	}
	return t + p.rnd.ExpFloat64()/p.rate
}

func (p *poisson) NextUp(t float64) float64 { return t }

// Strategy is how a job uses the two classes.
type Strategy string

const (
	// PreemptibleOnly never moves to standard nodes.
	PreemptibleOnly Strategy = "preemptible_only"
	// Slack runs on preemptible nodes and moves to standard ones at the
	// last checkpoint or interruption after which one more interruption
	// would make the deadline unreachable on standard nodes: the plan.
	Slack Strategy = "slack"
	// Greedy moves only when a successful next segment would leave too
	// little time: preemptible until it is too late (a baseline).
	Greedy Strategy = "greedy"
)

// Outcome is a strategy's result over the Monte Carlo runs: the API's
// answer (apiv1.PlanOutcome). A percentile that falls on a run that did
// not finish (its capacity never came back, or interruptions kept it from
// finishing in a hundred times its work's time) is -1, and the
// expectations leave such runs out.
type Outcome = apiv1.PlanOutcome

// job is one run's constants, in seconds.
type job struct {
	work, tau, ckpt, restart, deadline float64
	notice                             bool
	gpus                               float64
	pre, std                           float64 // price per GPU-second
}

func newJob(j Job, m Market) job {
	_, tau, _ := overhead(j, m, m.RatePercentPerHour)
	x := job{work: j.GPUHours / float64(j.GPUs) * 3600, tau: math.Inf(1), ckpt: j.CheckpointCost.Seconds(),
		restart: j.RestartCost.Seconds(), deadline: math.Inf(1), notice: notice(j, m), gpus: float64(j.GPUs),
		pre: m.OnDemand * (1 - m.Discount) / 3600, std: m.OnDemand / 3600}
	if tau > 0 && !x.notice {
		x.tau = tau.Seconds()
	} else if j.Interval > 0 && !x.notice {
		x.tau = j.Interval.Seconds()
	}
	if j.Deadline > 0 {
		x.deadline = j.Deadline.Seconds()
	}
	return x
}

// run is one run of the job under a strategy: its wall time, cost and
// whether it moved.
func (x job) run(p Process, s Strategy) (hours, cost float64, moved bool) {
	t, done := 0.0, 0.0
	var onPre, onStd float64
	move := func() {
		onStd += x.restart + (x.work - done)
		t += x.restart + (x.work - done)
		done, moved = x.work, true
	}
	for done < x.work {
		if t > x.giveUp() {
			return math.Inf(1), x.gpus * onPre * x.pre, false
		}
		up := p.NextUp(t)
		if math.IsInf(up, 1) && !x.shouldMove(s, t, up-t, done) {
			return math.Inf(1), x.gpus * onPre * x.pre, false // capacity never comes back
		}
		if x.shouldMove(s, t, up-t, done) {
			move()
			break
		}
		t = up
		stop := p.NextStop(t)
		for done < x.work {
			w := math.Min(x.tau, x.work-done)
			need := w
			if done+w < x.work {
				need += x.ckpt
			}
			if t+need > stop {
				ran := stop - t
				onPre += ran
				t = stop
				if x.notice {
					// The notice's checkpoint saves the work; the next
					// nodes can load it once it is written.
					done += math.Min(ran, w)
					t += x.ckpt
				}
				// The restart happens on the next nodes, once they are up.
				next := p.NextUp(t)
				if x.shouldMove(s, t, next-t, done) {
					move()
					break
				}
				if math.IsInf(next, 1) {
					return math.Inf(1), x.gpus * onPre * x.pre, false
				}
				t = next + x.restart
				onPre += x.restart
				stop = p.NextStop(t)
				if t > x.giveUp() {
					return math.Inf(1), x.gpus * onPre * x.pre, false
				}
				continue
			}
			t += need
			onPre += need
			done += w
			if done < x.work && x.shouldMove(s, t, 0, done) {
				move()
				break
			}
		}
	}
	cost = x.gpus * (onPre*x.pre + onStd*x.std)
	return t / 3600, cost, moved
}

// giveUp is when a run that has not finished never will, as far as a
// plan cares: a hundred times the work's time, at most MaxDuration.
func (x job) giveUp() float64 { return math.Min(100*x.work, MaxDuration.Seconds()) }

// shouldMove: at time t, with wait seconds before preemptible capacity is
// back and done work saved, the strategy moves to standard nodes.
func (x job) shouldMove(s Strategy, t, wait, done float64) bool {
	if math.IsInf(x.deadline, 1) || s == PreemptibleOnly {
		return false
	}
	rem := x.work - done
	seg := math.Min(x.tau, rem)
	if seg < rem {
		seg += x.ckpt
	}
	switch s {
	case Slack:
		// Worst case of the next segment: interrupted at its end, all of
		// it lost (nothing, with a notice checkpoint), then the restart.
		loss := seg
		if x.notice {
			loss = 0
		}
		return t+wait+loss+x.restart+x.restart+rem > x.deadline
	case Greedy:
		return t+wait+seg+x.restart+(rem-math.Min(x.tau, rem)) > x.deadline
	}
	return false
}

// simulate runs the job n times under a strategy against the processes
// next(i) makes.
func simulate(x job, s Strategy, n int, next func(i int) Process) Outcome {
	o := Outcome{Strategy: string(s)}
	hours := make([]float64, n)
	met, moved, finished := 0, 0, 0
	var cost, sum float64
	for i := range n {
		h, c, mv := x.run(next(i), s)
		hours[i] = h
		if !math.IsInf(h, 1) {
			finished++
			cost += c
			sum += h
		}
		if h*3600 <= x.deadline+1e-6 {
			met++
		}
		if mv {
			moved++
		}
	}
	slices.Sort(hours)
	// Nearest rank, and the chance rounded down: the q-th percentile is
	// within the deadline exactly when q% of runs meet it.
	pct := func(q int) float64 {
		h := hours[(n*q+99)/100-1]
		switch {
		case math.IsInf(h, 1):
			return -1
		case h*3600 > x.deadline+1e-6:
			// A run that missed reads past the deadline, rounded or not.
			return max(round3(h), round3(x.deadline/3600)+0.001)
		}
		return round3(h)
	}
	o.P10Hours, o.P50Hours, o.P90Hours = pct(10), pct(50), pct(90)
	if finished > 0 {
		o.ExpectedCost, o.ExpectedHours = round3(cost/float64(finished)), round3(sum/float64(finished))
	}
	o.MeetProbability = share(met, n)
	o.MovedShare = round3(float64(moved) / float64(n))
	o.UnfinishedShare = round3(float64(n-finished) / float64(n))
	return o
}

// PoissonRuns makes the processes of runs at the market's rate, seeded:
// run i's draws are the same whoever asks, so strategies and intervals
// are compared on the same draws.
func PoissonRuns(j Job, m Market, seed uint64) func(i int) Process {
	rate := m.RatePercentPerHour / 100 * float64(j.GPUs/GPUsPerNode) / 3600
	return func(i int) Process {
		return &poisson{rate: rate, rnd: rand.New(rand.NewPCG(seed, seed^0x91a7+uint64(i)))}
	}
}

// share is met of n, rounded down to three decimals: 1 only when all
// met.
func share(met, n int) float64 { return float64(met*1000/n) / 1000 }

// round3 keeps three decimals.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
