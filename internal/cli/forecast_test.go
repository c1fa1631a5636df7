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
}
