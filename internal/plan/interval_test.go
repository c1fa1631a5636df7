package plan

import (
	"math"
	"testing"
	"time"
)

// TestDeadlineChoosesTheInterval: with a tight deadline the plan
// checkpoints more often than Daly's interval (a shorter segment risks
// less of the slack, so the job stays on preemptible nodes longer) and
// costs less than it would at Daly's, meeting the deadline as often; its
// expected cost and finish agree within 10% with an independent run of
// the job at the interval it chose (another seed, more runs), so the
// choice is no luck of its draws. With a loose deadline the cost is
// Daly's, within the Monte Carlo's noise.
func TestDeadlineChoosesTheInterval(t *testing.T) {
	for _, c := range []struct {
		rate, deadline float64
		save           float64 // the least share a tight deadline saves
	}{{0.8, 50, 0.15}, {0.8, 52, 0.05}, {4.1, 52, 0.01}, {4.1, 70, 0}} {
		j := Job{GPUHours: 384, GPUs: 8, CheckpointCost: 90 * time.Second, RestartCost: 12 * time.Minute,
			Deadline: time.Duration(c.deadline * float64(time.Hour))}
		m := h100
		m.RatePercentPerHour = c.rate
		r := Make(j, m, 2000, PoissonRuns(j, m, 1))
		daly := j
		_, daly.Interval, _ = overhead(j, m, m.RatePercentPerHour)
		atDaly := Make(daly, m, 2000, PoissonRuns(daly, m, 1))
		chosen := j
		chosen.Interval = r.Expectation.Interval
		again := Make(chosen, m, 4000, PoissonRuns(chosen, m, 99))
		p, d, a := r.Deadline.Plan, atDaly.Deadline.Plan, again.Deadline.Plan
		t.Logf("%.1f %%/h, deadline %gh: every %s (Daly's %s): %.2f expected, %.2fh, met %.3f; at Daly's %.2f, %.2fh, met %.3f (%+.0f%%); "+
			"rerun %.2f, %.2fh, met %.3f", c.rate, c.deadline, r.Expectation.Interval.Round(time.Second), daly.Interval.Round(time.Second),
			p.ExpectedCost, p.ExpectedHours, p.MeetProbability, d.ExpectedCost, d.ExpectedHours, d.MeetProbability, 100*(p.ExpectedCost/d.ExpectedCost-1),
			a.ExpectedCost, a.ExpectedHours, a.MeetProbability)
		if p.MeetProbability < min(d.MeetProbability, 0.99) {
			t.Errorf("met %g, at Daly's %g", p.MeetProbability, d.MeetProbability)
		}
		if c.save > 0 && (r.Expectation.Interval >= daly.Interval || p.ExpectedCost > (1-c.save)*d.ExpectedCost) {
			t.Errorf("a tight deadline: every %s at %.2f, Daly's %s at %.2f", r.Expectation.Interval, p.ExpectedCost, daly.Interval, d.ExpectedCost)
		}
		if c.save == 0 && p.ExpectedCost > 1.02*d.ExpectedCost {
			t.Errorf("a loose deadline: %.2f, Daly's %.2f", p.ExpectedCost, d.ExpectedCost)
		}
		if math.Abs(p.ExpectedCost/a.ExpectedCost-1) > 0.10 || math.Abs(p.ExpectedHours/a.ExpectedHours-1) > 0.10 || a.MeetProbability < 0.99 {
			t.Errorf("planned %.2f, %.2fh; rerun %.2f, %.2fh, met %g", p.ExpectedCost, p.ExpectedHours, a.ExpectedCost, a.ExpectedHours, a.MeetProbability)
		}
	}
}
