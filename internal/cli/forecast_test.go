package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestCapacityForecast: `capacity forecast` asks for the pools and hours
// its flags say and prints each hour's expected GPUs and 90% interval,
// with a pool's note on too little history.
func TestCapacityForecast(t *testing.T) {
	f := newFakeAPI(t)
	h := t0.Truncate(time.Hour).Add(time.Hour)
	f.handle("GET /v1/capacity/forecast", 200, apiv1.CapacityForecast{At: t0, Pools: []apiv1.PoolForecast{{
		Region: "us-central-2", GPUType: "H100", CapacityGPUs: 64, Note: "the pool has 9.0 days of history; 2 hours have less than the four weeks a 90% interval needs",
		Hours: []apiv1.ForecastGPUs{{Start: h, ExpectedGPUs: 40.5, LowGPUs: 16, HighGPUs: 56, Samples: 10}, {Start: h.Add(time.Hour), ExpectedGPUs: 48, LowGPUs: 40, HighGPUs: 64, Samples: 10}},
	}}})
	r := f.run("capacity", "forecast", "--region", "us-central-2", "--gpu-type", "H100", "--hours", "2")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "capacity forecast", r.stdout,
		"REGION         GPU_TYPE   HOUR", "EXPECTED   90% INTERVAL   OF",
		"40.5       16 - 56        64", "48         40 - 64        64",
		"us-central-2/H100: the pool has 9.0 days of history")
	reqs := f.requests()
	if q := reqs[len(reqs)-1].Query; !strings.Contains(q, "region=us-central-2") || !strings.Contains(q, "gpu_type=H100") || !strings.Contains(q, "hours=2") {
		t.Errorf("query %q", q)
	}
	if strings.Contains(r.stdout, "BOOKED") {
		t.Errorf("a BOOKED column with no booking:\n%s", r.stdout)
	}

	// Hours a booking holds say how much.
	f = newFakeAPI(t)
	f.handle("GET /v1/capacity/forecast", 200, apiv1.CapacityForecast{At: t0, Pools: []apiv1.PoolForecast{{
		Region: "us-central-2", GPUType: "H100", CapacityGPUs: 64,
		Hours: []apiv1.ForecastGPUs{{Start: h, ExpectedGPUs: 40, LowGPUs: 16, HighGPUs: 56, Samples: 20}, {Start: h.Add(time.Hour), ExpectedGPUs: 24, LowGPUs: 0, HighGPUs: 48, Samples: 20, BookedGPUs: 16}},
	}}})
	r = f.run("capacity", "forecast")
	mustContain(t, "capacity forecast with a booking", r.stdout, "OF   BOOKED", "0 - 48         64   16")
}

// TestPlanOptions: `plan options` sends the job and the any_of lists and
// prints the pools best first, saying which cannot lend the job's GPUs.
func TestPlanOptions(t *testing.T) {
	f := newFakeAPI(t)
	meet := 1.0
	f.handle("GET /v1/plan/options", 200, apiv1.PlanOptions{GPUHours: 384, GPUs: 16, DeadlineHours: 52, Options: []apiv1.PlanOption{
		{Rank: 1, Region: "us-central-2", GPUType: "H200", OnDemandPerGPUHour: "3.50", PreemptionRatePercentPerHour: 1.2, ExpectedCost: 700.5, ExpectedHours: 25, P90Hours: 27, MeetProbability: &meet, LendableGPUs: 64, ForecastSamples: 20, Fits: true},
		{Rank: 2, Region: "us-central-2", GPUType: "H100", OnDemandPerGPUHour: "2.99", PreemptionRatePercentPerHour: 4.1, ExpectedCost: 650, ExpectedHours: 26, P90Hours: 30, MeetProbability: &meet, LendableGPUs: 8, ForecastSamples: 20},
	}})
	r := f.run("plan", "options", "--gpu-hours", "384", "--gpus", "16", "--deadline", "52h", "--gpu-types", "H100,H200")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "plan options", r.stdout, "RANK", "MEETS DEADLINE", "LENDABLE NEXT HOUR",
		"1      us-central-2   H200", "100.0%", "8 (too few)")
	reqs := f.requests()
	if q := reqs[len(reqs)-1].Query; !strings.Contains(q, "gpu_types=H100%2CH200") || !strings.Contains(q, "gpus=16") || strings.Contains(q, "region=") {
		t.Errorf("query %q", q)
	}
	if r := f.run("plan", "options"); r.err == nil || !strings.Contains(r.err.Error(), "--gpu-hours") {
		t.Errorf("no work: %v", r.err)
	}
}
