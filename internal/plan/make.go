package plan

import (
	"fmt"
	"math"
)

// Result is a plan: the expectation by formula, the spread on
// preemptible nodes by Monte Carlo, and with a deadline the plan that
// meets it beside two baselines.
type Result struct {
	Expectation Expectation `json:"-"`
	// Runs of the Monte Carlo.
	Runs int `json:"runs"`
	// Preemptible is the job on preemptible nodes only.
	Preemptible Outcome `json:"preemptible"`
	// Deadline, with a deadline: the plan (Slack), the greedy baseline
	// and standard nodes only.
	Deadline *DeadlinePlan `json:"deadline,omitempty"`
	// Advice is the answer in a sentence.
	Advice string `json:"advice"`
}

// DeadlinePlan compares ways to meet a deadline.
type DeadlinePlan struct {
	Hours  float64 `json:"deadline_hours"`
	Plan   Outcome `json:"plan"`
	Greedy Outcome `json:"greedy"`
	// Standard: standard nodes from the start.
	StandardHours float64 `json:"standard_hours"`
	StandardCost  float64 `json:"standard_cost"`
	StandardMeets bool    `json:"standard_meets"`
}

// DefaultRuns is how many Monte Carlo runs a plan makes.
const DefaultRuns = 2000

// Make plans job j in market m with runs Monte Carlo runs against the
// processes procs makes (PoissonRuns, TraceRuns).
func Make(j Job, m Market, runs int, procs func(i int) Process) Result {
	if runs <= 0 {
		runs = DefaultRuns
	}
	e := Expect(j, m)
	x := newJob(j, m)
	r := Result{Expectation: e, Runs: runs}
	free := x
	free.deadline = math.Inf(1)
	r.Preemptible = simulate(free, PreemptibleOnly, runs, procs)
	if j.Deadline > 0 {
		d := &DeadlinePlan{Hours: round3(j.Deadline.Hours()), StandardHours: round3(e.StandardHours), StandardCost: round3(e.StandardCost),
			StandardMeets: e.StandardHours <= j.Deadline.Hours()}
		d.Plan = simulate(x, Slack, runs, procs)
		d.Greedy = simulate(x, Greedy, runs, procs)
		r.Deadline = d
	}
	r.Advice = advice(r)
	return r
}

// advice sums a plan up.
func advice(r Result) string {
	e := r.Expectation
	saved := func(cost float64) float64 { return 100 * (1 - cost/e.StandardCost) }
	if d := r.Deadline; d != nil {
		switch {
		case !d.StandardMeets && d.Plan.MeetProbability == 0:
			return fmt.Sprintf("The deadline of %gh cannot be met: the work alone takes %gh on standard nodes.", d.Hours, round3(e.StandardHours))
		case d.Plan.ExpectedCost < d.StandardCost && d.Plan.MeetProbability >= 0.99:
			return fmt.Sprintf("Run on preemptible nodes and move to standard nodes when the slack runs out: the deadline is met in %.1f%% of runs, "+
				"at %.2f expected (%.0f%% less than standard nodes only); %.0f%% of runs move.",
				100*d.Plan.MeetProbability, d.Plan.ExpectedCost, saved(d.Plan.ExpectedCost), 100*d.Plan.MovedShare)
		default:
			return fmt.Sprintf("Use standard nodes: with the slack this deadline leaves, moving late costs %.2f expected against %.2f and meets it in %.1f%% of runs.",
				d.Plan.ExpectedCost, d.StandardCost, 100*d.Plan.MeetProbability)
		}
	}
	p := r.Preemptible
	if p.ExpectedCost < e.StandardCost {
		return fmt.Sprintf("Preemptible pays: %.2f expected against %.2f on standard nodes (%.0f%% less), taking %.1f%% longer (p90 %gh against %gh).",
			p.ExpectedCost, e.StandardCost, saved(p.ExpectedCost), 100*(p.ExpectedHours/e.StandardHours-1), p.P90Hours, round3(e.StandardHours))
	}
	return fmt.Sprintf("Preemptible does not pay at this rate: %.2f expected against %.2f on standard nodes.", p.ExpectedCost, e.StandardCost)
}
