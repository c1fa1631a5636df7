package plan

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestOutcomesAgreeWithTheirDeadline: in a plan with a deadline, each
// outcome's chance of meeting it and its percentiles come from the same
// runs: the q-th percentile is within the deadline exactly when at least
// q% of runs meet it (the percentiles are nearest-rank, the chance is
// rounded down), for the job on preemptible nodes only as for the plan
// and greedy. A chance of 1 is every run meeting the deadline.
func TestOutcomesAgreeWithTheirDeadline(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		hours := rapid.Float64Range(1, 60).Draw(t, "hours")
		j := Job{GPUHours: 8 * hours, GPUs: 8 * rapid.IntRange(1, 4).Draw(t, "nodes"),
			CheckpointCost:     time.Duration(rapid.IntRange(0, 600).Draw(t, "ckpt_s")) * time.Second,
			RestartCost:        time.Duration(rapid.IntRange(0, 3600).Draw(t, "restart_s")) * time.Second,
			CheckpointAtNotice: rapid.Bool().Draw(t, "notice"),
			Deadline:           time.Duration(hours * rapid.Float64Range(0.9, 1.6).Draw(t, "slack") * float64(time.Hour))}
		j.GPUHours *= float64(j.GPUs / 8)
		m := h100
		m.RatePercentPerHour = rapid.Float64Range(0, 40).Draw(t, "rate")
		runs := rapid.IntRange(50, 400).Draw(t, "runs")
		r := Make(j, m, runs, PoissonRuns(j, m, rapid.Uint64().Draw(t, "seed")))
		d := r.Deadline
		for _, o := range []Outcome{r.Preemptible, d.Plan, d.Greedy} {
			for _, p := range []struct {
				q float64
				h float64
			}{{0.1, o.P10Hours}, {0.5, o.P50Hours}, {0.9, o.P90Hours}} {
				within := p.h >= 0 && p.h <= d.Hours
				if within != (o.MeetProbability >= p.q) {
					t.Fatalf("%s: p%.0f %gh against a deadline of %gh, yet met in %g of runs: %+v", o.Strategy, 100*p.q, p.h, d.Hours, o.MeetProbability, o)
				}
			}
		}
	})
}

// TestMeetProbabilityRoundsDown: a chance of meeting the deadline is
// never rounded up to one that more runs would have had to meet.
func TestMeetProbabilityRoundsDown(t *testing.T) {
	for _, c := range []struct {
		met, n int
		want   float64
	}{{1999, 2000, 0.999}, {2000, 2000, 1}, {1799, 2000, 0.899}, {1800, 2000, 0.9}, {44, 50, 0.88}, {0, 7, 0}} {
		if got := share(c.met, c.n); got != c.want {
			t.Errorf("%d of %d: %g, want %g", c.met, c.n, got, c.want)
		}
	}
}
