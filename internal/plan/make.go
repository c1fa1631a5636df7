package plan

import (
	"fmt"
	"math"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// Result is a plan: the expectation by formula, the spread on
// preemptible nodes by Monte Carlo, and with a deadline the plan that
// meets it beside two baselines.
type Result struct {
	Expectation Expectation `json:"-"`
	// IntervalBasis says how the interval was chosen (IntervalDaly,
	// IntervalAsked, IntervalDeadline; empty: none is needed), and
	// DalyInterval is Daly's, for comparison.
	IntervalBasis string        `json:"interval_basis,omitempty"`
	DalyInterval  time.Duration `json:"-"`
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
	_, daly, _ := overhead(j, m, m.RatePercentPerHour)
	r := Result{DalyInterval: daly}
	switch tau, ok := deadlineInterval(j, m, runs, procs); {
	case ok:
		// A shorter interval takes more steps: the runs stay in budget.
		j.Interval, r.IntervalBasis = tau, IntervalDeadline
		if n, err := Runs(j, m); err == nil {
			runs = min(runs, n)
		}
	case j.Interval > 0 && !notice(j, m):
		r.IntervalBasis = IntervalAsked
	case daly > 0:
		r.IntervalBasis = IntervalDaly
	}
	e := Expect(j, m)
	x := newJob(j, m)
	r.Expectation, r.Runs = e, runs
	// With a deadline, the job on preemptible nodes only is measured
	// against it too (it never moves): its chance agrees with its spread.
	r.Preemptible = simulate(x, PreemptibleOnly, runs, procs)
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
			return fmt.Sprintf("The deadline of %.1fh cannot be met: the work alone takes %.1fh on standard nodes.", d.Hours, e.StandardHours)
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
		return fmt.Sprintf("Preemptible pays: %.2f expected against %.2f on standard nodes (%.0f%% less), taking %.1f%% longer (p90 %.1fh against %.1fh).",
			p.ExpectedCost, e.StandardCost, saved(p.ExpectedCost), 100*(p.ExpectedHours/e.StandardHours-1), p.P90Hours, e.StandardHours)
	}
	return fmt.Sprintf("Preemptible does not pay at this rate: %.2f expected against %.2f on standard nodes.", p.ExpectedCost, e.StandardCost)
}

// Budget bounds a plan's work: the Monte Carlo's runs times the steps of
// one run (checkpoint segments and interruptions), for each strategy (a
// deadline runs three). A server answers a plan within about a quarter
// of a second of CPU whatever it is asked.
const (
	budgetSteps = 5_000_000
	maxSteps    = 100_000
	minRuns     = 50
)

// Runs is how many Monte Carlo runs the job gets within the budget; an
// error when one run alone would take more than maxSteps steps (an
// interval far too short for the job's length).
func Runs(j Job, m Market) (int, error) {
	_, tau, mtbf := overhead(j, m, m.RatePercentPerHour)
	steps := steps(j, tau, mtbf)
	if steps > maxSteps {
		return 0, fmt.Errorf("the job would checkpoint or be interrupted about %.0f times: more than %d; give it more GPUs or a longer interval", steps, maxSteps)
	}
	return int(math.Max(minRuns, math.Min(DefaultRuns, budgetSteps/steps))), nil
}

// Fill copies a plan into its API answer (the job and market fields are
// the caller's).
func (r Result) Fill(out *apiv1.Plan) {
	e := r.Expectation
	out.IntervalSeconds, out.JobMTBFSeconds = e.Interval.Seconds(), e.JobMTBF.Seconds()
	out.IntervalBasis, out.DalyIntervalSeconds = r.IntervalBasis, r.DalyInterval.Seconds()
	out.OverheadPercent = round3(100 * e.Overhead)
	out.ExpectedHours, out.ExpectedCost = round3(e.Hours), round3(e.Cost)
	out.StandardHours, out.StandardCost = round3(e.StandardHours), round3(e.StandardCost)
	if be := e.BreakEvenRatePercentPerHour; !math.IsInf(be, 1) {
		v := round3(be)
		out.BreakEvenRatePercentPerHour = &v
	}
	out.PreemptibleAlwaysPays = e.AlwaysPays
	out.Runs, out.Preemptible, out.Advice = r.Runs, r.Preemptible, r.Advice
	if d := r.Deadline; d != nil {
		out.Deadline = &apiv1.PlanDeadline{Hours: d.Hours, Plan: d.Plan, Greedy: d.Greedy,
			StandardHours: d.StandardHours, StandardCost: d.StandardCost, StandardMeets: d.StandardMeets}
	}
}
