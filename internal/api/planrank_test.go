package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
)

// TestPlanOptions: a job is planned in every pool it may run in, each at
// its own price and measured rate, and ranked: a pool forecast to lack
// the job's GPUs next hour goes after those that have them; any_of lists
// narrow the pools; bad questions name the field.
func TestPlanOptions(t *testing.T) {
	e := newEnv(t)
	e.create("p", createBody)
	e.settle()
	e.clk.Step(8 * 24 * time.Hour) // a week of history for the forecast
	var o apiv1.PlanOptions
	e.do("p", "GET", "/v1/plan/options?gpu_hours=800&gpus=16&checkpoint_seconds=90", "", 200, &o)
	if len(o.Options) != 2 || o.GPUs != 16 {
		t.Fatalf("options %+v", o)
	}
	first, second := o.Options[0], o.Options[1]
	// The L40S pool has 8 GPUs: it cannot lend 16.
	if first.GPUType != "RTX_6000_PCI" || !first.Fits || first.Rank != 1 || first.OnDemandPerGPUHour != "0.89" || first.ForecastSamples == 0 {
		t.Fatalf("first %+v", first)
	}
	if second.GPUType != "L40S" || second.Fits || second.LendableGPUs != 8 || second.Rank != 2 || second.OnDemandPerGPUHour != "1.09" ||
		second.ExpectedCost <= 0 || second.Plan.Region != "eu-west-1" || second.MeetProbability != nil {
		t.Fatalf("second %+v", second)
	}
	e.do("p", "GET", "/v1/plan/options?gpu_hours=800&gpus=8&regions=eu-west-1&deadline_hours=200", "", 200, &o)
	if len(o.Options) != 1 || o.Options[0].Region != "eu-west-1" || !o.Options[0].Fits || o.Options[0].MeetProbability == nil || *o.Options[0].MeetProbability != 1 {
		t.Fatalf("one region with a deadline: %+v", o.Options)
	}
	for _, tc := range []struct{ query, field string }{
		{"?gpu_hours=8&regions=mars", "regions"},
		{"?gpu_hours=8&gpu_types=H100", "gpu_types"},
		{"?gpu_hours=8&regions=eu-west-1&gpu_types=RTX_6000_PCI", "gpu_types"},
		{"?gpu_hours=many", "gpu_hours"},
	} {
		if got := e.apiErr("p", "GET", "/v1/plan/options"+tc.query, "", 400); got.Field != tc.field {
			t.Errorf("%s: %+v, want field %s", tc.query, got, tc.field)
		}
	}
}

// TestRankOptions: with a deadline, options meeting it in 99% of runs
// come first by cost, then the rest by their chance; options that do not
// fit go last.
func TestRankOptions(t *testing.T) {
	p := func(f float64) *float64 { return &f }
	os := []apiv1.PlanOption{
		{GPUType: "cheap-unsure", ExpectedCost: 10, MeetProbability: p(0.8), Fits: true},
		{GPUType: "dear-sure", ExpectedCost: 30, MeetProbability: p(1), Fits: true},
		{GPUType: "cheap-sure", ExpectedCost: 20, MeetProbability: p(0.995), Fits: true},
		{GPUType: "cheapest-full", ExpectedCost: 1, MeetProbability: p(1), Fits: false},
		{GPUType: "unsurer", ExpectedCost: 5, MeetProbability: p(0.5), Fits: true},
	}
	rankOptions(os, true)
	var got []string
	for i, o := range os {
		if o.Rank != i+1 {
			t.Errorf("rank %d at %d", o.Rank, i)
		}
		got = append(got, o.GPUType)
	}
	want := "[cheap-sure dear-sure cheap-unsure unsurer cheapest-full]"
	if s := fmt.Sprint(got); s != want {
		t.Errorf("order %s, want %s", s, want)
	}
}

// TestPlanOptionsBoundsThePools: a question that would plan more pools
// than maxOptions is refused before any is planned.
func TestPlanOptionsBoundsThePools(t *testing.T) {
	var ms []domain.Machine
	for i := range maxOptions + 1 {
		ms = append(ms, domain.Machine{ID: fmt.Sprint(i), Region: fmt.Sprintf("r-%02d", i), GPUType: "H100"})
	}
	if _, err := anyOfPools(ms, "", ""); err == nil || !strings.Contains(err.Error(), "33 pools match") {
		t.Errorf("33 pools: %v", err)
	}
	if p, err := anyOfPools(ms, "r-01,r-02", "H100"); err != nil || len(p) != 2 {
		t.Errorf("two regions: %v %v", p, err)
	}
}
