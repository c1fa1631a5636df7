package api

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/stats"
)

// TestPreemptionWeek: after a reclaim, the pool's hour of the week of the
// reclaim holds its two preemptions and every node-hour of the window is
// in some hour of the week; the default window is four weeks, which the
// short history says plainly; the forecast starts at the next hour.
func TestPreemptionWeek(t *testing.T) {
	e := newEnv(t)
	_, _, t1 := e.reclaim()
	e.settle()
	now := e.clk.Now()
	var w apiv1.WeekStats
	e.do("p", "GET", "/v1/stats/preemptions/week?region=us-central-2&gpu_type=RTX_6000_PCI&ahead=3", "", 200, &w)
	if !w.To.Equal(now) || !w.From.Equal(now.Add(-28*24*time.Hour)) {
		t.Fatalf("default window %v – %v, want the four weeks up to %v", w.From, w.To, now)
	}
	if w.EnoughHistory || !strings.Contains(w.Note, "days of history") || len(w.Hours) != 168 {
		t.Fatalf("a few minutes of history: enough %v, note %q, %d hours", w.EnoughHistory, w.Note, len(w.Hours))
	}
	var hours float64
	var n int
	for _, h := range w.Hours {
		hours += h.NodeHours
		n += h.Preemptions
	}
	all := row(t, e.stats("p", "from", w.From.Format(time.RFC3339Nano)), "us-central-2", "RTX_6000_PCI")
	if n != 2 || w.Hours[stats.HourOfWeek(t1)].Preemptions != 2 || math.Abs(hours-all.PreemptibleNodeHours) > 1e-9 {
		t.Fatalf("%d preemptions (%d at %s), %.6f node-hours; want 2 there and %.6f", n, w.Hours[stats.HourOfWeek(t1)].Preemptions, t1, hours, all.PreemptibleNodeHours)
	}
	if len(w.Forecast) != 3 || !w.Forecast[0].Start.After(now) || w.Forecast[0].Start.Sub(now) > time.Hour {
		t.Fatalf("forecast %+v from %s", w.Forecast, now)
	}
	for _, tc := range []struct{ query, field string }{
		{"", "region"},
		{"?region=us-central-2", "region"},
		{"?region=us-central-2&gpu_type=H100", "gpu_type"},
		{"?region=eu-west-1&gpu_type=RTX_6000_PCI", "gpu_type"},
		{"?region=us-central-2&gpu_type=RTX_6000_PCI&ahead=169", "ahead"},
		{"?region=us-central-2&gpu_type=RTX_6000_PCI&ahead=-1", "ahead"},
		{"?region=us-central-2&gpu_type=RTX_6000_PCI&from=yesterday", "from"},
	} {
		if got := e.apiErr("p", "GET", "/v1/stats/preemptions/week"+tc.query, "", 400); got.Field != tc.field {
			t.Errorf("%s: %+v, want field %s", tc.query, got, tc.field)
		}
	}
}

// TestCheckpointAdviceForARun: with the hours a run will take, the advice
// works from the pool's rate in those hours of the week once four weeks
// of history hold them (here: three nodes, two reclaimed at one hour), and
// says so; before that it keeps the rate of the whole window and says why.
func TestCheckpointAdviceForARun(t *testing.T) {
	e := newEnv(t)
	e.create("p", strings.Replace(createBody, `"num_preemptible_gpus":16`, `"num_preemptible_gpus":24`, 1))
	e.settle()
	path := func(extra ...string) string {
		return advicePath(append([]string{"region", "us-central-2", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "90"}, extra...)...)
	}
	var short apiv1.CheckpointAdvice
	e.do("p", "GET", path("run_hours", "8"), "", 200, &short)
	if short.RateBasis != "upper_bound" || !strings.Contains(short.Note, "too little history by hour of the week (only") {
		t.Fatalf("a fresh pool: %+v", short)
	}
	e.clk.Step(28 * 24 * time.Hour)
	at := e.clk.Now()
	e.create("admin", acmeBody) // reclaims both preemptible nodes
	e.settle()
	var run apiv1.CheckpointAdvice
	e.do("p", "GET", path("run_start", at.Add(7*24*time.Hour).Format(time.RFC3339), "run_hours", "1"), "", 200, &run)
	if run.RateBasis != "hour_of_week" || run.Preemptions != 2 || run.PreemptibleNodeHours < 8 ||
		!near(run.PreemptionRatePercentPerHour, 100*2/run.PreemptibleNodeHours) || !strings.Contains(run.Note, "by hour of the week") {
		t.Fatalf("a run in the hour the pool was reclaimed: %+v", run)
	}
	var quiet apiv1.CheckpointAdvice
	e.do("p", "GET", path("run_start", at.Add(7*24*time.Hour+3*time.Hour).Format(time.RFC3339), "run_hours", "2"), "", 200, &quiet)
	if quiet.RateBasis != "hour_of_week" || quiet.Preemptions != 0 || !strings.Contains(quiet.Note, "at most one is assumed") ||
		quiet.PreemptionRatePercentPerHour >= run.PreemptionRatePercentPerHour {
		t.Fatalf("a run in quiet hours: %+v", quiet)
	}
	for _, bad := range [][]string{{"run_hours", "0"}, {"run_hours", "169"}, {"run_start", "monday"}} {
		if got := e.apiErr("p", "GET", path(bad...), "", 400); got.Field != bad[0] {
			t.Errorf("%v: %+v", bad, got)
		}
	}
}

// TestPlanForARun: the planner takes the run's hours as the advice does:
// with too little history it says so and keeps the window's rate; a bad
// run_hours is refused.
func TestPlanForARun(t *testing.T) {
	e := newEnv(t)
	e.create("p", createBody)
	e.settle()
	var p apiv1.Plan
	e.do("p", "GET", withQuery("/v1/plan", "region", "us-central-2", "gpu_type", "RTX_6000_PCI", "gpu_hours", "64", "run_hours", "12"), "", 200, &p)
	if p.RateBasis != "upper_bound" || !strings.Contains(p.Note, "too little history by hour of the week") {
		t.Fatalf("plan for a run on a fresh pool: basis %q, note %q", p.RateBasis, p.Note)
	}
	if got := e.apiErr("p", "GET", withQuery("/v1/plan", "region", "us-central-2", "gpu_type", "RTX_6000_PCI", "gpu_hours", "64", "run_hours", "x"), "", 400); got.Field != "run_hours" {
		t.Fatalf("bad run_hours: %+v", got)
	}
}
