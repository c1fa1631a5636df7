package api

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/plan"
)

func planPath(params ...string) string { return withQuery("/v1/plan", params...) }

// TestJobPlan: a plan works from the rate the statistics measure (both
// preemptible nodes reclaimed after an hour), the price book's on-demand
// price and discount, and the controller's notice; it agrees with the
// planner given the same market; a deadline adds the plan and its
// baselines; an asked rate is a what-if; bad questions name the field.
func TestJobPlan(t *testing.T) {
	e := newEnv(t)
	where := []string{"region", "us-central-2", "gpu_type", "RTX_6000_PCI"}
	ask := func(params ...string) []string {
		return append(append([]string{}, where...), params...)
	}
	var none apiv1.Plan
	e.do("p", "GET", planPath(ask("gpu_hours", "800", "checkpoint_seconds", "90")...), "", 200, &none)
	if none.RateBasis != "none" || none.OverheadPercent != 0 || !strings.Contains(none.Note, "assumes no preemption") {
		t.Fatalf("no data: %+v", none)
	}
	e.create("p", createBody)
	e.settle()
	e.clk.Step(time.Hour)
	e.create("admin", acmeBody) // reclaims both preemptible nodes
	e.settle()
	st := row(t, e.stats("p", where...), "us-central-2", "RTX_6000_PCI")
	var p apiv1.Plan
	e.do("p", "GET", planPath(ask("gpu_hours", "800", "gpus", "8", "checkpoint_seconds", "90", "restart_seconds", "600")...), "", 200, &p)
	m := plan.Market{RatePercentPerHour: 100 * st.PreemptionsPerNodeHour, OnDemand: 0.89, Discount: 0.5, Window: 5 * time.Minute}
	j := plan.Job{GPUHours: 800, GPUs: 8, CheckpointCost: 90 * time.Second, RestartCost: 10 * time.Minute}
	want := plan.Expect(j, m)
	if p.RateBasis != "measured" || !near(p.PreemptionRatePercentPerHour, m.RatePercentPerHour) || p.OnDemandPerGPUHour != "0.89" ||
		p.PreemptibleDiscountPercent != "50" || p.DrainWindowSeconds != 300 || math.Abs(p.ExpectedCost-want.Cost) > 0.001 ||
		math.Abs(p.StandardCost-want.StandardCost) > 0.001 || p.IntervalSeconds != want.Interval.Seconds() || p.Runs < 100 ||
		p.Preemptible.ExpectedHours < p.StandardHours || p.Deadline != nil || p.Advice == "" {
		t.Fatalf("measured: %+v, want %+v", p, want)
	}
	var d apiv1.Plan
	e.do("p", "GET", planPath(ask("gpu_hours", "384", "checkpoint_seconds", "90", "restart_seconds", "720", "deadline_hours", "52",
		"rate_percent_per_hour", "4.1")...), "", 200, &d)
	if d.RateBasis != "asked" || d.PreemptionRatePercentPerHour != 4.1 || d.Deadline == nil || d.Deadline.Plan.MeetProbability != 1 ||
		d.Deadline.Greedy.Strategy != "greedy" || !d.Deadline.StandardMeets || d.Deadline.Plan.ExpectedCost >= d.Deadline.StandardCost ||
		!d.PreemptibleAlwaysPays || d.BreakEvenRatePercentPerHour == nil || *d.BreakEvenRatePercentPerHour <= plan.RealRate {
		t.Fatalf("deadline: %+v %+v", d, d.Deadline)
	}
	for _, tc := range []struct{ path, field string }{
		{planPath("gpu_type", "RTX_6000_PCI", "gpu_hours", "8"), "region"},
		{planPath("region", "us-central-2", "gpu_hours", "8"), "gpu_type"},
		{planPath(ask()...), "plan"},
		{planPath(ask("gpu_hours", "many")...), "gpu_hours"},
		{planPath(ask("gpu_hours", "8", "gpus", "12")...), "plan"},
		{planPath(ask("gpu_hours", "8", "gpus", "8.5")...), "gpus"},
		{planPath(ask("gpu_hours", "8", "checkpoint_seconds", "-1")...), "checkpoint_seconds"},
		{planPath(ask("gpu_hours", "8", "checkpoint_at_notice", "yes")...), "checkpoint_at_notice"},
		{planPath(ask("gpu_hours", "8", "rate_percent_per_hour", "1001")...), "rate_percent_per_hour"},
		{planPath(ask("gpu_hours", "8000000", "gpus", "8", "interval_seconds", "1", "rate_percent_per_hour", "1")...), "gpu_hours"},
		{planPath("region", "mars-1", "gpu_type", "RTX_6000_PCI", "gpu_hours", "8"), "region"},
	} {
		if got := e.apiErr("p", "GET", tc.path, "", 400); got.Field != tc.field {
			t.Errorf("%s: %+v, want field %s", tc.path, got, tc.field)
		}
	}
	e.apiErr("", "GET", planPath(ask("gpu_hours", "8")...), "", 401)
}

// TestPlansTakeTurns: plans compute one at a time (a busy server refuses
// after a short wait), and a project has one running at a time.
func TestPlansTakeTurns(t *testing.T) {
	e := newEnv(t)
	q := planPath("region", "us-central-2", "gpu_type", "RTX_6000_PCI", "gpu_hours", "8", "rate_percent_per_hour", "1")
	e.api.planners.acquire("project:p", 1) // a plan of p's is running
	if got := e.apiErr("p", "GET", q, "", 429); !strings.Contains(got.Message, "project p already has a plan running") {
		t.Errorf("a second plan of p's: %+v", got)
	}
	e.do("q", "GET", q, "", 200, nil) // another project's is answered
	e.api.planners.release("project:p")
	e.api.planSlot <- struct{}{} // another plan computes, and goes on
	start := time.Now()
	if got := e.apiErr("p", "GET", q, "", 429); !strings.Contains(got.Message, "busy") || time.Since(start) < planWait {
		t.Errorf("a plan while another computes: %+v after %s", got, time.Since(start))
	}
	<-e.api.planSlot
	e.do("p", "GET", q, "", 200, nil)
}
